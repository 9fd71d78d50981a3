"""``load_model``: a checkpoint folder, GGUF file, embedded model or hub id -> a ready LanguageModel.

Dispatch is on the HF config's ``model_type`` through the family registry
(:func:`jaxassoc.models.family.family_for`, which imports the family's folder on first use); every family
declares the same contract (:class:`jaxassoc.models.family.Family`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import re
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxassoc.errors import ModelError
from jaxassoc.models.base import Forward, LanguageModel, Provenance, VocabInfo
from jaxassoc.models.checkpoint import CheckpointLayout, read_weights, sha256_files
from jaxassoc.models.family import family_for
from jaxassoc.models.mesh import device_params, place_params
from jaxassoc.models.precision import Precision, check_supported, policy
from jaxassoc.models.saving import MANIFEST as EDITS_MANIFEST
from jaxassoc.models.saving import read_edits
from jaxassoc.resources import EMBEDDED


def _not_torch_banner(record: logging.LogRecord) -> bool:
    """False for the notice transformers logs on import when PyTorch is missing: jaxassoc never needs torch."""
    return not record.getMessage().startswith("PyTorch was not found")


logging.getLogger("transformers").addFilter(_not_torch_banner)  # before the import, which logs it
import transformers  # noqa: E402

# What a hub download fetches: config, tokenizer files and weights (safetensors preferred by the reader).
_HUB_PATTERNS = ["*.json", "*.txt", "*.model", "*.safetensors", "*.bin"]
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")


def _family_of(hf_config: dict, path: Path):
    try:
        return family_for(hf_config.get("model_type"))
    except ModelError as e:
        raise ModelError(f"{path}: {e}") from None


def load_model(
    source: str | Path,
    *,
    revision: str | None = None,
    precision: str = "float32",
    name: str | None = None,
    progress: bool = False,
    mesh=None,
) -> LanguageModel:
    """Load a model port.

    ``source``: a local folder (config.json + model.safetensors / sharded safetensors / pytorch_model.bin
    and tokenizer files), a ``.gguf`` file, an embedded name (``jaxassoc.resources.EMBEDDED``) or a hub id
    (downloaded at ``revision`` with huggingface_hub). ``precision``: the policy (:mod:`jaxassoc.models.precision`:
    ``float32``, ``mixed`` (bfloat16 weights and products, float32 activations), ``bfloat16``, ``float16``,
    ``auto``): the weights are cast to its dtype, the config carries its activations' dtype. The output head is untied from the input embeddings. ``progress``: progress bars while
    weight files are read (per file) or a GGUF is dequantised (per tensor). ``mesh``: a
    ``jax.sharding.Mesh`` with axes ``("data", "fsdp", "tp")`` (:func:`jaxassoc.models.mesh.make_mesh`):
    each weight is placed sharded by its family's partition table, each device's slice cut from the host
    tensors and cast on its own; None: one device. A folder ``LanguageModel.save`` wrote with bound edits
    (``jaxassoc_edits.json``) gives the model with those edits bound again (``with_edits``).
    """
    chosen = policy(precision)
    path, origin, revision = _resolve(source, revision)
    if path.is_file():
        if path.suffix != ".gguf":
            raise ModelError(f"{path} is a file but not a .gguf: pass a checkpoint folder or a .gguf file")
        from jaxassoc.models.gguf import read_gguf

        hf_config, tensors, tokenizer = read_gguf(path, progress=progress)
        check_supported(chosen, hf_config.get("model_type"))
        weights_sha, file_format = sha256_files([path]), "gguf"
    else:
        hf_config = _read_config(path)
        _family_of(hf_config, path)  # an unknown architecture is named before any weights are read
        check_supported(chosen, hf_config.get("model_type"))  # and a policy it cannot run in
        transformers_config = _transformers_config(path)
        weights = read_weights(path, progress=progress)
        tensors, weights_sha, file_format = weights.tensors, weights.sha256(), weights.file_format
        tokenizer = _read_tokenizer(path, transformers_config)
    spec = _family_of(hf_config, path)
    try:
        config = dataclasses.replace(spec.read_config(hf_config), activations=chosen.activations)
        check_sizes(config, spec.name)
        axes = spec.param_axes(config)  # a parameter without logical axes is refused here
        params = spec.params_from_hf(tensors, config)
    except ModelError as e:
        raise ModelError(f"{path}: {e}") from None
    family = spec.model_types[hf_config["model_type"]]
    if mesh is None:
        params = device_params(params, chosen.params)
    else:
        params = place_params(params, axes, mesh, chosen.params)
    check_finite(params, tensors, path, chosen.params)
    _say_cast(tensors, chosen, path)

    model = LanguageModel(
        name=name or _default_name(source, path),
        family=family,
        port=spec,
        objective=spec.objective,
        config=config,
        params=params,
        tokenizer=tokenizer,
        vocab=vocab_info(tokenizer, spec.objective),
        provenance=Provenance(
            source=origin,
            revision=revision,
            weights_sha256=weights_sha,
            tokenizer_sha256=tokenizer_sha256(tokenizer),
            file_format=file_format,
        ),
        forward=Forward(spec, config),
        max_positions=int(config.max_positions),
        decoder=spec.decoder(config),
        mesh=mesh,
        checkpoint=CheckpointLayout(hf_config, {k: tuple(np.shape(v)) for k, v in tensors.items()}),
    )
    edits = read_edits(path) if path.is_dir() else None  # a folder LanguageModel.save wrote with bound edits
    if edits:
        try:
            model = model.with_edits(edits)
        except ModelError as e:
            raise ModelError(f"{path / EDITS_MANIFEST}: {e}") from None
        logging.getLogger("jaxassoc").info(
            "%s: its saved edits bound again at %s (%s)", path.name, ", ".join(sorted(edits)), EDITS_MANIFEST
        )
    return model


def _say_cast(tensors: dict, chosen: Precision, path: Path) -> None:
    """Log (info) when the checkpoint's floating weights are stored in another dtype than the policy's: a
    bfloat16 checkpoint in float32 is upcast exactly; a float32 one in bfloat16 is rounded."""
    stored = sorted({str(t.dtype) for t in tensors.values() if jnp.issubdtype(t.dtype, jnp.floating)} - {chosen.params})
    if stored:
        how = "upcast (exact)" if chosen.params == "float32" else "rounded"
        logging.getLogger("jaxassoc").info(
            "%s: weights stored in %s, %s to %s (model.precision=%s)", path.name, "/".join(stored), how,
            chosen.params, chosen.name,
        )  # fmt: skip


def _resolve(source: str | Path, revision: str | None) -> tuple[Path, str, str | None]:
    """(local path, provenance source, revision) for a folder, file, embedded name or hub id.

    For a hub download the revision recorded is the commit of the snapshot (its folder name).
    """
    text = str(source)
    if text in EMBEDDED:
        return EMBEDDED[text].path(), text, revision
    path = Path(text).expanduser()
    if path.exists():
        return path.resolve(), str(path.resolve()), revision
    if isinstance(source, Path) or not _HUB_ID.match(text) or text.endswith(".gguf"):
        raise ModelError(
            f"model source {text!r} does not exist: pass a checkpoint folder, a .gguf file, "
            f"an embedded model {sorted(EMBEDDED)} or a hub id"
        )
    snapshot = _hub_snapshot(text, revision)
    return snapshot, text, snapshot.name


def _hub_snapshot(repo_id: str, revision: str | None) -> Path:
    """The snapshot folder (named by its commit) of a hub model at ``revision`` (a branch, tag or commit;
    None: main), downloaded or, offline (``HF_HUB_OFFLINE=1``), found in the Hugging Face cache."""
    from huggingface_hub import constants, snapshot_download

    try:
        return Path(snapshot_download(repo_id, revision=revision, allow_patterns=_HUB_PATTERNS))
    except Exception as e:  # offline, unknown repo or revision, auth: all end here
        raise ModelError(_hub_error(repo_id, revision or constants.DEFAULT_REVISION, e)) from None


def _hub_error(repo_id: str, revision: str, error: Exception) -> str:
    """One line on why a hub model could not be had: what the cache holds of it, and what to do."""
    from huggingface_hub import constants

    cache = constants.HF_HUB_CACHE
    cached = _cached_revisions(repo_id)
    reason = f"{type(error).__name__}: {' '.join(str(error).split())}"  # one line: the app prints one line
    unusable = cached is not None and (revision in cached or revision in cached.values())
    if cached is None:
        found = f"hub model {repo_id!r} is not in the Hugging Face cache {cache}"
    elif unusable:
        found = f"hub model {repo_id!r} at revision {revision!r} is in the Hugging Face cache {cache} but unusable"
    else:
        listed = ", ".join(f"{ref} = {commit}" if ref != commit else commit for ref, commit in cached.items())
        found = (
            f"hub model {repo_id!r} has no revision {revision!r} in the Hugging Face cache {cache} (it holds: {listed})"
        )
    if not constants.HF_HUB_OFFLINE:
        return (
            f"{found}, and downloading it failed ({reason}); check the model id and revision on the Hub, the "
            "network access and the token (gated models), or pass a local checkpoint folder or .gguf file as "
            "the model source"
        )
    return (
        found
        + (f" ({reason})" if unusable else "")
        + ", and HF_HUB_OFFLINE is set, so nothing is downloaded; "
        + ("set model.revision to a cached revision, " if cached and not unusable else "")
        + f"download it with network access (`hf download {repo_id} --revision {revision}`), or pass a local "
        "checkpoint folder or .gguf file as the model source"
    )


def _cached_revisions(repo_id: str) -> dict[str, str] | None:
    """What the Hugging Face cache (``HF_HUB_CACHE``) holds of a hub model: ``{ref: commit}`` for its refs
    (branches, tags) with a snapshot, then ``{commit: commit}`` for its other snapshots; None when it holds
    no snapshot."""
    from huggingface_hub import constants
    from huggingface_hub.file_download import repo_folder_name

    folder = Path(constants.HF_HUB_CACHE) / repo_folder_name(repo_id=repo_id, repo_type="model")
    commits = sorted(p.name for p in (folder / "snapshots").glob("*") if p.is_dir())
    if not commits:
        return None
    refs = {
        str(p.relative_to(folder / "refs")): p.read_text().strip()
        for p in sorted((folder / "refs").rglob("*"))
        if p.is_file()
    }
    refs = {ref: commit for ref, commit in refs.items() if commit in commits}
    return refs | {c: c for c in commits if c not in refs.values()}


def _read_config(folder: Path) -> dict:
    config_file = folder / "config.json"
    if not config_file.exists():
        raise ModelError(f"{folder} has no config.json: it is not a HF checkpoint folder")
    try:
        return json.loads(config_file.read_text())
    except json.JSONDecodeError as e:
        raise ModelError(f"{config_file} is not valid JSON: {e}") from None


# Files that make a tokenizer for the ported families: any one complete set will do.
TOKENIZER_FILES: tuple[tuple[str, ...], ...] = (
    ("tokenizer.json",),  # a fast tokenizer (every recent checkpoint)
    ("vocab.json", "merges.txt"),  # byte-level BPE: GPT-2, RoBERTa
    ("vocab.txt",),  # WordPiece: BERT
    ("tokenizer.model",),  # SentencePiece: Llama, Mistral
)


ZERO_ALLOWED = frozenset({"decoder_start_token_id", "padding_idx", "rotary_dim", "position_offset"})
"""Integer fields of a family config for which 0 is meaningful (a token id, no rotary dimensions, no offset)."""


def check_sizes(config: Any, family: str) -> None:
    """ModelError naming a size, count or id of a family's config (read from the checkpoint's config.json or
    GGUF metadata) that is negative, or 0 where 0 means nothing (``n_head: 0`` loaded; a negative size
    failed inside XLA)."""
    hf_names = dict(getattr(config, "hf_names", ()))
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        if isinstance(value, bool) or not isinstance(value, int):
            continue
        low = 0 if field.name in ZERO_ALLOWED else 1
        if value < low:
            raise ModelError(
                f"the {family} config's {hf_names.get(field.name, field.name)}={value} (from the checkpoint's "
                f"config) must be >= {low}; the "
                "config is damaged or edited: restore the checkpoint's own config.json"
            )


def _transformers_config(folder: Path):
    """config.json as transformers validates it, loaded as ``AutoTokenizer`` would load it (so that a bad
    field is blamed on config.json, not on the tokenizer)."""
    try:
        try:
            return transformers.AutoConfig.from_pretrained(folder)
        except (ValueError, OSError):  # AutoTokenizer's fallback, e.g. a model_type transformers lacks
            return transformers.PreTrainedConfig.from_pretrained(folder)
    except Exception as e:
        raise ModelError(
            f"{folder / 'config.json'} is rejected by transformers ({_reason(e)}); fix the field it names, or "
            "restore the checkpoint's own config.json"
        ) from None


def _read_tokenizer(folder: Path, config):
    if not any(all((folder / f).is_file() for f in files) for files in TOKENIZER_FILES):
        found = [f for files in TOKENIZER_FILES for f in files if (folder / f).is_file()]
        raise ModelError(
            f"{folder} has no tokenizer: it needs tokenizer.json, or vocab.json + merges.txt, vocab.txt or "
            f"tokenizer.model"
            + (f" (found only {found})" if found else "")
            + "; copy the tokenizer files of this model into the folder"
        )
    try:
        return transformers.AutoTokenizer.from_pretrained(folder, config=config)
    except Exception as e:
        raise ModelError(
            f"cannot load a tokenizer from {folder} ({_reason(e)}); the folder needs tokenizer.json or the "
            "tokenizer files of its model"
        ) from None


def _reason(e: Exception) -> str:
    """An exception from transformers as one line: its type and its message's words."""
    return f"{type(e).__name__}: {' '.join(str(e).split())}"


