"""``LanguageModel.save``: a loaded (and possibly edited) model as a Hugging Face checkpoint folder that
:func:`jaxassoc.models.load_model` (and transformers, when no edit is bound) reads back.

Weights are written by inverting the family's own reader (``Family.params_from_hf``), not by a second table
per family: each tensor the model was read from (:class:`~jaxassoc.models.checkpoint.CheckpointLayout`) is
replaced by the integers numbering its elements, the reader is run on them, and each parameter leaf then
holds, element by element, the number of the checkpoint element it was read from. Every reader that only
renames, transposes, splits, reshapes and stacks tensors (every family's today: fused q/k/v, Conv1D,
per-head layouts, experts) is inverted so, and the written tensors are read back through the reader and
compared with the parameters bit for bit before anything is renamed into place; a reader that computes
values cannot be inverted and its family is refused by name.

Bound edits (``model.with_edits``) are not folded into the weights: their arrays go beside them
(``jaxassoc_edits.safetensors``) with a manifest (``jaxassoc_edits.json``: each site, its edit's kind and, for a
``Transform``, the module's type and fields), and :func:`read_edits` rebinds them on load. ``Apply`` (a Python
function) cannot be saved.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import secrets
import shutil
from pathlib import Path
from typing import Any, Mapping

import jax
import numpy as np

from jaxassoc.errors import ModelError
from jaxassoc.io import host_name
from jaxassoc.models.checkpoint import CheckpointLayout, inventing, read_safetensors, write_safetensors
from jaxassoc.models.lora import adapter_paths
from jaxassoc.models.sites import Add, Apply, Replace, Transform, split_bound

WEIGHTS = "model.safetensors"
EDITS_FILE = "jaxassoc_edits.safetensors"
MANIFEST = "jaxassoc_edits.json"
_FORMAT = "jaxassoc-edits/1"


def save_model(model: Any, folder: str | Path, *, overwrite: bool = False) -> Path:
    """Write ``model`` (a LanguageModel) to ``folder`` (see ``LanguageModel.save``); returns the folder."""
    folder = Path(folder).expanduser().absolute()
    if folder.exists() and not overwrite:
        raise ModelError(f"{folder} exists: pass overwrite=True to replace it, or save to a new folder")
    if folder.exists() and not folder.is_dir():
        raise ModelError(f"{folder} exists and is not a folder")
    layout = getattr(model, "checkpoint", None)
    if layout is None:
        raise ModelError(
            f"{model.name!r} was not read from a checkpoint by load_model, so its Hugging Face layout is unknown: "
            "only models load_model returned (and their with_params / with_edits copies) can be saved"
        )
    body, bound = split_bound(model.params["body"])
    if adapter_paths(body):
        raise ModelError(
            f"{model.name!r} holds low-rank adapters ({', '.join('.'.join(p) for p in adapter_paths(body))}): fold "
            "them into the weights first, lora.merged(model).save(folder), for a checkpoint transformers loads"
        )
    manifest, edit_arrays = edits_manifest(bound)  # an unsavable edit is refused before any file is written
    tensors, hf_config = hf_tensors(model.port, model.config, layout, {"body": body, "head": model.params["head"]})
    hf_config = dict(hf_config)
    dtypes = sorted({str(t.dtype) for t in tensors.values() if jax.numpy.issubdtype(t.dtype, jax.numpy.floating)})
    if len(dtypes) == 1:  # the dtype transformers loads it in with dtype="auto"
        hf_config["torch_dtype" if "torch_dtype" in hf_config else "dtype"] = dtypes[0]

    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = folder.parent / f".{folder.name}~{host_name()}~{os.getpid()}~{secrets.token_hex(4)}.tmp"
    tmp.mkdir()
    try:
        write_safetensors(tmp / WEIGHTS, tensors, {"format": "pt"})
        (tmp / "config.json").write_text(json.dumps(hf_config, indent=2, sort_keys=True) + "\n")
        model.tokenizer.save_pretrained(tmp)
        if manifest:
            write_safetensors(tmp / EDITS_FILE, edit_arrays)
            (tmp / MANIFEST).write_text(json.dumps({"format": _FORMAT, "edits": manifest}, indent=2) + "\n")
        _check_written(model, tmp / WEIGHTS, hf_config, {"body": body, "head": model.params["head"]})
        if folder.exists():  # overwrite: the old folder aside first, removed once the new one is in place
            old = tmp.with_name(tmp.name.replace(".tmp", ".old"))
            os.replace(folder, old)
            os.replace(tmp, folder)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return folder


def hf_tensors(port: Any, config: Any, layout: CheckpointLayout, params: Mapping) -> tuple[dict, Mapping]:
    """The Hugging Face tensors (name -> array in the parameters' dtypes) that ``port``'s reader turns into
    ``params``, and the HF config to write beside them (``tie_word_embeddings`` off when a tied checkpoint's
    head no longer equals its input embeddings). ModelError naming the family when its reader cannot be
    inverted."""
    hf_config = dict(layout.hf_config)
    shapes = dict(layout.shapes)
    leaves = _leaves(params)
    try:
        tensors = _invert(port, config, shapes, leaves)
    except _Conflict as conflict:
        tied = getattr(config, "tie_word_embeddings", False)
        if HEAD not in conflict.paths or not tied or not dataclasses.is_dataclass(config):
            raise _refused(port, f"the parameters {conflict.paths} are read from checkpoint elements they differ on")
        # a tied checkpoint whose head was changed: write the head under the name the untied reader takes
        config = dataclasses.replace(config, tie_word_embeddings=False)
        hf_config["tie_word_embeddings"] = False
        invented: dict[str, tuple[int, ...]] = {}

        def invent(name: str, shape: tuple[int, ...]) -> np.ndarray:
            invented[name] = shape
            return np.zeros(shape, np.int8)

        with inventing(invent):
            port.params_from_hf({k: np.zeros(s, np.int8) for k, s in shapes.items()}, config)
        try:
            tensors = _invert(port, config, {**shapes, **invented}, leaves)
        except _Conflict as again:
            raise _refused(port, f"the parameters {again.paths} are read from elements they differ on") from None
    return tensors, hf_config


HEAD = "['head'].W"  # the output head's weight among the parameter paths


class _Conflict(Exception):
    """Parameters that were read from the same checkpoint elements but hold other values there."""

    def __init__(self, paths: list[str]):
        self.paths = paths


def _leaves(params: Mapping) -> dict[str, np.ndarray]:
    """Parameter path -> its values on the host (in their dtype), in the reader's pytree order."""
    return {jax.tree_util.keystr(p): np.asarray(leaf) for p, leaf in jax.tree_util.tree_leaves_with_path(params)}


def _refused(port: Any, why: str) -> ModelError:
    return ModelError(
        f"the {port.name} family cannot be saved: {why}; saving inverts a family's reader, which works for "
        "readers that only rename, transpose, split and stack checkpoint tensors"
    )


def _invert(port: Any, config: Any, shapes: Mapping[str, tuple], leaves: Mapping[str, np.ndarray]) -> dict:
    """Checkpoint tensors from the parameter ``leaves``: each tensor of ``shapes`` numbered element by element,
    read by ``port``'s reader, and each parameter's values scattered back to the elements it was read from.
    Tensors the reader leaves out (buffers, poolers) are not written. _Conflict naming the parameters
    whose elements were also read into another that holds other values there; ModelError when the reader does more
    than move elements, or when a tensor is read only in part."""
    names = list(shapes)
    sizes = [int(np.prod(shapes[n], dtype=np.int64)) for n in names]
    starts = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)])
    total = int(starts[-1])
    id_dtype = np.int32 if total < 2**31 - 1 else np.int64
    numbered = {n: np.arange(s, s + k, dtype=id_dtype).reshape(shapes[n]) for n, s, k in zip(names, starts, sizes)}
    try:
        probe = port.params_from_hf(numbered, config)
    except ModelError as e:
        raise _refused(port, f"its reader refused the numbered checkpoint ({e})") from None
    ids = {jax.tree_util.keystr(p): leaf for p, leaf in jax.tree_util.tree_leaves_with_path(probe)}
    if set(ids) != set(leaves):
        raise _refused(port, f"its reader gives the parameters {sorted(set(ids) ^ set(leaves))} the model lacks or has")
    wide = np.result_type(*(v.dtype for v in leaves.values()))
    flat = np.zeros(total, wide)
    covered = np.zeros(total, bool)
    tensor_dtypes: dict[int, set] = {}
    positions = {}
    for path, values in leaves.items():
        index = np.asarray(ids[path])
        if index.shape != values.shape or not np.issubdtype(index.dtype, np.integer):
            raise _refused(port, f"its reader computes the parameter {path} rather than moving checkpoint elements")
        index = index.reshape(-1)
        if index.size and (index.min() < 0 or index.max() >= total):
            raise _refused(port, f"its reader computes the parameter {path} rather than moving checkpoint elements")
        flat[index] = values.reshape(-1)
        covered[index] = True
        positions[path] = index
        for t in np.unique(np.searchsorted(starts, index, side="right") - 1):
            tensor_dtypes.setdefault(int(t), set()).add(values.dtype)
    conflicts = [  # an element read into two parameters must hold one value
        path
        for path, index in positions.items()
        if not _same_bits(flat[index].astype(leaves[path].dtype), leaves[path].reshape(-1))
    ]
    if conflicts:
        raise _Conflict(conflicts)
    out = {}
    for t, name in enumerate(names):
        part = covered[starts[t] : starts[t + 1]]
        if not part.any():
            continue  # a tensor the reader leaves out
        if not part.all():
            raise _refused(port, f"its reader reads only part of the tensor {name!r}")
        dtype = np.result_type(*tensor_dtypes[t])
        out[name] = flat[starts[t] : starts[t + 1]].astype(dtype).reshape(shapes[name])
    return out


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    a, b = np.ascontiguousarray(a).reshape(-1), np.ascontiguousarray(b).reshape(-1)
    return bool(np.array_equal(a.view(np.uint8), b.view(np.uint8)))


