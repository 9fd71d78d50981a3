"""Per-stage log lines with timing, and progress bars on terminals only.

Every job wraps its heavy steps in :func:`stage`, which logs one line when the step ends, e.g.
``rpam: 1,234 prompts scored in 12.3 s`` or ``weat: whitening fitted on 20,000 vectors in 3.1 s``.
The lines go to the ``jaxassoc`` logger at INFO; ``quiet=true`` sets that logger to WARNING, so they
vanish while errors stay. :func:`progress` wraps a loop in a tqdm bar unless ``quiet`` or unless stderr is
not a terminal (:func:`bars_wanted`): a bar redraws itself with carriage returns, which a log file or a
SLURM output file keeps as one flood of partial lines, so there the stage lines alone report progress.
The app turns off the bars of the loops it does not wrap itself (batches, checkpoint reading) the same way,
through ``Job.quiet`` and the loader's ``progress`` flag.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from dataclasses import dataclass
from typing import Iterable, Iterator, TextIO, TypeVar

log = logging.getLogger("jaxassoc")
T = TypeVar("T")


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
    """``items`` in a tqdm progress bar (on stderr), or unchanged when ``quiet`` or when stderr is not a
    terminal (:func:`bars_wanted`)."""
    if quiet or not bars_wanted():
        return items
    from tqdm.auto import tqdm

    return tqdm(items, desc=desc, unit=unit, total=total, leave=False)
