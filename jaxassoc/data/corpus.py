"""WikiText-2 (Merity et al. 2016, "Pointer Sentinel Mixture Models"), the reference corpus for ZCA.

The packaged splits (``test``, ``valid``) are the *tokenised* release (``wiki.{test,valid}.tokens``):
words split from punctuation, ``@-@`` / ``@,@`` / ``@.@`` for in-word hyphens, thousands separators and
decimal points, and ``<unk>`` for rare words. WikiText-103 shares these articles.

- ``load_wikitext2`` returns one paragraph per line: blank lines and headings (`` = Title = ``,
  `` = = Section = = ``: lines that start with ``= `` *and* end with `` =``) are dropped and the
  surrounding spaces stripped; the text is unchanged. test: 4358 lines → 2185 paragraphs (706 headings;
  two table rows that merely start with ``= `` are kept); valid: 3760 lines → 1841 paragraphs.
- ``wikitext2_sentences`` splits those paragraphs after every ``.``, ``!`` or ``?`` token (a simple
  rule: the corpus is already tokenised, so abbreviations such as ``U.S.`` and decimals ``@.@`` are
  never separate ``.`` tokens; a quote that closes a sentence starts the next one).
  ``detokenize=True`` applies ``detokenize_wikitext``; ``drop_unk=True`` drops sentences with ``<unk>``.

``load_text_corpus`` reads a corpus of the user's instead: a UTF-8 text file, one sentence a line.
"""

from __future__ import annotations

import re
from pathlib import Path

from jaxassoc.data._files import read_lines
from jaxassoc.data.textfile import read_utf8
from jaxassoc.errors import DataError

WIKITEXT2_FILES: dict[str, str] = {"test": "wikitext2/test.txt", "valid": "wikitext2/valid.txt"}
SENTENCE_END_TOKENS = frozenset({".", "!", "?"})
UNK = "<unk>"

_HEADING = re.compile(r"=( =)* .* =( =)*")
_DETOKENIZE_RULES = (
    (re.compile(r" @([-,.])@ "), r"\1"),  # in-word hyphen, thousands separator, decimal point
    (re.compile(r" ([.,;:!?%)\]}])"), r"\1"),  # no space before closing punctuation
    (re.compile(r"([(\[{$]) "), r"\1"),  # no space after opening brackets and currency
    (re.compile(r" (n't|'s|'re|'ve|'m|'ll|'d)\b"), r"\1"),  # clitics split off by the tokeniser
)
_QUOTED = re.compile(r'" (.*?) "')


def _check_split(split: str) -> str:
    if split not in WIKITEXT2_FILES:
        raise DataError(f"unknown WikiText-2 split {split!r}; choose one of {list(WIKITEXT2_FILES)}")
    return WIKITEXT2_FILES[split]


def load_wikitext2(split: str = "test") -> list[str]:
    """The split's paragraphs: non-empty lines without headings, stripped, in file order."""
    lines = (line.strip() for line in read_lines(_check_split(split)))
    return [line for line in lines if line and not _HEADING.fullmatch(line)]


def detokenize_wikitext(text: str) -> str:
    """Undo the WikiText tokenisation for display or LM input (``@-@`` → ``-``, ``word .`` → ``word.``,
    ``do n't`` → ``don't``, ``" a b "`` → ``"a b"``). Opening and closing quotes look alike, so they are
    paired left to right only when a text has an even number of them; otherwise they are left alone."""
    for pattern, replacement in _DETOKENIZE_RULES:
        text = pattern.sub(replacement, text)
    if text.count('"') % 2 == 0:
        text = _QUOTED.sub(r'"\1"', text)
    return text


def wikitext2_sentences(split: str = "test", *, detokenize: bool = False, drop_unk: bool = False) -> list[str]:
    """The split's sentences, cut after each ``.``/``!``/``?`` token (see the module docstring)."""
    sentences = []
    for paragraph in load_wikitext2(split):
        current: list[str] = []
        for token in paragraph.split():
            current.append(token)
            if token in SENTENCE_END_TOKENS:
                sentences.append(" ".join(current))
                current = []
        if current:
            sentences.append(" ".join(current))
    if drop_unk:
        sentences = [s for s in sentences if UNK not in s.split()]
    return [detokenize_wikitext(s) for s in sentences] if detokenize else sentences


def load_text_corpus(path: str | Path) -> list[str]:
    """The non-empty lines of a UTF-8 text file, stripped (a leading BOM dropped); DataError naming the
    file and line if it is not UTF-8, and naming the file if it has no text."""
    source = f"corpus file {path}"
    sentences = [line.strip() for line in read_utf8(Path(path), source).splitlines() if line.strip()]
    if not sentences:
        raise DataError(f"{source} holds no text: give a UTF-8 text file with one sentence a line")
    return sentences
