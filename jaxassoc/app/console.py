"""What every console script shares: a reader that stops reading early (``jaxassoc --help | head``) ends
the command quietly, and so does Ctrl-C, with one line and no traceback."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import TypeVar

F = TypeVar("F", bound=Callable[..., None])

SIGPIPE_STATUS = 141
"""The exit status of a command whose output pipe closed (128 + SIGPIPE), as ``yes | head`` gives."""
SIGINT_STATUS = 130
"""The exit status after Ctrl-C (128 + SIGINT), as a shell reports a command it interrupted."""


def closes_quietly(program: str) -> Callable[[F], F]:
    """A decorator: the console script ``program``'s ``main`` ending with :data:`SIGPIPE_STATUS` and no
    traceback when its standard output is a pipe that the reader closed, and with :data:`SIGINT_STATUS` and
    one line on Ctrl-C (a job's own Ctrl-C line, which says how to resume, comes first:
    :func:`jaxassoc.app.main.interrupted`)."""

    def wrap(entry: F) -> F:
        @functools.wraps(entry)
        def run(*args, **kwargs):
            try:
                try:
                    entry(*args, **kwargs)
                finally:  # also after argparse's --help exit: a closed pipe shows here, not at the interpreter's exit
                    sys.stdout.flush()
            except KeyboardInterrupt:
                print(f"{program}: interrupted", file=sys.stderr)
                sys.exit(SIGINT_STATUS)
            except BrokenPipeError:
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, sys.stdout.fileno())  # the interpreter's last flush then writes nowhere
                sys.exit(SIGPIPE_STATUS)

        return run  # type: ignore[return-value]

    return wrap
