"""Packaged datasets and their loaders.

Every file is an unmodified copy of public data, vendored under ``jaxassoc/data/files/<folder>/`` with
its ``SOURCE.md`` / licence notes; ``DATA_LICENSES.md`` lists each file, its origin and terms. Loaders
return plain Python / pandas objects (host-side data, not arrays); a missing file or an unknown name
raises ``jaxassoc.errors.DataError``. ``DATASETS`` / ``load_dataset`` name them for the app; the
UnStereoEval loaders live in ``jaxassoc.data.unstereo`` and are imported lazily. The attribute word
lists and counterfactual sentences that fit concept erasers are in ``jaxassoc.data.counterfactual``
(``files/mitigation/``, jaxassoc's own lists); Bolukbasi et al.'s Hard Debias lists are
``load_debiaswe_lists`` (``files/debiaswe/``, MIT).
"""

from jaxassoc.data.ceat import load_ceat_wordlists
from jaxassoc.data.corpus import detokenize_wikitext, load_text_corpus, load_wikitext2, wikitext2_sentences
from jaxassoc.data.counterfactual import (
    AttributeWords,
    CounterfactualSet,
    augmented_sentences,
    counterfactual_sentences,
    fitting_sentences,
    load_attribute_words,
)
from jaxassoc.data.debiaswe import DebiasweLists, load_debiaswe_lists
from jaxassoc.data.registry import DATASETS, DatasetInfo, dataset_info, load_dataset
from jaxassoc.data.seat import SeatTemplates, load_seat_templates
from jaxassoc.data.similarity import load_simlex999, load_wordsim353
from jaxassoc.data.sst2 import load_sst2
from jaxassoc.data.stereotypes import AbcData, load_abc, load_human_ratings
from jaxassoc.data.stsb import load_stsb
from jaxassoc.data.valence import load_bellezza, valence_attributes
from jaxassoc.data.weat import SUITE_NAMES, WeatSuite, WeatTest, load_weat_suite, weat_test

__all__ = [
    "DATASETS",
    "SUITE_NAMES",
    "AbcData",
    "AttributeWords",
    "CounterfactualSet",
    "DatasetInfo",
    "DebiasweLists",
    "SeatTemplates",
    "WeatSuite",
    "WeatTest",
    "augmented_sentences",
    "counterfactual_sentences",
    "dataset_info",
    "detokenize_wikitext",
    "fitting_sentences",
    "load_abc",
    "load_attribute_words",
    "load_bellezza",
    "load_ceat_wordlists",
    "load_dataset",
    "load_debiaswe_lists",
    "load_human_ratings",
    "load_seat_templates",
    "load_simlex999",
    "load_sst2",
    "load_text_corpus",
    "load_stsb",
    "load_weat_suite",
    "load_wikitext2",
    "load_wordsim353",
    "valence_attributes",
    "weat_test",
    "wikitext2_sentences",
]
