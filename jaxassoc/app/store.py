"""The result store: per-item scores and aggregates as Parquet and CSV, plus ``results.json``.

Every row carries the job's provenance (model and tokenizer hashes, dataset version, template, every
statistics option, seed, package versions, device kind), so a table pulled out of a sweep still says
where each number came from. Writes are atomic: each file is written to a temporary name in the same
folder and renamed, so a killed run leaves either the old file or the new one, never half of one.
``results.json`` is written last and marks a finished job (resume looks for it).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Callable

import pandas as pd

RESULTS_JSON = "results.json"


def atomic_write(path: Path, write: Callable[[Path], None]) -> None:
    """Call ``write(tmp)`` on a temporary file next to ``path``, then rename it onto ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        write(Path(tmp))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def with_provenance(table: pd.DataFrame, provenance: dict[str, Any]) -> pd.DataFrame:
    """The table with one ``prov_*`` column per provenance field (scalars only; nested values as JSON)."""
    out = table.copy()
    for key, value in provenance.items():
        out[f"prov_{key}"] = value if isinstance(value, (str, int, float, bool, type(None))) else json.dumps(
            value, sort_keys=True, default=str
        )
    return out


def write_table(folder: Path, stem: str, table: pd.DataFrame) -> None:
    """``stem.parquet`` and ``stem.csv``, atomically. Parquet without pandas' index, deterministic bytes."""
    atomic_write(folder / f"{stem}.parquet", lambda p: table.to_parquet(p, index=False, compression="zstd"))
    atomic_write(folder / f"{stem}.csv", lambda p: table.to_csv(p, index=False))


def write_results(
    folder: Path, items: pd.DataFrame, aggregates: pd.DataFrame, provenance: dict[str, Any], summary: dict[str, Any]
) -> None:
    """Write a finished job: items and aggregates with provenance, then ``results.json`` last."""
    folder = Path(folder)
    write_table(folder, "items", with_provenance(items, provenance))
    write_table(folder, "aggregates", with_provenance(aggregates, provenance))
    record = {"provenance": provenance, "summary": summary, "aggregates": aggregates.to_dict(orient="records")}
    text = json.dumps(record, indent=2, sort_keys=True, default=_json_default)
    atomic_write(folder / RESULTS_JSON, lambda p: p.write_text(text))


def is_finished(folder: Path, config_hash: str) -> bool:
    """True when ``folder`` holds the results of a job with this config (what resume skips)."""
    path = Path(folder) / RESULTS_JSON
    if not path.exists():
        return False
    try:
        return json.loads(path.read_text())["provenance"]["config_hash"] == config_hash
    except (json.JSONDecodeError, KeyError, TypeError):
        return False


def _json_default(value: Any) -> Any:
    if hasattr(value, "item"):  # numpy / jax scalars
        return value.item()
    if hasattr(value, "tolist"):
        return value.tolist()
    return str(value)
