"""ZCA whitening (ZCA-WEAT paper, §3.2 and §4.1, Eq. 7, 8, 11; docs/methods.md §2).

mu, Sigma (ddof 1) from a reference sample; W = U (Lambda + eps I)^{-1/2} U^T from the eigendecomposition
Sigma = U Lambda U^T; z = W (x - mu). eps = 1e-3 as in the paper keeps W finite when a dimension is
(nearly) dead, and when there are fewer samples than dimensions (Sigma is then singular: the fit warns,
and the null directions are scaled by eps^{-1/2} instead of infinity).

Reference samples for static vectors: the word types of a corpus (default; the paper uses WikiText-103,
offline the WikiText-2 splits) or a uniform sample of the vocabulary; up to 100,000 items, seeded. The
choice matters (GloVe-50d W3 whitened d: 0.27 with WikiText-2 types, 0.91 with a uniform sample), so the
sample description travels with the saved statistics.
"""

from __future__ import annotations

import json
import warnings
import zipfile
import zlib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from jaxassoc.embeddings.static import StaticEmbeddings
from jaxassoc.errors import DataError, InputError
from jaxassoc.io import atomic_write


class ZcaStats(NamedTuple):
    """Fitted whitening: ``z = W @ (x - mean)``; ``eigenvalues`` of Sigma, descending."""

    mean: Float[Array, " D"]
    W: Float[Array, "D D"]
    eigenvalues: Float[Array, " D"]


class ReferenceSample(NamedTuple):
    """Vectors to fit the whitening on, their words, and a description to record with the fit."""

    vectors: Float[np.ndarray, "n D"]
    words: list[str]
    description: str


@jax.jit
def _fit(x: Float[Array, "n D"], eps: float) -> ZcaStats:
    mean = x.mean(axis=0)
    centred = x - mean
    cov = centred.T @ centred / (x.shape[0] - 1)
    eigenvalues, U = jnp.linalg.eigh(cov)
    eigenvalues, U = eigenvalues[::-1], U[:, ::-1]
    # eigh may return tiny negative eigenvalues for a singular Sigma: they are 0 up to rounding.
    scale = (jnp.maximum(eigenvalues, 0.0) + eps) ** -0.5
    return ZcaStats(mean=mean, W=(U * scale) @ U.T, eigenvalues=eigenvalues)


def fit_zca(x: ArrayLike, *, eps: float = 1e-3) -> ZcaStats:
    """Eq. 7 and 11: the ZCA statistics of a reference sample (rows = vectors)."""
    x = np.asarray(x)
    if x.ndim != 2 or x.shape[0] < 2:
        raise InputError(f"ZCA reference sample: need a (samples >= 2, dim) matrix, got {x.shape}")
    if not np.isfinite(x).all():
        raise InputError("ZCA reference sample has NaN or infinite entries")
    if eps < 0:
        raise InputError(f"ZCA eps must be >= 0, got {eps}")
    if x.shape[0] <= x.shape[1]:
        warnings.warn(
            f"ZCA reference sample has {x.shape[0]} vectors for {x.shape[1]} dimensions: the covariance "
            f"is singular and its null directions are scaled by eps^-1/2 = {eps**-0.5:.3g}; use more "
            f"samples than dimensions",
            stacklevel=2,
        )
    fitted = _fit(jnp.asarray(x), eps)
    if not all(bool(jnp.isfinite(a).all()) for a in fitted):
        raise InputError(
            f"ZCA reference sample: its covariance overflows float32 (largest entry {np.abs(x).max():.3g}); "
            f"whitening with eps={eps:g} is not scale-invariant, so bring the vectors to a usual scale first"
        )
    return fitted


@jax.jit
def _apply(stats: ZcaStats, x: Float[Array, "n D"]) -> Float[Array, "n D"]:
    return (x - stats.mean) @ stats.W.T


def apply_zca(stats: ZcaStats, x: ArrayLike) -> Float[Array, "*n D"]:
    """Eq. 8: z = W (x - mu) for a vector or each row of a matrix."""
    x = jnp.asarray(x)
    dim = stats.mean.shape[0]
    if x.shape[-1] != dim:
        raise InputError(
            f"ZCA statistics were fitted on {dim}-d vectors but got {x.shape[-1]}-d ones: fit the "
            f"whitening on the same model (and layer) as the vectors"
        )
    return _apply(stats, x.reshape(-1, dim)).reshape(x.shape)


