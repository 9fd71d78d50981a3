"""Per-stage log lines with timing, and progress bars that quiet mode turns off.

Every job wraps its heavy steps in :func:`stage`, which logs one line when the step ends, e.g.
``rpam: 1,234 prompts scored in 12.3 s`` or ``weat: whitening fitted on 20,000 vectors in 3.1 s``.
The lines go to the ``jaxassoc`` logger at INFO; ``quiet=true`` sets that logger to WARNING, so they
vanish while errors stay. :func:`progress` wraps a loop in a tqdm bar unless ``quiet``.
"""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass
from typing import Iterable, Iterator, TypeVar

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


def progress(items: Iterable[T], desc: str, *, quiet: bool, unit: str = "it", total: int | None = None) -> Iterable[T]:
    """``items`` in a tqdm progress bar (on stderr), or unchanged when ``quiet``."""
    if quiet:
        return items
    from tqdm.auto import tqdm

    return tqdm(items, desc=desc, unit=unit, total=total, leave=False)
