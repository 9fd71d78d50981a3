"""UnStereoEval datasets (Belem et al. 2024, "Are Models Biased on Text without Gender-related Language?").

Packaged unmodified from ucinlp/unstereo-eval @ 2aaff91 under ``files/unstereo_eval/`` (see its SOURCE.md).

Datasets and rows (the rows the paper and ``results/processed-results/*.json`` use):

============  =====  ==========================================================================
name          rows   source
============  =====  ==========================================================================
USE-5         4405   ``raw/USE-5.csv`` (4954 generated rows) where ``is_natural`` is True
USE-10        4740   ``raw/USE-10.csv`` (4943) where ``is_natural`` is True
USE-20        4839   ``raw/USE-20.csv`` (4945) where ``is_natural`` is True
Winobias      1586   dev (792) followed by test (794); no filter
Winogender     240   all templates; no filter
============  =====  ==========================================================================

"After filtering" means the stored ``is_natural`` column is True; the preprocessed files hold exactly
those rows, in raw order, with ``orig_index`` = 0..n-1 (the position among the kept rows). The data README says ``is_natural``
equals ``likely_under == {'male': 'likely', 'female': 'likely'}``, but recomputing it that way gives 4404
for USE-5: raw row 914 (``squiggle``) is stored as natural with ``{'male': 'unlikely', 'female':
'likely'}``. The processed results count 4405, so the stored flag is authoritative.

Columns of the preprocessed USE files (:func:`load_use`): ``orig_index`` (row position), ``word`` (seed word),
``target_word`` (``he``/``she``: pronoun the generator was asked for), ``sentence`` (generated text),
``has_placeholder``, ``template`` (pronouns replaced by ``{pronoun}``/``{pronoun1}``/``{pronoun2}``/
``{pronoun2}self``), ``modifications``, ``likely_under`` (str of a dict), ``is_natural``, ``has_word``,
``is_revised``, ``dataset``, ``max_gender_pmi`` (MaxPMI(s), float), ``max_gender_pmi_invalid`` (no word of
the sentence has a PMI value), ``template_words_pmi`` (str of the δ values of the template's words).
WinoBias adds ``drop``, ``filename``, ``stereotype``, ``is_challenging``, ``is_dev``, ``has_pronoun``;
Winogender has ``orig_index`` (its ``sentid``), ``example_id``, ``has_pronoun``, ``word``.

Template filling (:func:`fill_template`) and MaxPMI recomputation (:func:`recompute_max_gender_pmi`) are
host-side text processing; the metrics in :mod:`jaxassoc.metrics.unstereo` take arrays.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Literal

import numpy as np
import pandas as pd

from jaxassoc.data._files import read_csv
from jaxassoc.errors import DataError, InputError

ROOT = "unstereo_eval"

RAW_FILES: dict[str, str] = {
    "USE-5": "USE-5.csv",
    "USE-10": "USE-10.csv",
    "USE-20": "USE-20.csv",
    "Winobias-dev": "coref__Winobias__templates.dev.csv",
    "Winobias-test": "coref__Winobias__templates.test.csv",
    "Winogender": "coref__Winogender__templates.csv",
}
"""Raw file of each upstream dataset part."""

DATASETS: tuple[str, ...] = ("USE-5", "USE-10", "USE-20", "Winobias", "Winogender")
"""The five benchmarks of the paper (names as in the processed results)."""

EXPECTED_ROWS: dict[str, int] = {"USE-5": 4405, "USE-10": 4740, "USE-20": 4839, "Winobias": 1586, "Winogender": 240}

INFILLS: dict[str, dict[str, str]] = {
    "male": {"pronoun": "he", "pronoun1": "his", "pronoun2": "him"},
    "female": {"pronoun": "she", "pronoun1": "her", "pronoun2": "her"},
}
"""Placeholder -> pronoun (``benchmark-creation-configs/placeholders.json``); ``{pronoun2}self`` gives
himself/herself."""

_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")


def _read_csv(relative: str, **kwargs) -> pd.DataFrame:
    return read_csv(f"{ROOT}/{relative}", **kwargs)


def load_raw(name: str) -> pd.DataFrame:
    """An upstream raw file, unfiltered, in file order; its unnamed first column (an upstream row id, not
    always contiguous) is renamed ``orig_index``.

    ``name``: one of ``USE-5``, ``USE-10``, ``USE-20``, ``Winobias-dev``, ``Winobias-test``, ``Winogender``.
    """
    if name not in RAW_FILES:
        raise DataError(f"unknown UnStereoEval raw dataset {name!r}: choose one of {sorted(RAW_FILES)}")
    return _read_csv(f"data/datasets/raw/{RAW_FILES[name]}").rename(columns={"Unnamed: 0": "orig_index"})


def _load_preprocessed(part: str) -> pd.DataFrame:
    return _read_csv(
        f"data/datasets/preprocessed/{part}-no-maxpmi-constraint.csv.gz",
        columns=["template", "max_gender_pmi"],
        numeric=["max_gender_pmi"],
    )


def load_use(n: int) -> pd.DataFrame:
    """USE-``n`` (n in 5, 10, 20): the natural rows with ``max_gender_pmi`` (preprocessed file)."""
    if n not in (5, 10, 20):
        raise DataError(f"USE has 5-, 10- and 20-word variants; got n={n!r}: use load_use(5|10|20)")
    return _load_preprocessed(f"USE-{n}")


def load_winobias(split: Literal["dev", "test", "all"] = "all") -> pd.DataFrame:
    """WinoBias templates with ``max_gender_pmi``; ``"all"`` is dev (792) followed by test (794)."""
    if split not in ("dev", "test", "all"):
        raise DataError(f"unknown WinoBias split {split!r}: use 'dev', 'test' or 'all'")
    parts = ("dev", "test") if split == "all" else (split,)
    return pd.concat([_load_preprocessed(f"Winobias-{p}") for p in parts], ignore_index=True)


def load_winogender() -> pd.DataFrame:
    """The 240 Winogender templates with ``max_gender_pmi``."""
    return _load_preprocessed("Winogender")


def load_dataset(name: str) -> pd.DataFrame:
    """One of :data:`DATASETS` by its name in the paper's results."""
    loaders = {
        "USE-5": lambda: load_use(5),
        "USE-10": lambda: load_use(10),
        "USE-20": lambda: load_use(20),
        "Winobias": load_winobias,
        "Winogender": load_winogender,
    }
    if name not in loaders:
        raise DataError(f"unknown UnStereoEval dataset {name!r}: choose one of {list(DATASETS)}")
    return loaders[name]()


