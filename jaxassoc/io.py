"""Atomic file writes, and clean-up of the temporaries a killed writer leaves behind.

:func:`atomic_write` writes to a temporary file next to the target and renames it onto the target, so a
reader sees the old file or the new one, never half of one. The temporary's name records the writer's
host and process id (``.<name>~<host>~<pid>~<token>.tmp``), so :func:`remove_stale_temporaries` can
delete those whose writer died (``kill -9``, power loss) without touching a live writer's. New files get
the permissions of the user's umask, like any other file the user creates.

Only the standard library is imported here, so every layer (embeddings, app) can use it.
"""

from __future__ import annotations

import logging
import os
import re
import secrets
import socket
from pathlib import Path
from typing import Callable

log = logging.getLogger("jaxassoc")

_TEMPORARY = re.compile(r"^\..+~(?P<host>[A-Za-z0-9.-]+)~(?P<pid>\d+)~[0-9a-f]+\.tmp$")


def host_name() -> str:
    """Where process ids are unique, as temporary names record it: the host's name, and on Linux the
    process-id namespace (two containers on one host may share a name but not their process ids).
    Only letters, digits, dots and dashes."""
    try:
        namespace = re.sub(r"\D", "", os.readlink("/proc/self/ns/pid"))
    except OSError:
        namespace = ""
    name = re.sub(r"[^A-Za-z0-9.-]", "-", socket.gethostname()) or "localhost"
    return f"{name}-{namespace}" if namespace else name


def atomic_write(path: Path, write: Callable[[Path], None]) -> None:
    """Call ``write(tmp)`` on a new temporary file next to ``path``, then rename it onto ``path``.

    The temporary is created empty with mode ``0o666`` less the umask; ``write`` fills it (by its path).
    If ``write`` raises (or the process is interrupted) the temporary is removed and ``path`` is untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        tmp = path.parent / f".{path.name}~{host_name()}~{os.getpid()}~{secrets.token_hex(4)}.tmp"
        try:
            os.close(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
            break
        except FileExistsError:
            continue
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def pid_alive(pid: int) -> bool:
    """True when a process with this id exists on this host (a recycled id counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def remove_stale_temporaries(folder: Path) -> list[Path]:
    """Delete the temporaries in ``folder`` (not below it) whose writer on this host is dead; returns them.

    Temporaries of live writers and of other hosts (a shared file system) are left alone.
    """
    folder = Path(folder)
    if not folder.is_dir():
        return []
    removed, host = [], host_name()
    for entry in os.scandir(folder):
        match = _TEMPORARY.match(entry.name)
        if match is None or match["host"] != host or pid_alive(int(match["pid"])):
            continue
        try:
            Path(entry.path).unlink()
        except FileNotFoundError:
            continue
        except OSError as e:
            log.warning("cannot remove the stale temporary %s: %s", entry.path, e)
            continue
        log.info("removed %s, left by a writer (pid %s) that died", entry.path, match["pid"])
        removed.append(Path(entry.path))
    return removed


def trim_folder(folder: Path, max_bytes: int) -> list[Path]:
    """Delete the least recently modified files directly in ``folder`` until it holds at most ``max_bytes``;
    the removed files. Files removed meanwhile by another process are skipped."""
    files = []
    for path in Path(folder).iterdir():
        try:
            info = path.stat()
        except FileNotFoundError:
            continue
        if path.is_file():
            files.append((info.st_mtime, info.st_size, path))
    total, removed = sum(size for _, size, _ in files), []
    for _, size, path in sorted(files):
        if total <= max_bytes:
            break
        path.unlink(missing_ok=True)
        total -= size
        removed.append(path)
    return removed
