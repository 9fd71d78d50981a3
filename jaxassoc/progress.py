"""Per-stage log lines with timing, and progress bars on terminals only.

Every job wraps its heavy steps in :func:`stage`, which logs one line when the step ends, e.g.
``rpam: 1,234 prompts scored in 12.3 s`` or ``weat: whitening fitted on 20,000 vectors in 3.1 s``.
The lines go to the ``jaxassoc`` logger at INFO; ``quiet=true`` sets that logger to WARNING, so they
vanish while errors stay. :func:`progress` wraps a loop in a tqdm bar unless ``quiet`` or unless stderr is
not a terminal (:func:`bars_wanted`): a bar redraws itself with carriage returns, which a log file or a
SLURM output file keeps as one flood of partial lines, so there the loop logs one line every
:data:`HEARTBEAT_SECONDS` instead (done/total and the time left, :func:`heartbeat`).
The app turns off the bars of the loops it does not wrap itself (batches, checkpoint reading) the same way,
through ``Job.quiet`` and the loader's ``progress`` flag.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, TextIO, TypeVar

log = logging.getLogger("jaxassoc")
T = TypeVar("T")

HEARTBEAT_SECONDS = 30.0
"""How often a loop without a progress bar logs how far it is (:func:`heartbeat`)."""


@dataclass
class Stage:
    """What a stage reports: set ``count`` inside the ``with`` block (e.g. the number of prompts)."""

    job: str
    what: str
    count: int | None = None
    seconds: float | None = None

    def line(self) -> str:
        counted = f"{self.count:,} {self.what}" if self.count is not None else self.what
        return f"{self.job}: {counted} in {self.seconds:.1f} s"


@contextlib.contextmanager
def stage(job: str, what: str, count: int | None = None) -> Iterator[Stage]:
    """Time the block and log ``"<job>: <count> <what> in <seconds> s"`` when it ends without error.

    ``what`` reads after the count: ``stage("rpam", "prompts scored", len(prompts))``. The count may also
    be set on the yielded :class:`Stage` once it is known. A block that raises logs nothing.
    """
    record = Stage(job, what, count)
    start = time.perf_counter()
    yield record
    record.seconds = time.perf_counter() - start
    log.info("%s", record.line())


def bars_wanted(stream: TextIO | None = None) -> bool:
    """True when progress bars can be drawn on ``stream`` (default: the current ``sys.stderr``): it is a
    terminal, or this is a Jupyter kernel (tqdm draws a widget there). A file, a pipe or a captured stream
    gets no bars."""
    stream = sys.stderr if stream is None else stream
    try:
        if stream.isatty():
            return True
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False
    return "ipykernel" in sys.modules


def progress(items: Iterable[T], desc: str, *, quiet: bool, unit: str = "it", total: int | None = None) -> Iterable[T]:
    """``items`` in a tqdm progress bar (on stderr) when stderr is a terminal and not ``quiet``; otherwise
    through :func:`heartbeat`, which logs a line every :data:`HEARTBEAT_SECONDS` at INFO (``quiet=true``
    sets the ``jaxassoc`` logger to WARNING, which hides it)."""
    if quiet or not bars_wanted():
        return heartbeat(items, desc, unit=unit, total=total)
    from tqdm.auto import tqdm

    return tqdm(items, desc=desc, unit=unit, total=total, leave=False)


def heartbeat(
    items: Iterable[T],
    desc: str,
    *,
    unit: str = "it",
    total: int | None = None,
    every: float = HEARTBEAT_SECONDS,
    clock: Callable[[], float] = time.monotonic,
) -> Iterator[T]:
    """``items`` unchanged, logging ``"<desc>: 12/40 batches (30 %) in 31 s, about 1 min 12 s left"`` at INFO
    whenever ``every`` seconds have passed since the last line (none for a loop that ends sooner). ``total``
    defaults to ``len(items)``; without one the line has no share and no time left."""
    if total is None and hasattr(items, "__len__"):
        total = len(items)  # type: ignore[arg-type]
    start = last = clock()
    for done, item in enumerate(items, 1):
        yield item
        now = clock()
        if now - last >= every:
            last = now
            log.info("%s", heartbeat_line(desc, done, total, now - start, unit))


def heartbeat_line(desc: str, done: int, total: int | None, seconds: float, unit: str) -> str:
    """One :func:`heartbeat` line: what is done, of how many, in how long, and the time left at that pace."""
    if not total:
        return f"{desc}: {done:,} {plural(unit, done)} in {duration(seconds)}"
    left = seconds / done * (total - done)
    return (
        f"{desc}: {done:,}/{total:,} {plural(unit, total)} ({100 * done / total:.0f} %) in "
        f"{duration(seconds)}, about {duration(left)} left"
    )


def plural(unit: str, n: int) -> str:
    """``batch`` -> ``batches``, ``chunk`` -> ``chunks`` unless ``n`` is 1."""
    if n == 1:
        return unit
    return unit + ("es" if unit.endswith(("ch", "sh", "s", "x")) else "s")


def duration(seconds: float) -> str:
    """``45 s``, ``3 min 12 s``, ``1 h 05 min``."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"