_FINITE_CHUNK = 1 << 22  # elements per finiteness test: bounds the float32 copy XLA may make of a chunk


@jax.jit
def _maybe_finite(x: jax.Array) -> jax.Array:
    """A fast test (one fused pass) that is True whenever ``x`` is finite: max|x| catches infinities,
    sum(x) catches NaN (XLA's max may drop NaN; a sum never does). A False is confirmed on the host by
    :func:`check_finite`, since sum(x) alone can overflow."""
    return jnp.isfinite(jnp.max(jnp.abs(x), initial=0)) & ~jnp.isnan(jnp.sum(x, dtype=jnp.float32))


def _leaf_maybe_finite(x: jax.Array) -> bool:
    """:func:`_maybe_finite` over slices of the leading axis of at most ``_FINITE_CHUNK`` elements (one row
    at least), so no full-size float32 copy of a large bf16 leaf is ever made."""
    rows = max(1, _FINITE_CHUNK // max(1, x.size // x.shape[0])) if x.ndim and x.shape[0] else 0
    if _on_one_cpu(x):  # the host reads the buffer in place: no compilation per leaf shape
        host, step = np.asarray(x).reshape(x.shape[0] if x.ndim else 1, -1 if x.size else 0), max(rows, 1)
        return all(bool(np.isfinite(host[i : i + step]).all()) for i in range(0, len(host), step))
    if not rows or x.shape[0] <= rows:
        return bool(_maybe_finite(x))
    return all(bool(_maybe_finite(x[i : i + rows])) for i in range(0, x.shape[0], rows))


def _on_one_cpu(x: jax.Array) -> bool:
    devices = x.sharding.device_set
    return len(devices) == 1 and next(iter(devices)).platform == "cpu"


def check_finite(params, tensors: dict, source: Path, dtype: str) -> None:
    """ModelError naming the checkpoint tensors with NaN or infinite values.

    Values that only overflow when cast to ``dtype`` are named by their parameter path instead.
    """
    paths, leaves = zip(*jax.tree_util.tree_leaves_with_path(params))
    flagged = [i for i, leaf in enumerate(leaves) if not _leaf_maybe_finite(leaf)]
    bad_params = [
        jax.tree_util.keystr(paths[i])
        for i in flagged
        if not np.isfinite(np.asarray(leaves[i], dtype=np.float32)).all()
    ]
    if not bad_params:
        return
    bad = [
        name for name, t in tensors.items() if t.dtype.kind not in "biu" and not np.isfinite(t.astype(np.float32)).all()
    ]
    if bad:
        raise ModelError(
            f"{source}: tensors {bad[:6]}{' ...' if len(bad) > 6 else ''} hold NaN or infinite values; the "
            "checkpoint is corrupt: download or save it again"
        )
    raise ModelError(
        f"{source}: parameters {bad_params[:6]} overflow to infinity in {dtype}; use model.precision=mixed (bfloat16 weights) or float32"
    )


def _default_name(source: str | Path, path: Path) -> str:
    text = str(source)
    if text in EMBEDDED or not Path(text).expanduser().exists():
        return text
    return path.stem if path.is_file() else path.name


def vocab_info(tokenizer, objective: str) -> VocabInfo:
    """The tokenizer facts the metrics need: BOS policy, markers, special ids."""
    bos_id = tokenizer.bos_token_id
    ids = tokenizer("a")["input_ids"]
    markers = {m: sum(t.startswith(m) for t in tokenizer.get_vocab()) for m in ("Ġ", "▁", "##")}
    marker = max(markers, key=markers.get) if any(markers.values()) else None
    return VocabInfo(
        bos_id=bos_id,
        eos_id=tokenizer.eos_token_id,
        pad_id=tokenizer.pad_token_id,
        mask_id=tokenizer.mask_token_id if objective == "masked" else None,
        add_bos=bos_id is not None and len(ids) > 0 and ids[0] == bos_id,
        word_initial_marker=marker if marker in ("Ġ", "▁") else None,
        continuation_marker="##" if marker == "##" else None,
    )


def tokenizer_sha256(tokenizer) -> str:
    """sha256 of the tokenizer's serialised JSON (vocabulary, merges, normaliser, special tokens)."""
    return hashlib.sha256(tokenizer.backend_tokenizer.to_str().encode()).hexdigest()


__all__ = ["load_model", "vocab_info", "tokenizer_sha256"]
