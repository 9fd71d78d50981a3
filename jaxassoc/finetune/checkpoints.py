"""Training checkpoints (docs/methods.md §13.3): the step, the adapters' trained arrays, the optimiser state and
the history so far, in one safetensors file written under a temporary name and renamed into place, so an
interrupt or a full disk leaves the previous checkpoint intact. The options the run was started with are
stored beside the arrays: a checkpoint of other options is refused, never resumed."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import jax
import numpy as np
from safetensors import SafetensorError
from safetensors.numpy import load_file, save_file

from jaxassoc.errors import TrainingError
from jaxassoc.finetune.step import TrainState
from jaxassoc.io import atomic_write

FORMAT = "jaxassoc-finetune/1"


def options_key(options: dict[str, Any]) -> str:
    """The sha256 of the options as sorted JSON."""
    return hashlib.sha256(json.dumps(options, sort_keys=True, default=str).encode()).hexdigest()


def _named(state: TrainState) -> dict[str, np.ndarray]:
    leaves = jax.tree_util.tree_flatten_with_path(state)[0]
    return {f"{i:04d}{jax.tree_util.keystr(path)}": np.asarray(leaf) for i, (path, leaf) in enumerate(leaves)}


def save(path: Path, state: TrainState, options: dict[str, Any], history: list[dict]) -> None:
    """Write ``state`` with ``options`` and ``history`` to ``path`` atomically."""
    tensors = _named(state)
    meta = {"format": FORMAT, "options": json.dumps(options, sort_keys=True, default=str),
            "key": options_key(options), "history": json.dumps(history)}  # fmt: skip
    try:
        atomic_write(Path(path), lambda tmp: save_file(tensors, str(tmp), metadata=meta))
    except OSError as e:  # a full disk, a read-only folder: the previous checkpoint is untouched
        raise TrainingError(
            f"cannot write the training checkpoint {path} ({e.strerror or e}); the previous checkpoint, if any, is "
            "intact: free space or set cache_dir elsewhere, and run again to resume from it"
        ) from e


def load(path: Path, template: TrainState, options: dict[str, Any]) -> tuple[TrainState, list[dict]] | None:
    """The state and history saved at ``path`` (None: no checkpoint there), laid out as ``template``;
    TrainingError when it was written for other options (naming them) or is not a checkpoint of this kind."""
    path = Path(path)
    if not path.exists():
        return None
    try:
        from safetensors import safe_open

        with safe_open(str(path), "np") as f:
            meta = f.metadata() or {}
        tensors = load_file(str(path))
    except (SafetensorError, OSError) as e:
        raise TrainingError(f"cannot read the training checkpoint {path} ({e}): delete it to start again") from None
    if meta.get("format") != FORMAT:
        raise TrainingError(f"{path} is not a jaxassoc fine-tuning checkpoint ({meta.get('format')!r})")
    if meta.get("key") != options_key(options):
        saved = json.loads(meta.get("options", "{}"))
        now = json.loads(json.dumps(options, sort_keys=True, default=str))
        differ = sorted(k for k in set(saved) | set(now) if saved.get(k) != now.get(k))
        shown = "; ".join(f"{k}: {saved.get(k)!r} there, {now.get(k)!r} now" for k in differ)
        raise TrainingError(
            f"the training checkpoint {path} was written for other options ({shown}); it is not resumed: delete it, "
            "or run with its options"
        )
    names = list(_named(template))
    if sorted(names) != sorted(tensors):
        raise TrainingError(f"the training checkpoint {path} does not hold the arrays of this run; delete it")
    leaves, treedef = jax.tree_util.tree_flatten(template)
    restored = [np.asarray(tensors[n]).astype(np.asarray(t).dtype) for n, t in zip(names, leaves)]
    return jax.tree_util.tree_unflatten(treedef, restored), json.loads(meta["history"])
