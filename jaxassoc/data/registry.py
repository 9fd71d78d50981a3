"""The named datasets the app can load: ``DATASETS[name]`` and ``load_dataset(name, **options)``.

Each entry records the packaged files it reads; ``DatasetInfo.version`` is a short SHA-256 over those
files (computed on first use) for the provenance of every result. The UnStereoEval entries (``use5``,
``use10``, ``use20``, ``winobias``, ``winogender``) point at ``jaxassoc.data.unstereo``, which is
imported only when one of them is loaded.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import inspect
from collections.abc import Callable
from typing import Any

from jaxassoc.data._files import content_hash
from jaxassoc.data.ceat import CEAT_FILE, load_ceat_wordlists
from jaxassoc.data.corpus import WIKITEXT2_FILES, load_wikitext2
from jaxassoc.data.crows_pairs import CROWS_PAIRS_FILE, load_crows_pairs
from jaxassoc.data.mediation import PROFESSIONS_FILE, load_vig_professions
from jaxassoc.data.seat import SEAT_TEMPLATES_FILE, load_seat_templates
from jaxassoc.data.similarity import (
    SIMLEX999_FILE,
    WORDSIM353_SUBSETS,
    load_simlex999,
    load_wordsim353,
)
from jaxassoc.data.sst2 import SST2_FILES, load_sst2
from jaxassoc.data.stereotypes import ABC_FILE, HUMAN_RATINGS_FILE, load_abc, load_human_ratings
from jaxassoc.data.stsb import STSB_FILES, load_stsb
from jaxassoc.data.valence import BELLEZZA_FILE, load_bellezza
from jaxassoc.data.weat import load_weat_suite
from jaxassoc.errors import DataError

UNSTEREO_MODULE = "jaxassoc.data.unstereo"


@dataclasses.dataclass(frozen=True)
class LazyLoader:
    """A loader that lives in another module, imported on first call (``function(*args, **kw)``)."""

    module: str
    function: str
    args: tuple[Any, ...] = ()

    def resolve(self) -> Callable[..., Any]:
        try:
            module = importlib.import_module(self.module)
        except ModuleNotFoundError as error:
            if error.name != self.module:
                raise
            raise DataError(
                f"the loader {self.module}.{self.function} is not available: module {self.module!r} "
                f"is missing from this jaxassoc installation; reinstall jaxassoc"
            ) from None
        function = getattr(module, self.function)
        return functools.partial(function, *self.args) if self.args else function

    def __call__(self, **kwargs: Any) -> Any:
        return self.resolve()(**kwargs)


@dataclasses.dataclass(frozen=True)
class DatasetInfo:
    """A named dataset: its loader, a one-line description and the packaged files it reads."""

    name: str
    loader: Callable[..., Any]
    description: str
    files: tuple[str, ...]

    @functools.cached_property
    def version(self) -> str:
        """Short content hash of the dataset's packaged files (provenance)."""
        return content_hash(self.files)


