"""Fitting data for concept erasers: attribute words per bias type and counterfactual sentences.

``files/mitigation/{gender,race,religion}.json`` (jaxassoc's own lists, ``files/mitigation/SOURCE.md``)
hold, per bias type, the class names (gender: ``male``, ``female``) and counterfactual tuples, one word
per class in class order (``["he", "she"]``). :func:`load_attribute_words` reads one of them by name, or a
user's JSON file of the same form by path.

:func:`counterfactual_sentences` keeps the sentences that hold attribute words of exactly one class and
makes, for each, one copy per class: the copy for class ``c`` has every attribute word swapped to class
``c``'s word of the same tuple (a word in several tuples of its class uses the first), the copy for the
sentence's own class is the original. Matching is case-insensitive on whole whitespace-separated tokens,
with the punctuation around a token stripped (``"He,"`` matches ``he``) and a trailing ``'s`` kept aside
(``father's``); a swap keeps the token's capitalisation (``He`` -> ``She``, ``HE`` -> ``SHE``) and its
punctuation. Everything is in corpus and file order: no hashing, no set order.

:func:`fitting_sentences` gives the fitting corpus: WikiText-2 ``valid`` (detokenised), never ``test``,
which measures the language-modelling cost of an eraser, or the lines of a user's text file.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from jaxassoc.data._files import parsing, read_json
from jaxassoc.data.corpus import load_text_corpus, wikitext2_sentences
from jaxassoc.data.textfile import read_utf8
from jaxassoc.errors import DataError

BIAS_TYPES: tuple[str, ...] = ("gender", "race", "religion")
MITIGATION_FILES: dict[str, str] = {name: f"mitigation/{name}.json" for name in BIAS_TYPES}
FITTING_CORPUS = "wikitext2"

# A token: leading punctuation, a core (inner hyphens and apostrophes kept), trailing punctuation. \W is
# Unicode-aware, so accented letters belong to the core.
_TOKEN = re.compile(r"^(\W*)(.*?)(\W*)$", re.DOTALL)
_POSSESSIVE = ("'s", "\u2019s", "'S", "\u2019S")


@dataclasses.dataclass(frozen=True)
class AttributeWords:
    """Class names and counterfactual tuples (one lower-case word per class, in class order)."""

    bias_type: str
    classes: tuple[str, ...]
    tuples: tuple[tuple[str, ...], ...]
    source: str

    @property
    def n_classes(self) -> int:
        return len(self.classes)

    def words(self, cls: int) -> tuple[str, ...]:
        """The distinct words of class ``cls``, in tuple order."""
        return tuple(dict.fromkeys(t[cls] for t in self.tuples))

    def lexicon(self) -> dict[str, tuple[int, int]]:
        """Word -> (its class, the first tuple that holds it)."""
        lexicon: dict[str, tuple[int, int]] = {}
        for i, t in enumerate(self.tuples):
            for c, word in enumerate(t):
                lexicon.setdefault(word, (c, i))
        return lexicon


@dataclasses.dataclass(frozen=True, eq=False)
class CounterfactualSet:
    """``tuples[i][c]`` is sentence ``i`` with its attribute words swapped to class ``c``; ``labels[i]`` is
    the class of the original (``tuples[i][labels[i]]`` is the original sentence)."""

    bias_type: str
    classes: tuple[str, ...]
    tuples: tuple[tuple[str, ...], ...]
    labels: np.ndarray  # (n,) int32
    corpus: str

    def __len__(self) -> int:
        return len(self.tuples)

    @property
    def originals(self) -> tuple[str, ...]:
        return tuple(t[int(c)] for t, c in zip(self.tuples, self.labels))

    def sentences(self, cls: int) -> tuple[str, ...]:
        """Every sentence's copy for class ``cls``, in corpus order."""
        return tuple(t[cls] for t in self.tuples)


# --- word lists --------------------------------------------------------------------------------------


def _is_path(spec: str | Path) -> bool:
    return isinstance(spec, Path) or spec.endswith(".json") or "/" in spec or "\\" in spec


