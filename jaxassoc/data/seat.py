"""SEAT's semantically bleached sentence templates (May et al. 2019, §3; docs/methods.md §8).

``files/seat/templates.json`` (jaxassoc's own wording, ``files/seat/SOURCE.md``) holds one list of
templates per grammatical form (``name``, ``noun``, ``mass``, ``adjective``, ``plural``, ``verb``,
``subject_pronoun``, ``object_pronoun``) and the form of every word of the packaged WEAT suite that is not
a name or a singular count noun. :meth:`SeatTemplates.sentences` fills a word into its form's templates:
a listed word takes its listed form, an unlisted one is a ``name`` when capitalised, else a ``noun``.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping

from jaxassoc.data._files import malformed_error, parsing, read_json

SEAT_TEMPLATES_FILE = "seat/templates.json"


def _article(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"


@dataclasses.dataclass(frozen=True)
class SeatTemplates:
    """Templates per form, and the forms of the words that are neither names nor singular count nouns."""

    templates: Mapping[str, tuple[str, ...]]
    forms: Mapping[str, str]  # word -> form
    version: int

    def form_of(self, word: str) -> str:
        """The word's listed form, else ``name`` for a capitalised word and ``noun`` otherwise."""
        return self.forms.get(word) or ("name" if word[:1].isupper() else "noun")

    def sentences(self, word: str) -> tuple[str, ...]:
        """The word filled into each template of its form, first letter capitalised, in file order."""
        filled = (t.format(word=word, article=_article(word)) for t in self.templates[self.form_of(word)])
        return tuple(s[:1].upper() + s[1:] for s in filled)


@functools.cache
def load_seat_templates() -> SeatTemplates:
    """The packaged SEAT templates; DataError naming the file if it is malformed (a form without templates,
    a template without ``{word}``, a word listed under a form that has no templates or under two forms)."""
    raw = read_json(SEAT_TEMPLATES_FILE)
    with parsing(SEAT_TEMPLATES_FILE):
        templates = {form: tuple(str(t) for t in ts) for form, ts in raw["templates"].items()}
        listed = {form: [str(w) for w in words] for form, words in raw["forms"].items()}
        version = int(raw["version"])
    for form, ts in templates.items():
        if not ts or any("{word}" not in t for t in ts):
            raise malformed_error(SEAT_TEMPLATES_FILE, f"form {form!r} needs templates that each hold {{word}}")
    forms: dict[str, str] = {}
    for form, words in listed.items():
        if form not in templates:
            raise malformed_error(SEAT_TEMPLATES_FILE, f"words are listed under form {form!r}, which has no templates")
        for word in words:
            if word in forms:
                raise malformed_error(SEAT_TEMPLATES_FILE, f"{word!r} is listed under {forms[word]!r} and {form!r}")
            forms[word] = form
    for default in ("name", "noun"):
        if default not in templates:
            raise malformed_error(SEAT_TEMPLATES_FILE, f"it has no templates for the default form {default!r}")
    return SeatTemplates(templates, forms, version)
