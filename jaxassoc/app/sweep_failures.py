"""A sweep goes on past a failed job and ends with a summary of the failures.

Hydra's launchers stop a sweep at the first job that raises ``SystemExit`` (the basic launcher at once; the
others report the first failure and drop the rest of the story). So in a sweep (``-m``) the app does not
exit on a job's error: it logs the error into the job's log, writes it beside the job as ``error.json``
(:func:`record`) and returns, and the sweep goes on. When it ends, the process that started it reads
those records (:func:`failures`) and exits non-zero with :func:`summary`: which jobs failed, why, and where
their folders and logs are. The records live in the job folders, so they reach that process from any
launcher: joblib's worker processes, submitit's, SLURM's nodes on a shared file system.

:class:`SweepSummary` (a Hydra callback named in ``conf/config.yaml``) notes, when a sweep starts, its
folder and an id that the jobs copy into their records (``JAXASSOC_SWEEP_ID``, inherited by the workers),
so that records an earlier sweep left in the same folder are not counted. A job clears its own record when
it starts, so rerunning the sweep into the same folder retries the failed jobs and forgets their errors.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

RECORD = "error.json"
SWEEP_ID = "JAXASSOC_SWEEP_ID"

_sweep: dict[str, Any] | None = None
"""The sweep this process started (its folder and id), set by :class:`SweepSummary`; None otherwise."""


class SweepSummary(Callback):
    """Hydra callback (``hydra.callbacks.jaxassoc_sweep`` in ``conf/config.yaml``): at the start of a sweep,
    note its folder and give its jobs an id (``JAXASSOC_SWEEP_ID``) for their failure records."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        global _sweep
        folder = Path(str(OmegaConf.select(config, "hydra.sweep.dir"))).absolute()
        sweep_id = f"{os.getpid()}-{time.time_ns()}"
        os.environ[SWEEP_ID] = sweep_id
        _sweep = {"dir": folder, "id": sweep_id}


def forget() -> None:
    """Forget a sweep an earlier command of this process started and did not end (it raised)."""
    global _sweep
    _sweep = None
    os.environ.pop(SWEEP_ID, None)


def clear(output_dir: Path) -> None:
    """Remove a job's failure record (a job starting again in its folder)."""
    (output_dir / RECORD).unlink(missing_ok=True)


def record(output_dir: Path, overrides: list[str], error: str, log_file: Path | None) -> None:
    """Write a failed job's record into its folder: its overrides, the error and its log file."""
    output_dir.mkdir(parents=True, exist_ok=True)
    entry = {
        "sweep": os.environ.get(SWEEP_ID),
        "overrides": overrides,
        "error": error,
        "folder": str(output_dir.absolute()),
        "log": str(log_file.absolute()) if log_file is not None and log_file.exists() else None,
    }
    temporary = output_dir / f".{RECORD}.tmp"
    temporary.write_text(json.dumps(entry, indent=1))
    temporary.replace(output_dir / RECORD)


def failures() -> tuple[Path, list[dict]] | None:
    """The sweep this process ran (its folder) and the records of its failed jobs, sorted by folder; None
    when this process ran no sweep. Forgets the sweep (one summary per sweep)."""
    global _sweep
    if _sweep is None:
        return None
    sweep, _sweep = _sweep, None
    os.environ.pop(SWEEP_ID, None)
    found = []
    for path in sorted(sweep["dir"].rglob(RECORD)) if sweep["dir"].is_dir() else []:
        try:
            entry = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(entry, dict) and entry.get("sweep") == sweep["id"]:
            found.append(entry)
    return sweep["dir"], found


def _shown(path: str | None) -> str:
    """A path relative to the working folder when it lies inside it."""
    if path is None:
        return "-"
    try:
        return str(Path(path).relative_to(Path.cwd()))
    except ValueError:
        return path


def summary(folder: Path, failed: list[dict], n_jobs: int | None) -> str:
    """The lines that end a sweep with failed jobs: each job's overrides, error, folder and log."""
    of = f" of {n_jobs}" if n_jobs else ""
    lines = [f"jaxassoc: error: {len(failed)}{of} job(s) of the sweep failed; the others ran to the end:"]
    for entry in failed:
        name = " ".join(entry.get("overrides") or []) or Path(entry["folder"]).name
        error = str(entry.get("error")).strip().splitlines() or [""]
        lines += [
            f"  {name}",
            f"    error: {error[0]}{' ...' if len(error) > 1 else ''}",
            f"    log:   {_shown(entry.get('log') or entry.get('folder'))}",
        ]
    lines.append(
        f"Rerunning the same command with hydra.sweep.dir={_shown(str(folder))} reruns the failed jobs only "
        "(finished jobs are skipped)."
    )
    return "\n".join(lines)