def save_zca(stats: ZcaStats, path: str | Path, *, metadata: Mapping[str, Any]) -> Path:
    """Save to ``.npz`` with a JSON ``metadata`` entry (model, sample description, eps, n, ...), atomically:
    a killed writer leaves the previous file or none, never half of one."""
    path = Path(path)
    arrays = {
        "mean": np.asarray(stats.mean),
        "W": np.asarray(stats.W),
        "eigenvalues": np.asarray(stats.eigenvalues),
        "metadata": np.array(json.dumps(dict(metadata), sort_keys=True)),
    }

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as f:  # a file object: np.savez would add ".npz" to the temporary's name
            np.savez(f, **arrays)

    atomic_write(path, write)
    return path


def load_zca(path: str | Path) -> tuple[ZcaStats, dict[str, Any]]:
    """The statistics and metadata written by :func:`save_zca`; DataError naming the file if it is
    missing, truncated, not a ZCA file, or holds arrays of inconsistent shapes or non-finite values."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"ZCA statistics file {path} does not exist; fit and save them first")
    try:
        with np.load(path, allow_pickle=False) as f:
            mean, W, eigenvalues = (np.asarray(f[k]) for k in ("mean", "W", "eigenvalues"))
            metadata = json.loads(str(f["metadata"]))
    except KeyError as e:
        raise DataError(f"{path} is not a ZCA statistics file written by save_zca: it has no {e.args[0]!r}") from None
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, zlib.error) as e:
        raise DataError(
            f"{path} is not a ZCA statistics file written by save_zca: it is truncated or corrupt "
            f"({type(e).__name__}: {e}); fit and save the statistics again"
        ) from None
    D = mean.shape[-1] if mean.ndim == 1 else -1
    if mean.ndim != 1 or W.shape != (D, D) or eigenvalues.shape != (D,) or not isinstance(metadata, dict):
        raise DataError(
            f"{path} is not a ZCA statistics file written by save_zca: mean {mean.shape}, W {W.shape}, "
            f"eigenvalues {eigenvalues.shape} (expected (D,), (D, D), (D,)) and metadata a JSON object"
        )
    if not all(np.isfinite(a).all() for a in (mean, W, eigenvalues)):
        raise DataError(f"{path}: the ZCA statistics hold NaN or infinite values; fit and save them again")
    return ZcaStats(jnp.asarray(mean), jnp.asarray(W), jnp.asarray(eigenvalues)), metadata


def corpus_word_types(tokens: Iterable[str]) -> list[str]:
    """Distinct alphabetic tokens (``str.isalpha``) in order of first occurrence.

    Numbers, punctuation, WikiText's ``<unk>`` and ``@-@`` joiners, and tokens with hyphens or
    apostrophes are not word types here. With this rule the WikiText-2 (test + valid) types give
    GloVe-50d W3 whitened d = 0.27, the value docs/methods.md §2 quotes; keeping every token gives 0.19.
    """
    return list(dict.fromkeys(t for t in tokens if t.isalpha()))


def reference_sample(
    embeddings: StaticEmbeddings,
    *,
    word_types: Iterable[str] | None = None,
    corpus_name: str = "corpus",
    max_items: int = 100_000,
    seed: int = 0,
) -> ReferenceSample:
    """Up to ``max_items`` vectors to fit the whitening on, drawn with ``seed`` without replacement.

    With ``word_types`` (default in the pipelines: WikiText-2's): the types found in the vocabulary
    (after its case folding; one vector per vocabulary row). Without: a uniform sample of the whole
    vocabulary.
    """
    rng = np.random.default_rng(seed)
    if word_types is None:
        rows = np.arange(len(embeddings.words))
        origin = f"uniform sample of the {len(rows)}-word vocabulary of {embeddings.source}"
    else:
        found = {embeddings.index[k] for k in map(embeddings.normalise, word_types) if k in embeddings.index}
        rows = np.array(sorted(found), dtype=np.int64)
        origin = f"word types of {corpus_name} found in {embeddings.source} ({len(rows)} types)"
    if rows.size < 2:
        raise InputError(f"ZCA reference sample: only {rows.size} word(s) of {corpus_name} have vectors")
    if rows.size > max_items:
        rows = np.sort(rng.choice(rows, size=max_items, replace=False))
    description = f"{origin}; {rows.size} items, seed {seed}"
    return ReferenceSample(
        np.asarray(embeddings.matrix[rows], dtype=np.float32),
        [embeddings.words[i] for i in rows],
        description,
    )