def _check_written(model: Any, weights: Path, hf_config: Mapping, params: Mapping) -> None:
    """Read the written weights back through the family's reader: every parameter bit for bit."""
    config = model.port.read_config(hf_config)
    back = _leaves(model.port.params_from_hf(read_safetensors(weights), config))
    for path, values in _leaves(params).items():
        if path not in back or not _same_bits(np.asarray(back[path], values.dtype), values):
            raise _refused(model.port, f"the written checkpoint reads back with another {path}")


def edits_manifest(edits: Mapping[str, Any]) -> tuple[list[dict], dict[str, np.ndarray]]:
    """The manifest entries and the arrays (by name in :data:`EDITS_FILE`) of bound edits, by site; ModelError
    naming the site of an ``Apply`` (a Python function) or of a Transform whose module is not a NamedTuple or
    dataclass of arrays."""
    entries, arrays = [], {}
    for i, (site, edit) in enumerate(sorted(edits.items())):
        if isinstance(edit, Apply):
            fn = edit.fn
            raise ModelError(
                f"site {site!r}: an Apply edit ({getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', fn)}) "
                "is a Python function and cannot be saved; bind a Replace, Add or Transform (a callable pytree such "
                "as an Eraser) instead"
            )
        if isinstance(edit, Transform):
            module = edit.module
            kind = type(module)
            fields = _fields(module)
            if fields is None:
                raise ModelError(
                    f"site {site!r}: the Transform's module {kind.__module__}.{kind.__qualname__} is not a "
                    "NamedTuple or dataclass of arrays, so it cannot be saved"
                )
            entry = {"site": site, "kind": "Transform", "module": f"{kind.__module__}:{kind.__qualname__}"}
            values = {f: getattr(module, f) for f in fields}
        elif isinstance(edit, (Replace, Add)):
            entry = {"site": site, "kind": type(edit).__name__}
            values = {f: getattr(edit, f) for f in edit._fields if getattr(edit, f) is not None}
        else:
            raise ModelError(f"site {site!r}: an edit of type {type(edit).__name__} cannot be saved")
        entry["arrays"] = {}
        for field, value in values.items():
            if not isinstance(value, (np.ndarray, jax.Array, np.generic)):
                raise ModelError(f"site {site!r}: the edit's {field} is a {type(value).__name__}, not an array")
            arrays[f"{i}.{field}"] = np.asarray(value)
            entry["arrays"][field] = f"{i}.{field}"
        entries.append(entry)
    return entries, arrays


