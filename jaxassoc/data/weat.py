"""WEAT word sets (Caliskan, Bryson & Narayanan 2017, Science 356:183) as named suites.

Suites (docs/methods.md §1–2, ``files/weat/SOURCE.md``):

- ``weat_caliskan2017``: the canonical W1–W10 of the paper's supplement (16 + 16 names in W4–W5,
  ``short-term`` in W9, ``Billy`` in W10, ``unpleasant_5b`` in W3–W4, 8-word pleasant/unpleasant in
  W5 and W10), from ``weat/weat_caliskan2017.json``.
- ``weat_ws``: the RPAM paper's WEAT-WS C1–C10 (Hodel et al. 2026, App. B), from
  ``weat/weat_ws_rpam2026.json``: C3–C4 use the 25 unpleasant words of C1 (``agony``, ``prison``),
  C8 reuses C7's gender terms, C10 uses the 25-word pleasant/unpleasant sets.
- ``weat_wefe``: WEFE's transcription (``weat/wefe/WEAT.json``, MIT) assembled into W1–W10 with the
  set names of SOURCE.md §A. It differs from ``weat_caliskan2017`` in exactly the four documented
  places (18 + 18 names in W4–W5 with Jay, Kristen, Tremayne, Latonya; ``short``; ``Bill``): a variant
  for reproducing WEFE-based numbers, never the default.

For RPAM on C7/C8 the paper swaps the roles (gender terms as targets): the sets are returned as listed
and ``WeatTest.with_roles_swapped()`` gives the swapped test; which one a run uses is the metric's choice.
"""

from __future__ import annotations

import dataclasses

from jaxassoc.data._files import parsing, read_json
from jaxassoc.errors import DataError


@dataclasses.dataclass(frozen=True)
class WeatTest:
    """One association test: targets X, Y and attributes A, B, with human-readable set labels."""

    id: str
    name: str
    targets_x: tuple[str, ...]
    targets_y: tuple[str, ...]
    attributes_a: tuple[str, ...]
    attributes_b: tuple[str, ...]
    x_name: str
    y_name: str
    a_name: str
    b_name: str

    def with_roles_swapped(self) -> WeatTest:
        """Targets and attributes exchanged (X<->A, Y<->B), keeping the direction of the association.

        RPAM uses this for WEAT-WS C7/C8 (Hodel et al. 2026, App. B): the gender terms, which name the
        social group, become the targets and the math/science/arts words the attributes.
        """
        return dataclasses.replace(
            self,
            targets_x=self.attributes_a,
            targets_y=self.attributes_b,
            attributes_a=self.targets_x,
            attributes_b=self.targets_y,
            x_name=self.a_name,
            y_name=self.b_name,
            a_name=self.x_name,
            b_name=self.y_name,
        )


@dataclasses.dataclass(frozen=True)
class WeatSuite:
    """A named, ordered collection of WEAT tests and the packaged file it came from."""

    name: str
    tests: tuple[WeatTest, ...]
    source: str

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(test.id for test in self.tests)

    def test(self, test_id: str) -> WeatTest:
        """The test with this id; DataError listing the suite's ids if there is none."""
        for test in self.tests:
            if test.id == test_id:
                return test
        raise DataError(f"WEAT suite {self.name!r} has no test {test_id!r}; its tests are {list(self.ids)}")


# Set labels (X, Y, A, B) per test number, shared by all three suites (the papers' own labels).
_NAMES = "European American names", "African American names"
_VALENCE = "Pleasant", "Unpleasant"
SET_LABELS: dict[int, tuple[str, str, str, str]] = {
    1: ("Flowers", "Insects", *_VALENCE),
    2: ("Musical instruments", "Weapons", *_VALENCE),
    3: (*_NAMES, *_VALENCE),
    4: (*_NAMES, *_VALENCE),
    5: (*_NAMES, *_VALENCE),
    6: ("Male names", "Female names", "Career", "Family"),
    7: ("Math", "Arts", "Male terms", "Female terms"),
    8: ("Science", "Arts", "Male terms", "Female terms"),
    9: ("Mental disease", "Physical disease", "Temporary", "Permanent"),
    10: ("Young people's names", "Old people's names", *_VALENCE),
}

# WEFE set names per test (files/weat/SOURCE.md §A), in the order X, Y, A, B.
WEFE_SETS: dict[int, tuple[str, str, str, str]] = {
    1: ("flowers", "insects", "pleasant_5", "unpleasant_5a"),
    2: ("instruments", "weapons", "pleasant_5", "unpleasant_5a"),
    3: ("european_american_names_5", "african_american_names_5", "pleasant_5", "unpleasant_5b"),
    4: ("european_american_names_7", "african_american_names_7", "pleasant_5", "unpleasant_5b"),
    5: ("european_american_names_7", "african_american_names_7", "pleasant_9", "unpleasant_9"),
    6: ("male_names", "female_names", "career", "family"),
    7: ("math", "arts", "male_terms", "female_terms"),
    8: ("science", "arts_2", "male_terms_2", "female_terms_2"),
    9: ("mental_disease", "physical_disease", "temporary", "permanent"),
    10: ("young_people_names", "old_people_names", "pleasant_9", "unpleasant_9"),
}

_SUITE_FILES = {
    "weat_caliskan2017": ("weat/weat_caliskan2017.json", "W"),
    "weat_ws": ("weat/weat_ws_rpam2026.json", "C"),
    "weat_wefe": ("weat/wefe/WEAT.json", "W"),
}
SUITE_NAMES: tuple[str, ...] = tuple(_SUITE_FILES)


def _test_from_sets(test_id: str, name: str, number: int, sets: tuple[list[str], ...]) -> WeatTest:
    x, y, a, b = (tuple(words) for words in sets)
    x_name, y_name, a_name, b_name = SET_LABELS[number]
    return WeatTest(test_id, name, x, y, a, b, x_name, y_name, a_name, b_name)


def _suite_from_tests_file(name: str, source: str, prefix: str) -> WeatSuite:
    raw = read_json(source)
    with parsing(source):
        tests = tuple(
            _test_from_sets(
                test_id,
                entry["name"],
                int(test_id[len(prefix) :]),
                (entry["X"], entry["Y"], entry["A"], entry["B"]),
            )
            for test_id, entry in raw.items()
        )
    return WeatSuite(name, tests, source)


def _wefe_suite(source: str) -> WeatSuite:
    lists = read_json(source)
    tests = []
    for number, set_names in WEFE_SETS.items():
        x, y, a, b = set_names
        with parsing(source):
            sets = tuple(lists[s] for s in set_names)
        tests.append(_test_from_sets(f"W{number}", f"{x}/{y} x {a}/{b}", number, sets))
    return WeatSuite("weat_wefe", tuple(tests), source)


def load_weat_suite(name: str) -> WeatSuite:
    """A WEAT suite by name: ``weat_caliskan2017`` (W1–W10), ``weat_ws`` (C1–C10) or ``weat_wefe``."""
    if name not in _SUITE_FILES:
        raise DataError(f"unknown WEAT suite {name!r}; the packaged suites are {list(SUITE_NAMES)}")
    source, prefix = _SUITE_FILES[name]
    if name == "weat_wefe":
        return _wefe_suite(source)
    return _suite_from_tests_file(name, source, prefix)


def weat_test(suite_name: str, test_id: str) -> WeatTest:
    """One test of a suite, e.g. ``weat_test("weat_caliskan2017", "W6")``."""
    return load_weat_suite(suite_name).test(test_id)