_WEAT_SOURCE = "weat/SOURCE.md"
_UNSTEREO_FILES = ("unstereo_eval",)
ENTRIES: tuple[DatasetInfo, ...] = (
    DatasetInfo(
        "weat_caliskan2017",
        functools.partial(load_weat_suite, "weat_caliskan2017"),
        "WEAT W1-W10 of Caliskan et al. 2017 (paper's supplement)",
        ("weat/weat_caliskan2017.json", _WEAT_SOURCE),
    ),
    DatasetInfo(
        "weat_ws",
        functools.partial(load_weat_suite, "weat_ws"),
        "WEAT-WS C1-C10 of the RPAM paper (Hodel et al. 2026, App. B)",
        ("weat/weat_ws_rpam2026.json", _WEAT_SOURCE),
    ),
    DatasetInfo(
        "weat_wefe",
        functools.partial(load_weat_suite, "weat_wefe"),
        "WEAT W1-W10 as in WEFE's WEAT.json (18-name W4-W5, 'short', 'Bill'; variant)",
        ("weat/wefe/WEAT.json", _WEAT_SOURCE),
    ),
    DatasetInfo(
        "crows_pairs",
        load_crows_pairs,
        "CrowS-Pairs: 1,508 more/less stereotyping sentence pairs, 9 bias types (Nangia et al. 2020)",
        (CROWS_PAIRS_FILE, "crows_pairs/SOURCE.md"),
    ),
    DatasetInfo(
        "vig_professions",
        load_vig_professions,
        "Vig et al. 2020: 320 professions (Bolukbasi et al. 2016 scores) in 17 templates, he vs. she",
        (PROFESSIONS_FILE, "vig_mediation/SOURCE.md"),
    ),
    DatasetInfo(
        "seat_templates",
        load_seat_templates,
        "SEAT's bleached sentence templates per word form (after May et al. 2019, §3; jaxassoc's wording)",
        (SEAT_TEMPLATES_FILE, "seat/SOURCE.md"),
    ),
    DatasetInfo(
        "wordsim353",
        load_wordsim353,
        "WordSim-353 word pairs with mean human relatedness (0-10); subset=combined|set1|set2",
        (*WORDSIM353_SUBSETS.values(), "wordsim353/SOURCE.md"),
    ),
    DatasetInfo(
        "simlex999",
        load_simlex999,
        "SimLex-999 word pairs with human similarity (0-10)",
        (SIMLEX999_FILE, "simlex999/SOURCE.md"),
    ),
    DatasetInfo(
        "bellezza",
        load_bellezza,
        "Bellezza et al. 1986 pleasantness norms, 399 words (1-5)",
        (BELLEZZA_FILE, "bellezza/SOURCE.md"),
    ),
    DatasetInfo(
        "sst2",
        load_sst2,
        "SST-2 validation: 872 sentences, 444 positive / 428 negative",
        (*SST2_FILES.values(), "sst2/SOURCE.md"),
    ),
    DatasetInfo(
        "stsb",
        load_stsb,
        "STS Benchmark sentence pairs (0-5); split=dev (1500) | test (1379)",
        (*STSB_FILES.values(), "stsb/SOURCE.md"),
    ),
    DatasetInfo(
        "wikitext2",
        load_wikitext2,
        "WikiText-2 (tokenised) paragraphs; split=test | valid",
        (*WIKITEXT2_FILES.values(), "wikitext2/SOURCE.md"),
    ),
    DatasetInfo(
        "abc",
        load_abc,
        "ABC traits, groups, priors and 35 templates of Cao et al. 2022",
        (ABC_FILE, HUMAN_RATINGS_FILE),
    ),
    DatasetInfo(
        "abc_human_ratings",
        load_human_ratings,
        "Cao et al. 2022 mean human ratings, 26 groups x 16 trait pairs (0-100)",
        (HUMAN_RATINGS_FILE,),
    ),
    DatasetInfo(
        "ceat",
        load_ceat_wordlists,
        "CEAT word lists of Guo & Caliskan 2021, 14 tests",
        (CEAT_FILE, "ceat/COMMIT"),
    ),
    *(
        DatasetInfo(
            f"use{n}",
            LazyLoader(UNSTEREO_MODULE, "load_use", (n,)),
            f"UnStereoEval USE-{n} (Belem et al. 2024)",
            _UNSTEREO_FILES,
        )
        for n in (5, 10, 20)
    ),
    DatasetInfo(
        "winobias",
        LazyLoader(UNSTEREO_MODULE, "load_winobias"),
        "WinoBias as preprocessed by UnStereoEval (Belem et al. 2024)",
        _UNSTEREO_FILES,
    ),
    DatasetInfo(
        "winogender",
        LazyLoader(UNSTEREO_MODULE, "load_winogender"),
        "Winogender as preprocessed by UnStereoEval (Belem et al. 2024)",
        _UNSTEREO_FILES,
    ),
)
"""Every packaged dataset."""

DATASETS: dict[str, DatasetInfo] = {info.name: info for info in ENTRIES}


def dataset_info(name: str) -> DatasetInfo:
    """The registry entry for ``name``; DataError listing the known names if there is none."""
    try:
        return DATASETS[name]
    except KeyError:
        raise DataError(f"unknown dataset {name!r}; the known datasets are {sorted(DATASETS)}") from None


def load_dataset(name: str, **options: Any) -> Any:
    """Load a registered dataset, passing ``options`` (e.g. ``split="test"``) to its loader."""
    loader = dataset_info(name).loader
    function = loader.resolve() if isinstance(loader, LazyLoader) else loader
    try:
        inspect.signature(function).bind(**options)
    except TypeError:
        raise DataError(
            f"dataset {name!r} does not take the options {sorted(options)}; its loader accepts "
            f"{inspect.signature(function)}"
        ) from None
    return function(**options)
