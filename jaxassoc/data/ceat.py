"""CEAT word lists (Guo & Caliskan 2021, AIES, "Detecting Emergent Intersectional Biases"), as
transcribed from the authors' ``code/ceat.py`` @ 497e295 (``ceat/extracted_from_code/``; the repository
has no licence file; the lists are those of the published paper).

Fourteen tests, X, Y, A, B in the order of the original code. C1–C10 are the WEAT tests as CEAT uses
them: the same sets as ``weat_caliskan2017`` (C3–C4 with ``bomb``/``evil``, 8-word sets in C5/C10, 16
names in C4–C5) except that C9 has WEFE's ``short`` for ``short-term``, as in the original code; the
word order within some sets differs from the WEAT files. ``AF-inter`` and ``AF-emerg`` compare African
American females with European American males on intersectional and emergent-intersectional
attributes, ``LF-inter`` and ``LF-emerg`` do the same for Mexican American females. The intersectional
tests have unequal sizes (12 names; 13/8/12/6 attributes).
"""

from __future__ import annotations

from jaxassoc.data._files import parsing, read_json
from jaxassoc.data.weat import SET_LABELS, WeatTest

CEAT_FILE = "ceat/extracted_from_code/ceat_weat_wordlists.json"

# Test ids and set labels of the four intersectional tests (numbers 11–14 in the original code).
_INTERSECTIONAL: tuple[tuple[str, tuple[str, str, str, str]], ...] = (
    (
        "AF-inter",
        (
            "African American females",
            "European American males",
            "African American female intersectional biases",
            "European American male biases (vs AF)",
        ),
    ),
    (
        "AF-emerg",
        (
            "African American females",
            "European American males",
            "African American female emergent biases",
            "European American male emergent biases (vs AF)",
        ),
    ),
    (
        "LF-inter",
        (
            "Mexican American females",
            "European American males",
            "Mexican American female intersectional biases",
            "European American male biases (vs LF)",
        ),
    ),
    (
        "LF-emerg",
        (
            "Mexican American females",
            "European American males",
            "Mexican American female emergent biases",
            "European American male emergent biases (vs LF)",
        ),
    ),
)


def load_ceat_wordlists() -> dict[str, WeatTest]:
    """The 14 CEAT tests by id (``C1``…``C10``, ``AF-inter``, ``AF-emerg``, ``LF-inter``, ``LF-emerg``);
    each test's ``name`` lists the original code's set names ``X/Y x A/B``."""
    raw = read_json(CEAT_FILE)
    with parsing(CEAT_FILE):
        lists, specs = raw["lists"], raw["tests"]
        ids_labels = [(f"C{n}", SET_LABELS[n]) for n in range(1, 11)] + list(_INTERSECTIONAL)
        tests = {}
        for (test_id, labels), (x, y, a, b) in zip(ids_labels, specs, strict=True):
            tests[test_id] = WeatTest(
                id=test_id,
                name=f"{x}/{y} x {a}/{b}",
                targets_x=tuple(lists[x]),
                targets_y=tuple(lists[y]),
                attributes_a=tuple(lists[a]),
                attributes_b=tuple(lists[b]),
                x_name=labels[0],
                y_name=labels[1],
                a_name=labels[2],
                b_name=labels[3],
            )
    return tests
