"""The result store: per-item scores and aggregates as Parquet and CSV, plus ``results.json``.

Every row carries the job's provenance (model and tokenizer hashes, dataset version, template, every
statistics option, seed, package versions, device kind), so a table pulled out of a sweep still says
where each number came from. Writes are atomic: each file is written to a temporary name in the same
folder and renamed (:func:`jaxassoc.io.atomic_write`), so a killed run leaves either the old file or the
new one, never half of one. ``results.json`` is written last and marks a finished job: resume reuses it
only while the inputs it records (config, model files, dataset version) are unchanged and every result
file is intact (:func:`reuse_blocker`). It is strict JSON: undefined numbers (NaN, ±inf) are ``null``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from jaxassoc.io import atomic_write
from jaxassoc.models import loading

RESULTS_JSON = "results.json"
NO_RESULTS = f"no {RESULTS_JSON}"
RESULT_FILES = ("items.parquet", "items.csv", "aggregates.parquet", "aggregates.csv")
# Files a tokenizer is read from: the loader's sets, and the special-token files beside them.
TOKENIZER_FILES = frozenset(f for files in loading.TOKENIZER_FILES for f in files) | {
    "special_tokens_map.json",
    "added_tokens.json",
}


def with_provenance(table: pd.DataFrame, provenance: dict[str, Any]) -> pd.DataFrame:
    """The table with one ``prov_*`` column per provenance field (scalars only; nested values as JSON)."""
    out = table.copy()
    for key, value in provenance.items():
        out[f"prov_{key}"] = (
            value
            if isinstance(value, (str, int, float, bool, type(None)))
            else json.dumps(value, sort_keys=True, default=str)
        )
    return out


def write_table(folder: Path, stem: str, table: pd.DataFrame, *, csv_provenance: bool = True) -> None:
    """``stem.parquet`` and ``stem.csv``, atomically. Parquet without pandas' index, deterministic bytes.
    ``csv_provenance=False`` leaves the ``prov_*`` columns out of the CSV (Parquet stores a repeated value
    once; CSV would repeat ~1.5 kB on every row of a large item table)."""
    csv = table if csv_provenance else table.drop(columns=[c for c in table.columns if c.startswith("prov_")])
    atomic_write(folder / f"{stem}.parquet", lambda p: table.to_parquet(p, index=False, compression="zstd"))
    atomic_write(folder / f"{stem}.csv", lambda p: csv.to_csv(p, index=False))


def write_results(
    folder: Path,
    items: pd.DataFrame,
    aggregates: pd.DataFrame,
    provenance: dict[str, Any],
    summary: dict[str, Any],
    *,
    inputs: dict[str, Any] | None = None,
    extra_files: tuple[str, ...] = (),
) -> None:
    """Write a finished job: items and aggregates with provenance (``items.csv`` without it: it is in
    ``items.parquet``, ``aggregates.*`` and ``results.json``), then ``results.json`` last.

    ``results.json`` also records ``inputs`` (the fingerprint of everything the result depends on, see
    :func:`reuse_blocker`; without it resume never reuses the result) and the size of every result file,
    ``extra_files`` (e.g. figures) included.
    """
    folder = Path(folder)
    write_table(folder, "items", with_provenance(items, provenance), csv_provenance=False)
    write_table(folder, "aggregates", with_provenance(aggregates, provenance))
    files = {name: (folder / name).stat().st_size for name in (*RESULT_FILES, *extra_files)}
    record = {
        "provenance": provenance,
        "summary": summary,
        "aggregates": aggregates.to_dict(orient="records"),
        "inputs": inputs,
        "files": files,
    }
    text = json_text(record)
    atomic_write(folder / RESULTS_JSON, lambda p: p.write_text(text))


def json_text(record: Any) -> str:
    """Strict JSON: NaN and ±inf as ``null`` (JSON has no such numbers), NumPy scalars and arrays as numbers
    and lists, keys sorted."""
    return json.dumps(_plain(record), indent=2, sort_keys=True, default=str, allow_nan=False)


def reuse_blocker(folder: Path, inputs: dict[str, Any]) -> str | None:
    """None when ``folder`` holds a finished, intact result of a job with these ``inputs`` (resume reuses
    it); otherwise why not: ``"no results.json"``, ``"weights changed: model.safetensors"``,
    ``"aggregates.parquet missing"``, ...

    ``inputs`` (see :func:`jaxassoc.app.main.job_inputs`) fingerprints the config, the model's files and
    the dataset version; every result file must still have the size recorded, and the Parquet files must
    be readable.
    """
    path = Path(folder) / RESULTS_JSON
    if not path.exists():
        return NO_RESULTS
    try:
        record = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        return f"{RESULTS_JSON} unreadable ({type(e).__name__}: {e})"
    recorded, files = (record.get("inputs"), record.get("files")) if isinstance(record, dict) else (None, None)
    if not isinstance(recorded, dict) or not isinstance(files, dict):
        return f"{RESULTS_JSON} records no input fingerprint (written by an older jaxassoc, or without inputs)"
    changed = _changed_inputs(recorded, inputs)
    if changed:
        return changed
    for name, size in files.items():
        file = Path(folder) / name
        if not file.is_file():
            return f"{name} missing"
        if file.stat().st_size != size:
            return f"{name} has {file.stat().st_size} bytes, {size} when written"
        if name.endswith(".parquet"):
            try:
                pq.read_metadata(file)
            except (OSError, ValueError) as e:
                return f"{name} unreadable ({e})"
    return None


def _changed_inputs(recorded: dict[str, Any], current: dict[str, Any]) -> str | None:
    """What differs between two input fingerprints, in words (None: nothing)."""
    if recorded.get("config_hash") != current.get("config_hash"):
        return "config changed"
    code = _changed_code(recorded.get("code"), current.get("code"))
    if code:
        return code
    before, after = recorded.get("libraries") or {}, current.get("libraries") or {}
    if before != after:
        moved = [
            f"{n} {before.get(n, '(not recorded)')} -> {after.get(n)}" for n in after if before.get(n) != after.get(n)
        ]
        return f"libraries changed: {', '.join(moved)}"
    names = _changed_files(recorded.get("model_files"), current.get("model_files"))
    if names:
        roles = sorted({_model_file_role(n) for n in names}, key=("weights", "tokenizer", "model config").index)
        return f"{' and '.join(roles)} changed: {', '.join(names)}"
    if recorded.get("dataset_version") != current.get("dataset_version"):
        return f"dataset version changed ({recorded.get('dataset_version')} -> {current.get('dataset_version')})"
    names = _changed_files(recorded.get("input_files"), current.get("input_files"))
    if names:
        return f"input files changed: {', '.join(names)}"
    differing = sorted(k for k in recorded.keys() | current.keys() if recorded.get(k) != current.get(k))
    return f"inputs changed: {', '.join(differing)}" if differing else None


def _changed_code(old: dict[str, Any] | None, new: dict[str, Any] | None) -> str | None:
    """Which code changed between two identities (:func:`jaxassoc.app.provenance.code_identity`), in words."""
    if old == new:
        return None
    if not isinstance(old, dict) or not isinstance(new, dict):
        return "code changed (the result records no code identity: written by an older jaxassoc)"
    before, after = old.get("jaxassoc") or {}, new.get("jaxassoc") or {}
    if before.get("version") != after.get("version"):
        return f"code changed: jaxassoc {before.get('version')} -> {after.get('version')}"
    if before != after:
        return (
            f"code changed: jaxassoc's source ({before.get('source_sha256')} -> {after.get('source_sha256')}; "
            "an edit or another checkout)"
        )
    plugin_before, plugin_after = old.get("plugin") or {}, new.get("plugin") or {}
    name = plugin_after.get("module") or plugin_before.get("module")
    return f"code changed: plugin module {name} ({plugin_before.get('source_sha256')} -> {plugin_after.get('source_sha256')})"


def _changed_files(old: dict[str, Any] | None, new: dict[str, Any] | None) -> list[str]:
    """Names of the files added, removed or changed between two ``{path: stat fingerprint}`` maps."""
    old, new = old or {}, new or {}
    return sorted(Path(f).name for f in old.keys() | new.keys() if old.get(f) != new.get(f))


def _model_file_role(name: str) -> str:
    if name.endswith(".index.json"):  # a sharded checkpoint's index
        return "weights"
    if "tokenizer" in name or name in TOKENIZER_FILES or name.endswith(".model"):
        return "tokenizer"
    return "model config" if name.endswith(".json") else "weights"


def _plain(value: Any) -> Any:
    """``value`` with NumPy scalars / arrays as Python numbers / lists and non-finite floats as None."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (np.ndarray, np.generic)):
        return _plain(value.tolist())
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is pd.NA or value is pd.NaT:
        return None
    return value