def _fields(module: Any) -> tuple[str, ...] | None:
    if isinstance(module, tuple) and hasattr(module, "_fields"):
        return tuple(module._fields)
    if dataclasses.is_dataclass(module) and not isinstance(module, type):
        return tuple(f.name for f in dataclasses.fields(module))
    return None


def read_edits(folder: Path) -> dict[str, Any] | None:
    """The edits a saved folder binds (its :data:`MANIFEST`), by site; None without a manifest. ModelError
    naming a manifest or array file that is malformed, or a Transform's module type that cannot be imported
    or is not a NamedTuple / dataclass with the recorded fields."""
    manifest_file = Path(folder) / MANIFEST
    if not manifest_file.is_file():
        return None
    try:
        manifest = json.loads(manifest_file.read_text())
        if manifest.get("format") != _FORMAT:
            raise ValueError(f"format {manifest.get('format')!r}, expected {_FORMAT!r}")
        entries = manifest["edits"]
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise ModelError(f"{manifest_file} is not a jaxassoc edits manifest ({e}); save the model again") from None
    arrays = read_safetensors(Path(folder) / EDITS_FILE) if entries else {}
    edits = {}
    for entry in entries:
        try:
            site, kind, names = entry["site"], entry["kind"], entry["arrays"]
            values = {field: np.array(arrays[name]) for field, name in names.items()}
        except (KeyError, TypeError) as e:
            raise ModelError(f"{manifest_file}: a malformed edit entry {entry!r} (missing {e})") from None
        if kind == "Replace":
            edits[site] = Replace(values["value"], values.get("where"))
        elif kind == "Add":
            edits[site] = Add(values["delta"])
        elif kind == "Transform":
            edits[site] = Transform(_module(entry.get("module"), values, site, manifest_file))
        else:
            raise ModelError(f"{manifest_file}: site {site!r} has an edit of unknown kind {kind!r}")
    return edits


