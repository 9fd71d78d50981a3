"""Turn a model config into a loaded model or embedding table, with its provenance.

A model is loaded once per process and reused by every job of an audit (the cache is keyed by the
config's source, revision, dtype and kind); the app is the only layer that keeps such state.
"""

from __future__ import annotations

import functools
import logging
from pathlib import Path
from typing import Any

from jaxassoc.app.config import ModelConfig
from jaxassoc.app.provenance import file_sha256
from jaxassoc.app.stages import stage
from jaxassoc.embeddings.static import StaticEmbeddings, load_embedded_glove, load_glove_text, load_word2vec_binary
from jaxassoc.errors import ConfigError, ModelError
from jaxassoc.models.base import LanguageModel
from jaxassoc.models.loading import load_model
from jaxassoc.resources import glove_files

KINDS = ("causal", "masked", "encoder", "static")


def language_model(cfg: ModelConfig) -> LanguageModel:
    """The port for a causal, masked or encoder model config."""
    if cfg.kind not in KINDS or cfg.kind == "static":
        raise ConfigError(f"model {cfg.name!r}: kind {cfg.kind!r} is not a language model ({KINDS[:3]})")
    return _load_language_model(cfg.source, cfg.revision, cfg.dtype, cfg.name)


@functools.lru_cache(maxsize=2)
def _load_language_model(source: str, revision: str | None, dtype: str, name: str) -> LanguageModel:
    with stage("model", f"{name} loaded") as loaded:
        progress = logging.getLogger("jaxassoc").isEnabledFor(logging.INFO)  # off with quiet=true
        model = load_model(source, revision=revision, dtype=dtype, name=name, progress=progress)
        loaded.what += f" ({model.family}, {model.provenance.file_format}, {dtype})"
    return model


def static_embeddings(cfg: ModelConfig) -> StaticEmbeddings:
    """GloVe / word2vec vectors: the embedded GloVe-50d, a GloVe ``.txt`` or a word2vec ``.bin`` file."""
    return _load_static(cfg.source)


@functools.lru_cache(maxsize=2)
def _load_static(source: str) -> StaticEmbeddings:
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


def model_provenance(cfg: ModelConfig, model: LanguageModel | StaticEmbeddings) -> dict[str, Any]:
    """Hashes that pin down the weights (and tokenizer) a result came from."""
    if isinstance(model, LanguageModel):
        return {
            "model_weights_sha256": model.provenance.weights_sha256,
            "tokenizer_sha256": model.provenance.tokenizer_sha256,
            "model_file_format": model.provenance.file_format,
            "model_dtype": cfg.dtype,
        }
    files = glove_files() if cfg.source == "glove-6b-50d" else (Path(cfg.source).expanduser(),)
    return {"model_weights_sha256": _hash_files(tuple(str(f) for f in files)), "tokenizer_sha256": None}


@functools.lru_cache(maxsize=8)
def _hash_files(paths: tuple[str, ...]) -> str:
    return file_sha256(*map(Path, paths))

