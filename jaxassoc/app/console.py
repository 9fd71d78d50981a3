"""What every console script shares: a reader that stops reading early (``jaxassoc --help | head``) ends
the command quietly, with no traceback."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import TypeVar

F = TypeVar("F", bound=Callable[..., None])

SIGPIPE_STATUS = 141
"""The exit status of a command whose output pipe closed (128 + SIGPIPE), as ``yes | head`` gives."""


def closes_quietly(entry: F) -> F:
    """``entry`` (a console script's ``main``) ending with :data:`SIGPIPE_STATUS` and no traceback when its
    standard output is a pipe that the reader closed."""

    @functools.wraps(entry)
    def run(*args, **kwargs):
        try:
            try:
                entry(*args, **kwargs)
            finally:  # also after argparse's --help exit: a closed pipe shows here, not at the interpreter's exit
                sys.stdout.flush()
        except BrokenPipeError:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())  # the interpreter's last flush then writes nowhere
            sys.exit(SIGPIPE_STATUS)

    return run  # type: ignore[return-value]