def _module(spec: Any, values: Mapping[str, np.ndarray], site: str, manifest: Path) -> Any:
    """The Transform module ``module:qualname`` rebuilt from its fields' arrays (imported by name at run time)."""
    where = f"{manifest}: site {site!r}'s Transform module {spec!r}"
    if not isinstance(spec, str) or ":" not in spec:
        raise ModelError(f"{where} is not a 'module:qualname' type name")
    module_name, qualname = spec.split(":", 1)
    try:
        kind: Any = importlib.import_module(module_name)
        for part in qualname.split("."):
            kind = getattr(kind, part)
    except (ImportError, AttributeError) as e:
        raise ModelError(
            f"{where} cannot be found ({type(e).__name__}: {e}); install the package that defines it"
        ) from None
    fields = tuple(getattr(kind, "_fields", ())) or (
        tuple(f.name for f in dataclasses.fields(kind)) if dataclasses.is_dataclass(kind) else ()
    )
    if not isinstance(kind, type) or set(fields) != set(values):
        raise ModelError(f"{where} is not a NamedTuple or dataclass with the fields {sorted(values)}")
    return kind(**{f: jax.numpy.asarray(v) for f, v in values.items()})


__all__ = ["EDITS_FILE", "MANIFEST", "WEIGHTS", "edits_manifest", "hf_tensors", "read_edits", "save_model"]