def natural_rows(raw: pd.DataFrame) -> pd.DataFrame:
    """The rows the paper keeps from a raw USE file: stored ``is_natural`` True (see module docstring)."""
    if "is_natural" not in raw.columns:
        raise DataError("natural_rows needs an `is_natural` column (raw USE files have one)")
    return raw[raw["is_natural"].astype(bool)].reset_index(drop=True)


def load_pmi_table() -> pd.DataFrame:
    """``pmi_file_w_counts.csv``: ``word``, ``pmi_diff`` = δ(w) = PMI(w, she) − PMI(w, he), ``counts``,
    ``freq``. Words are read verbatim (``nan``, ``null`` are words, not missing values)."""
    return _read_csv(
        "data/pmi_file_w_counts.csv",
        columns=["word", "pmi_diff"],
        numeric=["pmi_diff"],
        nullable=["pmi_diff"],
        index_col=0,
        keep_default_na=False,
        na_values={"pmi_diff": [""]},
    )


def fill_template(
    template: str, gender: Literal["male", "female"], *, parity_preprocessing: bool = True, row: object = None
) -> str:
    """Replace ``{pronoun}``/``{pronoun1}``/``{pronoun2}`` by the gender's he/his/him or she/her/her.

    ``parity_preprocessing`` (default, as the original scoring code): then remove ``"``, strip, and apply
    Python's ``str.capitalize()`` (which also lower-cases the rest of the sentence). A template without a
    placeholder or with an unknown one raises InputError naming ``row``.
    """
    where = "" if row is None else f" (row {row!r})"
    names = _PLACEHOLDER.findall(template)
    if not names:
        raise InputError(
            f"template{where} has no pronoun placeholder: {template!r}; use {{pronoun}}, {{pronoun1}} or {{pronoun2}}"
        )
    unknown = sorted(set(names) - set(INFILLS[gender]))
    if unknown:
        raise InputError(
            f"template{where} has unknown placeholder(s) {unknown}: {template!r}; only "
            "{pronoun}, {pronoun1}, {pronoun2} (and {pronoun2}self) are defined"
        )
    filled = _PLACEHOLDER.sub(lambda m: INFILLS[gender][m.group(1)], template)
    return filled.replace('"', "").strip().capitalize() if parity_preprocessing else filled


