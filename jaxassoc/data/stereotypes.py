"""Cao et al. (2022, NAACL), "Theory-Grounded Measurement of U.S. Social Stereotypes in English Language
Models": the Crowdsourced U.S. Stereotypes data (ABC model: Agency, Beliefs, Communion), MIT licence.

- ``load_abc``: the traits (32 poles with their synonyms), the 16 trait pairs, the 51 groups in
  singular / plural / capitalised-plural form, the prior nouns ``person`` / ``people`` / ``People`` and
  the 35 templates in 8 families, all as transcribed from the authors' ``code/test_templates.py``
  (``us_stereotypes/extracted_from_code/abc_traits_groups_templates.json``).
- ``load_human_ratings``: the mean human rating per (group, trait pair), 26 groups × 16 pairs = 416 rows,
  0 = the left pole applies, 100 = the right pole (``us_stereotypes/dataset/Aggregated_scores.json``).

Names differ between the human data and the code: the human pairs say ``low status`` and ``egoistic``
where the code's poles are ``low-status`` and ``egotistic``, and the 26 human groups are worded in the
plural (``Blacks/African Americans``, ``Christian people``). ``left``/``right`` in the ratings use the
code's pole names, and ``AbcData.human_groups`` maps each human group to its singular template group
(``average people`` to the prior noun ``person``): this mapping is ours, written from the two lists.
"""

from __future__ import annotations

import dataclasses

import pandas as pd

from jaxassoc.data._files import parsing, read_json
from jaxassoc.errors import DataError

ABC_FILE = "us_stereotypes/extracted_from_code/abc_traits_groups_templates.json"
HUMAN_RATINGS_FILE = "us_stereotypes/dataset/Aggregated_scores.json"

SLOTS: tuple[str, ...] = ("<sgroup>", "<pgroup>", "<cpgroup>")
MASK = "<mask>"

# Human trait-pair label -> (left pole, right pole) in the code's spelling.
_HUMAN_PAIR_POLES: dict[str, tuple[str, str]] = {
    "low status - high status": ("low-status", "high-status"),
    "egoistic - altruistic": ("egotistic", "altruistic"),
}

# Human-study group -> the singular group of the templates (our mapping; see the module docstring).
HUMAN_GROUPS: dict[str, str] = {
    "women": "woman",
    "men": "man",
    "transgender people": "trans person",
    "cis people": "cis person",
    "working class people": "working class person",
    "wealthy people": "wealthy person",
    "immigrants": "immigrant",
    "Jewish people": "Jewish person",
    "Christian people": "Christian",
    "Muslim people": "Muslim person",
    "White people": "White person",
    "Hispanic people": "Hispanic person",
    "Asian people": "Asian person",
    "Blacks/African Americans": "Black person",
    "average people": "person",
    "non-binary people": "non-binary person",
    "Native Americans": "Native American",
    "Buddhist people": "Buddhist",
    "Mormon people": "Mormon",
    "veterans": "veteran",
    "unemployed people": "unemployed person",
    "teenagers": "teenager",
    "elderly people": "elderly person",
    "blind people": "blind person",
    "autistic people": "autistic person",
    "neurodivergent people": "neurodivergent person",
}


@dataclasses.dataclass(frozen=True)
class AbcData:
    """Traits, groups, priors and templates of the ABC stereotype measurements (Cao et al. 2022).

    ``groups[slot]`` and ``priors[slot]`` give the group list and prior noun that fill a template's
    slot (``<sgroup>`` singular, ``<pgroup>`` plural, ``<cpgroup>`` capitalised plural); the three group
    lists are aligned (index i is the same group). Each template has one slot and one ``<mask>``.
    """

    traits: dict[str, tuple[str, ...]]  # pole -> synonyms, the pole word first
    trait_pairs: tuple[tuple[str, str], ...]  # (left, right) poles, the 16 pairs of the human study
    groups: dict[str, tuple[str, ...]]  # slot -> 51 groups
    priors: dict[str, str]  # slot -> prior noun
    templates: dict[str, tuple[str, ...]]  # family -> templates
    synonym_aggregation: str  # "median" in the original code
    human_groups: dict[str, str]  # human-study group -> singular template group (or prior noun)
    source: str

    @property
    def all_templates(self) -> tuple[str, ...]:
        """The 35 templates, family by family in the original order."""
        return tuple(t for family in self.templates.values() for t in family)

    def slot_of(self, template: str) -> str:
        """The group slot a template uses."""
        found = [slot for slot in SLOTS if slot in template]
        if len(found) != 1 or MASK not in template:
            raise DataError(f"template {template!r} must contain exactly one of {list(SLOTS)} and {MASK!r}")
        return found[0]


def _pair_poles(label: str) -> tuple[str, str]:
    if label in _HUMAN_PAIR_POLES:
        return _HUMAN_PAIR_POLES[label]
    left, right = label.split(" - ")
    return left, right


def _trait_pair_labels() -> list[str]:
    """The 16 human trait-pair labels, in the order of the first group of the ratings file."""
    ratings = read_json(HUMAN_RATINGS_FILE)
    return list(next(iter(ratings.values())))


def load_abc() -> AbcData:
    """The ABC traits, groups, priors and 35 templates (see the module docstring)."""
    raw = read_json(ABC_FILE)
    with parsing(HUMAN_RATINGS_FILE):
        pairs = tuple(_pair_poles(label) for label in _trait_pair_labels())
    with parsing(ABC_FILE):
        return _abc_data(raw, pairs)


def _abc_data(raw: dict, pairs: tuple[tuple[str, str], ...]) -> AbcData:
    """The AbcData of the parsed ABC file and the human study's trait pairs."""
    traits = {pole: tuple(words) for pole, words in raw["traits_pole_to_words"].items()}
    unknown = sorted({pole for pair in pairs for pole in pair} - set(traits))
    if unknown:
        raise DataError(f"{HUMAN_RATINGS_FILE} names trait poles {unknown} missing from {ABC_FILE}")
    groups = {
        "<sgroup>": tuple(raw["groups_sing"]),
        "<pgroup>": tuple(raw["groups_plur"]),
        "<cpgroup>": tuple(raw["groups_cap_plur"]),
    }
    return AbcData(
        traits=traits,
        trait_pairs=pairs,
        groups=groups,
        priors=dict(raw["prior_groups"]),
        templates={family: tuple(ts) for family, ts in raw["templates"].items()},
        synonym_aggregation=raw["default_aggregation_over_synonyms"],
        human_groups=dict(HUMAN_GROUPS),
        source=ABC_FILE,
    )


def load_human_ratings() -> pd.DataFrame:
    """Mean human ratings: ``group``, ``trait_pair`` (the file's label), ``left``, ``right`` (pole names
    as in ``load_abc().traits``) and ``rating`` (0 = left pole … 100 = right pole), 416 rows."""
    raw = read_json(HUMAN_RATINGS_FILE)
    with parsing(HUMAN_RATINGS_FILE):
        rows = [
            (group, label, *_pair_poles(label), float(value))
            for group, scores in raw.items()
            for label, value in scores.items()
        ]
    return pd.DataFrame(rows, columns=["group", "trait_pair", "left", "right", "rating"])
