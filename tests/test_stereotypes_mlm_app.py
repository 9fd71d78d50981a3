"""``metric=set|ilps|ilps_star dataset=abc`` on tiny masked LMs through the real CLI: the job takes the
masked path by the model's objective, agrees with the Python API, shares its passes through the cache
(bit-identical), and fails clearly on a trait the tokenizer cannot spell and on a mismatched model.kind."""

import family_specs
import numpy as np
import pandas as pd
import pytest

from jaxassoc.data import load_abc
from jaxassoc.models import load_model
from jaxassoc.readouts.stereotypes import default_words
from jaxassoc.suites.stereotypes import human_alignment, pair_matrix
from jaxassoc.suites.stereotypes_mlm import score_masked

ABC = load_abc()
TEMPLATES = ["Most <pgroup> are <mask>.", "The <mask> people are <pgroup>."]  # the second has no causal form


def covering_bert(folder):
    """A tiny BertForMaskedLM whose WordPiece vocabulary spells every ABC trait and group (no [UNK])."""
    text = (
        family_specs.CORPUS
        + default_words(ABC)
        + [g for slot in ABC.groups.values() for g in slot]
        + list(ABC.all_templates)
    )
    fast = family_specs.tiny_tokenizer("bert", corpus=text, vocab_size=400)
    model, _ = family_specs.build_torch(family_specs.tiny("bert", 5, vocab_size=len(fast), max_position_embeddings=128))
    model.save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def folders(tmp_path_factory, tiny_checkpoint):
    return {
        "roberta": tiny_checkpoint("roberta", 6, max_position_embeddings=130),
        "bert": covering_bert(tmp_path_factory.mktemp("mlm_app") / "bert-covering"),
        "bert-unk": tiny_checkpoint("bert", 6),
    }


@pytest.fixture
def jaxassoc(cli):
    """``jaxassoc(cwd, *overrides, ok=True)``: the CLI run in process; ``ok``: whether it must succeed."""

    def run(cwd, *overrides, ok=True):
        proc = cli("jaxassoc", *overrides, cwd=cwd, env={"HYDRA_FULL_ERROR": "0"})
        assert (proc.returncode == 0) == ok, proc.stderr[-3000:]
        return proc

    return run


@pytest.mark.slow  # the masked app path runs in the default suite in test_set_resume.py[masked]
@pytest.mark.parametrize("family", ["roberta", "bert"])
def test_masked_job_matches_the_api_and_shares_passes_through_the_cache(tmp_path, folders, family, jaxassoc):
    cache = tmp_path / "cache"
    common = [
        "dataset=abc",
        f"model.source={folders[family]}",
        "model.kind=masked",
        "model.name=tiny",
        "model.batch_size=128",
        "metric.templates=[" + ",".join(f"'{t}'" for t in TEMPLATES) + "]",
        f"cache_dir={cache}",
    ]
    for score in ("set", "ilps_star"):
        proc = jaxassoc(tmp_path, f"metric={score}", *common, f"hydra.run.dir={score}")
        hits = (proc.stderr + proc.stdout).count("cache hit: stereotype_scores")
        assert hits == (0 if score == "set" else 2)  # ilps_star reuses set's passes, one entry per template
    stored = [np.load(f) for f in sorted((cache / "stereotype_scores").glob("*.npz"))]
    assert len(stored) == 2
    model = load_model(folders[family])
    for template in TEMPLATES:
        slot = ABC.slot_of(template)
        to_slot = dict(zip(ABC.groups["<sgroup>"], ABC.groups[slot]))
        groups = [to_slot[s] for s in dict.fromkeys(ABC.human_groups.values()) if s in to_slot]  # the job's
        api = score_masked(model, ABC, template, groups=groups, batch_size=128)
        # the cache entry is bit-identical to a fresh computation through the API
        same = [
            e
            for e in stored
            if all(
                e[c].tobytes() == api[c].to_numpy().tobytes() for c in ("ilps", "ilps_star", "set", "set_distance_max")
            )
        ]
        assert len(same) == 1
        for score in ("set", "ilps_star"):
            items = pd.read_parquet(tmp_path / score / "items.parquet")
            assert (items["prov_prompt"] == "masked write-in").all()
            result, present = human_alignment(pair_matrix(api, ABC, score), ABC, slot)
            assert len(present) == 25 and present == list(items[items.template == template].group)
            np.testing.assert_array_equal(
                items[items.template == template].kendall_tau, np.asarray(result.tau_per_group)
            )


def test_masked_job_refuses_unknown_traits_and_a_wrong_model_kind(tmp_path, folders, jaxassoc):
    unk = jaxassoc(
        tmp_path,
        "metric=ilps",
        "dataset=abc",
        f"model.source={folders['bert-unk']}",
        "model.kind=masked",
        "model.name=tiny",
        "hydra.run.dir=unk",
        "cache_dir=null",
        ok=False,
    )
    assert "unknown token" in unk.stderr and "Traceback" not in unk.stderr
    kind = jaxassoc(
        tmp_path,
        "metric=ilps",
        "dataset=abc",
        f"model.source={folders['roberta']}",
        "model.kind=causal",
        "model.name=tiny",
        "hydra.run.dir=kind",
        "cache_dir=null",
        ok=False,
    )
    assert "set model.kind=masked" in kind.stderr
    template = jaxassoc(
        tmp_path,
        "metric=ilps",
        "dataset=abc",
        f"model.source={folders['roberta']}",
        "model.kind=masked",
        "model.name=tiny",
        "metric.templates=['The <sgroup> is nice.']",
        "hydra.run.dir=template",
        "cache_dir=null",
        ok=False,
    )
    assert "The <sgroup> is nice." in template.stderr and "35 ABC templates" in template.stderr
