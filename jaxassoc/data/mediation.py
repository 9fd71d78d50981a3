"""The professions and templates of Vig et al. 2020's causal mediation analysis of gender bias.

Vig et al. (NeurIPS 2020), "Investigating Gender Bias in Language Models Using Causal Mediation Analysis",
fill 17 templates ("The {} said that") with 320 professions scored by Bolukbasi et al. 2016 (packaged
``vig_mediation/professions.json``, MIT) and compare the model's next-token probabilities of "he" and
"she". A user's professions (JSON of the same shape) or templates (a text file, one a line) may replace
them; a malformed entry is a :class:`~jaxassoc.errors.DataError` naming the file, the entry and the field.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

from jaxassoc.data._files import read_text
from jaxassoc.data.textfile import read_utf8
from jaxassoc.errors import DataError

PROFESSIONS_FILE = "vig_mediation/professions.json"
MALE_STEREO_FILE = "vig_mediation/professions_male_stereo.json"
FEMALE_STEREO_FILE = "vig_mediation/professions_female_stereo.json"

TEMPLATES: tuple[str, ...] = (
    "The {} said that",
    "The {} yelled that",
    "The {} whispered that",
    "The {} wanted that",
    "The {} desired that",
    "The {} wished that",
    "The {} ate because",
    "The {} ran because",
    "The {} drove because",
    "The {} slept because",
    "The {} cried because",
    "The {} laughed because",
    "The {} went home because",
    "The {} stayed up because",
    "The {} was fired because",
    "The {} was promoted because",
    "The {} yelled because",
)
"""The authors' 17 templates in their order: six "that" sentences of their own, eleven "because" sentences
from Lu et al. 2018 (Vig et al. 2020, §3)."""


@dataclasses.dataclass(frozen=True)
class Profession:
    """A profession (``_`` in the file's word read as a space) with its Bolukbasi et al. 2016 scores
    (negative: female, positive: male)."""

    word: str
    definitional: float
    stereotypical: float

    @property
    def stereotype(self) -> str | None:
        """``"male"`` when definitional + stereotypical score > 0, ``"female"`` when < 0, None at 0: the
        authors' own split (their ``professions_male_stereo.json`` / ``..._female_stereo.json``, tested)."""
        total = self.definitional + self.stereotypical
        if total > 0:
            return "male"
        if total < 0:
            return "female"
        return None


@dataclasses.dataclass(frozen=True)
class VigProfessions:
    """The dataset ``vig_professions``: professions and the templates they fill."""

    professions: tuple[Profession, ...]
    templates: tuple[str, ...]


def load_vig_professions(path: str | None = None, templates: str | None = None) -> VigProfessions:
    """The registry's loader: :func:`load_professions` of ``path`` and :func:`load_templates` of
    ``templates`` (None: the packaged professions, the 17 templates)."""
    return VigProfessions(load_professions(path), load_templates(templates))


def load_professions(path: str | None = None) -> tuple[Profession, ...]:
    """The professions of ``path`` (None: the packaged ``professions.json``), in file order."""
    if path is None:
        return parse_professions(read_text(PROFESSIONS_FILE), f"packaged file {PROFESSIONS_FILE}")
    if not Path(path).is_file():
        raise DataError(f"{path}: no such file; give a JSON list of [profession, definitional, stereotypical]")
    return parse_professions(read_utf8(Path(path), str(path)), str(path))


def parse_professions(text: str, source: str) -> tuple[Profession, ...]:
    """The professions of a JSON text (see :func:`load_professions`); ``source`` names it in errors."""
    try:
        rows = json.loads(text)
    except json.JSONDecodeError as e:
        raise DataError(f"{source}: not valid JSON at line {e.lineno}, column {e.colno}: {e.msg}") from None
    if not isinstance(rows, list) or not rows:
        raise DataError(
            f"{source}: expected a non-empty JSON list of [profession, definitional, stereotypical], "
            f"got {type(rows).__name__}{' (empty)' if rows == [] else ''}"
        )
    professions, seen = [], {}
    for index, row in enumerate(rows):
        where = f"{source}, entry [{index}]"
        if not isinstance(row, list) or len(row) != 3:
            raise DataError(f"{where}: expected [profession, definitional, stereotypical], got {row!r}")
        word, definitional, stereotypical = row
        if not isinstance(word, str) or not word.replace("_", " ").strip():
            raise DataError(f"{where}: the profession (field 0) must be a non-empty string, got {word!r}")
        word = word.replace("_", " ")
        scores = [_score(where, field, value) for field, value in ((1, definitional), (2, stereotypical))]
        if word in seen:
            raise DataError(f"{where}: the profession {word!r} is also entry [{seen[word]}]; give each once")
        seen[word] = index
        professions.append(Profession(word, *scores))
    return tuple(professions)


def _score(where: str, field: int, value: Any) -> float:
    name = ("definitional", "stereotypical")[field - 1]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise DataError(f"{where}: the {name} score (field {field}) must be a finite number, got {value!r}")
    return float(value)


def load_templates(path: str | None = None) -> tuple[str, ...]:
    """The templates of a text file (one a line, blank lines skipped, each with exactly one ``{}`` where the
    profession goes and no other brace); None: :data:`TEMPLATES`."""
    if path is None:
        return TEMPLATES
    if not Path(path).is_file():
        raise DataError(f"{path}: no such file; give a text file with one template a line, e.g. 'The {{}} said that'")
    templates = []
    for number, line in enumerate(read_utf8(Path(path), str(path)).split("\n"), 1):
        template = line.strip()
        if not template:
            continue
        if template.count("{}") != 1 or "{" in template.replace("{}", "") or "}" in template.replace("{}", ""):
            raise DataError(
                f"{path}, line {number}: {template!r} must hold exactly one '{{}}' (where the profession goes) "
                "and no other brace"
            )
        templates.append(template)
    if not templates:
        raise DataError(f"{path}: no templates; give one a line, e.g. 'The {{}} said that'")
    return tuple(templates)