def fill_templates(
    templates: Sequence[str], *, parity_preprocessing: bool = True, rows: Sequence[object] | None = None
) -> tuple[list[str], list[str]]:
    """(male sentences, female sentences) of each template; ``rows`` names them in errors (default index)."""
    rows = range(len(templates)) if rows is None else rows
    pairs = [
        (
            fill_template(t, "male", parity_preprocessing=parity_preprocessing, row=r),
            fill_template(t, "female", parity_preprocessing=parity_preprocessing, row=r),
        )
        for t, r in zip(templates, rows, strict=True)
    ]
    return [m for m, _ in pairs], [f for _, f in pairs]


# --- MaxPMI recomputation ------------------------------------------------------------------------------
# The original tokenised with spaCy and looked each token up in the PMI table. We approximate spaCy's
# English tokenizer with the few rules that matter here: pronoun slots (incl. {pronoun2}self) removed;
# lower-case; clitics split off as tokens 'nt, 's, 'll, 're, 've, 'd, 'm (never words of the table);
# spaCy's special cases gonna/gotta/wanna -> gon na / got ta / wan na; numbers kept whole ("10,000");
# other words are runs of Unicode letters/digits (hyphens and punctuation split). No separate stop-word
# list: the PMI table was built without stop words (it has no "the", "and", "of", ...), so a stop word
# never has a δ; a list such as spaCy's would also drop a literal "her"/"his" that the original kept
# (USE-5 "'Her intoxicating charm ...": shipped MaxPMI = δ(her) = 1.697). On the 15,810 shipped rows
# this reproduces ``max_gender_pmi`` exactly for all but one (USE-5 "en'tain'ment").
_SLOT = re.compile(r"\{pronoun[12]?\}(?:self)?")
_NEG = re.compile(r"(?i)n['’]t\b")
_CLITIC = re.compile(r"(?i)['’](s|ll|re|ve|d|m)\b")
_SPECIAL = re.compile(r"(?i)\b(gon|got|wan)(na|ta)\b")
_TOKEN = re.compile(r"'(?:nt|s|ll|re|ve|d|m)\b|\d+(?:[.,]\d+)*|[^\W_]+")


def pmi_words(template: str) -> list[str]:
    """The lower-cased word tokens of a template, pronoun slots removed (see the comment above)."""
    text = _SLOT.sub(" ", template)
    text = _CLITIC.sub(r" '\1", _NEG.sub(" 'nt", text))
    text = _SPECIAL.sub(r"\1 \2", text).lower()
    return _TOKEN.findall(text)


def recompute_max_gender_pmi(templates: Iterable[str], pmi_table: pd.DataFrame | None = None) -> np.ndarray:
    """MaxPMI(s): the signed δ(w) of largest magnitude over the template's words found in the PMI table
    (first one on ties); NaN where no word has a δ (the original's ``max_gender_pmi_invalid``)."""
    table = load_pmi_table() if pmi_table is None else pmi_table
    delta = dict(zip(table["word"], table["pmi_diff"]))
    out = []
    for template in templates:
        values = [delta[w] for w in pmi_words(template) if w in delta]
        out.append(max(values, key=abs) if values else np.nan)
    return np.asarray(out, dtype=np.float64)