def load_attribute_words(bias_type_or_path: str | Path) -> AttributeWords:
    """The packaged lists of ``gender``, ``race`` or ``religion``, or a user's JSON file of the same form
    (``classes``, ``tuples``; optional ``bias_type``, else the file's stem). Words are lower-cased. DataError
    naming the input for an unknown bias type, a file that is missing or not JSON, fewer than two classes,
    a tuple whose length is not the number of classes, an empty word or one with a space, and a word in
    two classes."""
    if not _is_path(bias_type_or_path):
        name = str(bias_type_or_path)
        if name not in MITIGATION_FILES:
            raise DataError(
                f"unknown bias type {name!r} for the attribute word lists; choose one of {list(BIAS_TYPES)} "
                "or give the path of a .json file of your own"
            )
        relative = MITIGATION_FILES[name]
        raw = read_json(relative)
        with parsing(relative):
            return _parse(raw, f"packaged word lists {relative!r}", default_name=name)
    path = Path(bias_type_or_path).expanduser()
    source = f"word list file {path}"
    if path.suffix.lower() != ".json":
        raise DataError(f"{source} is not a JSON file (its suffix is {path.suffix or 'empty'!r}): give a .json file")
    if not path.is_file():
        raise DataError(f"{source} does not exist")
    try:
        raw = json.loads(read_utf8(path, source))
    except json.JSONDecodeError as e:
        raise DataError(f"{source} is not valid JSON at line {e.lineno}, column {e.colno}: {e.msg}") from None
    return _parse(raw, source, default_name=path.stem)


def _parse(raw: object, source: str, default_name: str) -> AttributeWords:
    if not isinstance(raw, dict) or "classes" not in raw or "tuples" not in raw:
        raise DataError(f"{source}: expected a JSON object with the keys 'classes' and 'tuples'")
    bias_type = raw.get("bias_type", default_name)
    classes, tuples = raw["classes"], raw["tuples"]
    if not isinstance(bias_type, str) or not bias_type:
        raise DataError(f"{source}: 'bias_type' must be a non-empty string, not {bias_type!r}")
    if not isinstance(classes, list) or not all(isinstance(c, str) and c for c in classes):
        raise DataError(f"{source}: 'classes' must be a list of non-empty strings, not {classes!r}")
    if len(classes) < 2:
        raise DataError(f"{source}: 'classes' names {len(classes)} class(es) {classes}; give at least two")
    if len(set(classes)) != len(classes):
        raise DataError(f"{source}: 'classes' names a class twice: {classes}")
    if not isinstance(tuples, list) or not tuples:
        raise DataError(f"{source}: 'tuples' must be a non-empty list of word tuples")
    owner: dict[str, int] = {}
    parsed = []
    for i, t in enumerate(tuples):
        where = f"{source}: tuples[{i}] {t!r}"
        if not isinstance(t, list) or not all(isinstance(w, str) for w in t):
            raise DataError(f"{where} must be a list of words, one per class {classes}")
        if len(t) != len(classes):
            raise DataError(f"{where} has {len(t)} words but there are {len(classes)} classes {classes}")
        words = tuple(w.strip().lower() for w in t)
        for c, word in enumerate(words):
            if not word or any(ch.isspace() for ch in word):
                raise DataError(f"{where}: the word {t[c]!r} must be one non-empty token without spaces")
            if owner.setdefault(word, c) != c:
                raise DataError(
                    f"{where}: the word {word!r} is in two classes, {classes[owner[word]]!r} and {classes[c]!r}; "
                    "a word may belong to one class only"
                )
        parsed.append(words)
    return AttributeWords(bias_type, tuple(classes), tuple(parsed), source)


# --- counterfactual sentences ----------------------------------------------------------------------------


def _match_case(replacement: str, original: str) -> str:
    """``replacement`` in the case of ``original``: all upper, each hyphen part capitalised, first letter
    capitalised, or lower."""
    if len(original) > 1 and original.isupper():
        return replacement.upper()
    parts, new_parts = original.split("-"), replacement.split("-")
    if len(parts) > 1 and all(p[:1].isupper() for p in parts if p):
        return "-".join(p[:1].upper() + p[1:] for p in new_parts)
    if original[:1].isupper():
        return replacement[:1].upper() + replacement[1:]
    return replacement


def _split(
    sentence: str, lexicon: dict[str, tuple[int, int]]
) -> list[tuple[str, str, str, str, tuple[int, int] | None]]:
    """Per whitespace token: (leading punctuation, core, possessive 's, trailing punctuation, lexicon entry)."""
    pieces = []
    for token in sentence.split():
        lead, core, trail = _TOKEN.match(token).groups()
        poss = ""
        entry = lexicon.get(core.lower())
        if entry is None and core.endswith(_POSSESSIVE) and core[:-2].lower() in lexicon:
            core, poss = core[:-2], core[-2:]
            entry = lexicon[core.lower()]
        pieces.append((lead, core, poss, trail, entry))
    return pieces


