"""``metric=set|ilps|ilps_star dataset=abc`` on tiny masked LMs through the real CLI: the job takes the
masked path by the model's objective, agrees with the Python API, shares its passes through the cache
(bit-identical), and fails clearly on a trait the tokenizer cannot spell and on a mismatched model.kind."""

import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import transformers
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

from jaxassoc.app.pipelines.stereotypes import default_words, human_alignment, pair_matrix
from jaxassoc.app.pipelines.stereotypes_mlm import score_masked
from jaxassoc.data import load_abc
from jaxassoc.models import load_model
from models_helpers import CORPUS, save_tiny_checkpoint, tiny_model

ABC = load_abc()
TEMPLATES = ["Most <pgroup> are <mask>.", "The <mask> people are <pgroup>."]  # the second has no causal form


def covering_bert(folder):
    """A tiny BertForMaskedLM whose WordPiece vocabulary spells every ABC trait and group (no [UNK])."""
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    text = CORPUS + default_words(ABC) + [g for slot in ABC.groups.values() for g in slot] + list(ABC.all_templates)
    tok.train_from_iterator(text, trainers.WordPieceTrainer(vocab_size=400, special_tokens=specials))
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[(s, tok.token_to_id(s)) for s in ("[CLS]", "[SEP]")]
    )
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]",
                                                cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]")
    tiny_model("bert", seed=5, vocab_size=len(fast), max_position_embeddings=128).save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("mlm_app")
    return {
        "roberta": save_tiny_checkpoint(root, "roberta", seed=6, max_position_embeddings=130),
        "bert": covering_bert(root / "bert-covering"),
        "bert-unk": save_tiny_checkpoint(root, "bert", seed=6),
    }


def jaxassoc(cwd, *overrides, ok=True):
    env = {**os.environ, "HYDRA_FULL_ERROR": "0"}
    proc = subprocess.run([sys.executable, "-m", "jaxassoc", *overrides], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)
    assert (proc.returncode == 0) == ok, proc.stderr[-3000:]
    return proc


@pytest.mark.parametrize("family", ["roberta", "bert"])
def test_masked_job_matches_the_api_and_shares_passes_through_the_cache(tmp_path, folders, family):
    common = ["dataset=abc", f"model.source={folders[family]}", "model.kind=masked", "model.name=tiny",
              "model.batch_size=128", "metric.templates=[" + ",".join(f"'{t}'" for t in TEMPLATES) + "]",
              f"cache_dir={tmp_path / 'cache'}"]
    runs = {}
    for score in ("set", "ilps_star", "set"):
        proc = jaxassoc(tmp_path, f"metric={score}", *common, f"hydra.run.dir={score}{len(runs)}")
        hits = (proc.stderr + proc.stdout).count("cache hit: stereotype_scores")
        assert hits == (0 if not runs else 2)  # later jobs reuse the first one's passes, per template
        runs[f"{score}{len(runs)}"] = tmp_path / f"{score}{len(runs)}"
    model = load_model(folders[family])
    first = pd.read_parquet(runs["set0"] / "items.parquet")
    for template in TEMPLATES:
        slot = ABC.slot_of(template)
        groups = list(dict.fromkeys(first[first.template == template].group))
        to_slot = dict(zip(ABC.groups["<sgroup>"], ABC.groups[slot]))
        api = score_masked(model, ABC, template, groups=[to_slot[ABC.human_groups[g]] for g in groups], batch_size=128)
        for name, job in runs.items():
            items = pd.read_parquet(job / "items.parquet")
            assert (items["prov_prompt"] == "masked write-in").all()
            assert set(pd.read_parquet(job / "aggregates.parquet")["template"].dropna()) >= set(TEMPLATES)
            result, present = human_alignment(pair_matrix(api, ABC, name.rstrip("012")), ABC, slot)
            assert present == groups and len(groups) == 25
            np.testing.assert_allclose(items[items.template == template].kendall_tau,
                                       np.asarray(result.tau_per_group), atol=1e-6)
    # the set job rerun from the cache gives the very same tables
    for table in ("items", "aggregates"):
        a, b = (pd.read_parquet(runs[name] / f"{table}.parquet") for name in ("set0", "set2"))
        numeric = [c for c in a.columns if a[c].dtype.kind == "f"]
        assert numeric and a[numeric].to_numpy().tobytes() == b[numeric].to_numpy().tobytes()


def test_masked_job_refuses_unknown_traits_and_a_wrong_model_kind(tmp_path, folders):
    unk = jaxassoc(tmp_path, "metric=ilps", "dataset=abc", f"model.source={folders['bert-unk']}", "model.kind=masked",
                   "model.name=tiny", "hydra.run.dir=unk", "cache_dir=null", ok=False)
    assert "unknown token" in unk.stderr and "Traceback" not in unk.stderr
    kind = jaxassoc(tmp_path, "metric=ilps", "dataset=abc", f"model.source={folders['roberta']}", "model.kind=causal",
                    "model.name=tiny", "hydra.run.dir=kind", "cache_dir=null", ok=False)
    assert "set model.kind=masked" in kind.stderr
    template = jaxassoc(tmp_path, "metric=ilps", "dataset=abc", f"model.source={folders['roberta']}",
                        "model.kind=masked", "model.name=tiny", "metric.templates=['The <sgroup> is nice.']",
                        "hydra.run.dir=template", "cache_dir=null", ok=False)
    assert "The <sgroup> is nice." in template.stderr and "35 ABC templates" in template.stderr
