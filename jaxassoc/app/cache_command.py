"""The ``jaxassoc-cache`` command: list or clear the on-disk cache of model outputs.

``jaxassoc-cache list`` prints one line per entry (namespace, key, size, time since last use, and the models,
datasets, metrics and interventions of the jobs that used it), least recently used first, and the total;
``jaxassoc-cache clear`` removes every entry, ``--older-than 7d`` only those not used for a week. Both select
with ``--model``, ``--dataset``, ``--metric`` and ``--intervention`` (the entries a job of that name used)
and act on ``--cache-dir`` (default: the app's, :func:`jaxassoc.app.cache.default_cache_dir`).
"""

from __future__ import annotations

import argparse
import re
import time
from pathlib import Path

from jaxassoc.app.cache import LABELS, Entry, clear, default_cache_dir, entries, format_size
from jaxassoc.app.console import closes_quietly

UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def duration(text: str) -> float:
    """Seconds of ``30m``, ``12h``, ``7d`` or a plain number of days."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", text)
    if not match:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration; use e.g. 30m, 12h, 7d (a bare number is days)")
    return float(match[1]) * UNITS[match[2] or "d"]


def format_age(seconds: float) -> str:
    """``45 s``, ``12 min``, ``3.0 h``, ``2.5 d``."""
    if seconds < 60:
        return f"{max(seconds, 0):.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


def listing(cache_dir: Path, found: list[Entry], now: float) -> str:
    """The table ``jaxassoc-cache list`` prints: an entry a line, with the labels of the jobs that used it
    (``-`` for an entry no job labelled)."""
    lines = [f"cache: {cache_dir}"]
    if found:
        rows = [
            [
                e.namespace,
                e.path.stem[:12],
                format_size(e.size),
                f"{format_age(now - e.last_used)} ago",
                *(",".join(values) or "-" for values in e.labels().values()),
            ]
            for e in found
        ]
        header = ["namespace", "key", "size", "last used", *LABELS]
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
        for row in [header, *rows]:
            cells = [c.rjust(w) if i == 2 else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))]
            lines.append("  ".join(cells).rstrip())
    lines.append(f"total: {len(found)} entries, {format_size(sum(e.size for e in found))}")
    return "\n".join(lines)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="jaxassoc-cache", description="List or clear jaxassoc's cache of model outputs.")
    p.add_argument(
        "--cache-dir",
        type=str,  # a Path would read "" as "."
        default=None,
        help="the cache folder (default: $JAXASSOC_CACHE, else the user cache folder)",
    )
    commands = p.add_subparsers(dest="command", required=True)
    list_cmd = commands.add_parser(
        "list", help="one line per entry (namespace, key, size, last use, the jobs' labels) and the total"
    )
    clear_cmd = commands.add_parser(
        "clear", help="remove entries (all, those not used for --older-than, those of a --model, ...)"
    )
    for command in (list_cmd, clear_cmd):
        for label in LABELS:
            command.add_argument(
                f"--{label}", default=None, metavar="NAME", help=f"only entries a job with this {label} used"
            )
    clear_cmd.add_argument(
        "--older-than",
        type=duration,
        default=None,
        metavar="AGE",
        help="only entries not used for AGE (30m, 12h, 7d; a bare number is days)",
    )
    return p


@closes_quietly("jaxassoc-cache")
def main(argv: list[str] | None = None) -> None:
    """Console entry point (``jaxassoc-cache``)."""
    p = parser()
    args = p.parse_args(argv)
    if args.cache_dir is not None and not str(args.cache_dir).strip():
        p.error("--cache-dir is empty: name the cache folder")
    cache_dir = (Path(args.cache_dir) if args.cache_dir is not None else default_cache_dir()).expanduser()
    if args.cache_dir is not None and cache_dir.exists() and not cache_dir.is_dir():
        p.error(f"--cache-dir {cache_dir}: is a file, not a folder; give the cache folder")
    if args.cache_dir is not None and not cache_dir.is_dir():  # a typo must not read as an empty cache
        p.error(f"--cache-dir {cache_dir}: no such folder")
    now = time.time()
    where = {label: getattr(args, label) for label in LABELS}
    if args.command == "list":
        found = [e for e in entries(cache_dir) if e.matches(where)] if cache_dir.is_dir() else []
        print(listing(cache_dir, found, now))
        return
    removed = clear(cache_dir, older_than=args.older_than, now=now, where=where) if cache_dir.is_dir() else []
    print(f"removed {len(removed)} entries ({format_size(sum(e.size for e in removed))}) from {cache_dir}")


if __name__ == "__main__":
    main()