def counterfactual_sentences(
    sentences: Sequence[str],
    words: AttributeWords,
    max_sentences: int | None = None,
    *,
    corpus: str = "the given sentences",
) -> CounterfactualSet:
    """The sentences holding attribute words of exactly one class, each with its copies for every class
    (module docstring), in corpus order; ``max_sentences`` keeps the first N. A sentence's tokens are its
    whitespace-separated pieces (WikiText-2 is pre-tokenised with spaces), so the copies keep its spacing.
    DataError naming the bias type and ``corpus`` when no sentence holds an attribute word or all that do
    hold the words of one class only."""
    if max_sentences is not None and (not isinstance(max_sentences, int) or max_sentences < 1):
        raise DataError(f"max_sentences must be a positive integer or None, not {max_sentences!r}")
    lexicon = words.lexicon()
    rows: list[tuple[str, ...]] = []
    labels: list[int] = []
    for sentence in sentences:
        if max_sentences is not None and len(rows) >= max_sentences:
            break
        pieces = _split(sentence, lexicon)
        found = [p[4] for p in pieces if p[4] is not None]
        if not found or any(c != found[0][0] for c, _ in found):
            continue
        label = found[0][0]
        copies = []
        for target in range(words.n_classes):
            if target == label:
                copies.append(sentence)
                continue
            out = []
            for lead, core, poss, trail, entry in pieces:
                if entry is not None:
                    core = _match_case(words.tuples[entry[1]][target], core)
                out.append(f"{lead}{core}{poss}{trail}")
            copies.append(" ".join(out))
        rows.append(tuple(copies))
        labels.append(label)
    if not rows:
        raise DataError(
            f"attribute words absent from the corpus: no sentence of {corpus} holds a word of the "
            f"{words.bias_type!r} lists ({words.source}) of one class only; give a corpus that mentions them"
        )
    present = sorted(set(labels))
    if len(present) < 2:
        raise DataError(
            f"only the class {words.classes[present[0]]!r} of the {words.bias_type!r} lists ({words.source}) is "
            f"present in {corpus}: counterfactual fitting needs sentences of at least two classes"
        )
    return CounterfactualSet(words.bias_type, words.classes, tuple(rows), np.asarray(labels, dtype=np.int32), corpus)


def _swapped(pieces, words: AttributeWords, shift: int) -> str:
    out = []
    for lead, core, poss, trail, entry in pieces:
        if entry is not None:
            core = _match_case(words.tuples[entry[1]][(entry[0] + shift) % words.n_classes], core)
        out.append(f"{lead}{core}{poss}{trail}")
    return " ".join(out)


def augmented_sentences(sentences: Sequence[str], words: AttributeWords) -> tuple[list[str], list[str]]:
    """Two-sided counterfactual data augmentation (Webster et al. 2020; Zmigrod et al. 2019): ``(augmented,
    untouched)``. ``augmented`` holds, for each sentence with an attribute word, the sentence and its
    ``n_classes - 1`` counterfactual copies, copy ``k`` with every attribute word of class ``c`` swapped to
    class ``(c + k) mod n``'s word of the same tuple (two classes: he <-> she, whatever mix the sentence holds),
    in corpus order; ``untouched`` the sentences without one. Words are matched and swapped as in
    :func:`counterfactual_sentences` (case, punctuation and a possessive ``'s`` kept)."""
    lexicon = words.lexicon()
    augmented, untouched = [], []
    for sentence in sentences:
        pieces = _split(sentence, lexicon)
        if not any(p[4] is not None for p in pieces):
            untouched.append(sentence)
            continue
        augmented.append(sentence)
        augmented.extend(_swapped(pieces, words, shift) for shift in range(1, words.n_classes))
    return augmented, untouched


def fitting_sentences(corpus: str | Path = FITTING_CORPUS) -> list[str]:
    """The fitting corpus: ``"wikitext2"`` gives WikiText-2's ``valid`` split, detokenised (``test`` is kept
    for the language-modelling cost); anything else is the path of a UTF-8 text file, one sentence a line."""
    if isinstance(corpus, str) and corpus == FITTING_CORPUS:
        return wikitext2_sentences("valid", detokenize=True)
    return load_text_corpus(corpus)
