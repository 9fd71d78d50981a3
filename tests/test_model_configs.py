"""``conf/model``: every config composes against the model schema and names itself and a source that loads (an
embedded model, a hub id, or a vector file for static models); every model of the four seed papers and one
current model per family have a config; ``experiments/unstereo_eval/models.csv`` runs all 28 of its models as
configs that load the checkpoint it names, whose architecture (the HF ``model_type``) a family registers."""

import csv
import re
from pathlib import Path

import pytest
from app_helpers import app_config
from omegaconf import OmegaConf

from jaxassoc.app.config import ModelConfig
from jaxassoc.models.family import registry
from jaxassoc.resources import EMBEDDED

REPO = Path(__file__).resolve().parents[1]
CONF = REPO / "conf" / "model"
CONFIGS = sorted(p.stem for p in CONF.glob("*.yaml"))
MODELS_CSV = REPO / "experiments" / "unstereo_eval" / "models.csv"
ROWS = list(csv.DictReader(MODELS_CSV.open(encoding="utf-8")))
HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")
RUNNABLE = re.compile(r"yes \(model=([\w.-]+)\)")

SEED_MODELS = {  # the config of every model each seed paper evaluates
    "rpam": ["gpt2", "gpt2-large", "gpt-neo-125m", "mistral-7b-v0.1", "mistral-7b-instruct-v0.2", "t5-v1.1-small"],
    "zca_weat": [
        "glove-6b-100d",
        "word2vec-googlenews",
        "bert-base-cased",
        "roberta-base",
        "gpt2",
        "unsup-simcse-bert-base-uncased",
        "unsup-simcse-roberta-base",
    ],
    "set_cao2022": ["bert-large-cased", "roberta-large"],
    "unstereo_eval": [m.group(1) for r in ROWS if (m := RUNNABLE.fullmatch(r["runnable_in_jaxassoc"]))],
}
CURRENT_MODELS = {  # one current model per family: config -> the HF model_type of its checkpoint
    "llama-3.2-1b": "llama",
    "qwen2.5-0.5b": "qwen2",
    "qwen3-0.6b": "qwen3",
    "gemma-2-2b": "gemma2",
    "gemma-3-1b-pt": "gemma3_text",
    "phi-3-mini-4k-instruct": "phi3",
    "mixtral-8x7b-v0.1": "mixtral",
    "olmo-1b-hf": "olmo",
    "pythia-70m": "gpt_neox",
    "opt-125m": "opt",
    "gpt-j-6b": "gptj",
    "gpt-neo-125m": "gpt_neo",
    "mpt-7b": "mpt",
}


def _yaml(name: str) -> dict:
    return OmegaConf.to_container(OmegaConf.load(CONF / f"{name}.yaml"))


@pytest.fixture(scope="module")
def composed() -> dict[str, ModelConfig]:
    """Every config composed through the app (``model=<name>``) and built as its schema dataclass."""
    with app_config() as compose:
        return {name: OmegaConf.to_object(compose(f"model={name}").model) for name in CONFIGS}


@pytest.mark.slow  # composes every model config: ~10 s (issue 38: the default suite's budget)
def test_every_config_composes_and_names_itself(composed):
    for name, model in composed.items():
        assert isinstance(model, ModelConfig), name
        assert model.name == name, f"conf/model/{name}.yaml: name {model.name!r} is not the file's name"


@pytest.mark.slow  # shares the composed configs (issue 38: the default suite's budget)
def test_every_config_names_a_source_that_loads(composed):
    """A hub id (owner/name), an embedded model, or for static vectors a .txt/.bin file."""
    for name, model in composed.items():
        static_file = model.kind == "static" and Path(model.source).suffix in (".txt", ".bin")
        assert model.source in EMBEDDED or HUB_ID.fullmatch(model.source) or static_file, (name, model.source)


def test_every_config_starts_with_a_comment_saying_what_it_is():
    for name in CONFIGS:
        assert (CONF / f"{name}.yaml").read_text(encoding="utf-8").startswith("# "), name


@pytest.mark.parametrize("paper", sorted(SEED_MODELS))
def test_every_seed_papers_model_has_a_config(paper):
    missing = [name for name in SEED_MODELS[paper] if name not in CONFIGS]
    assert SEED_MODELS[paper] and not missing, f"{paper}: no conf/model/<name>.yaml for {missing}"


def test_models_csv_runs_all_28_paper_models_as_configs():
    assert len(ROWS) == 28 and len({r["model"] for r in ROWS}) == 28
    runnable = {r["model"]: r["runnable_in_jaxassoc"] for r in ROWS}
    assert not {m: v for m, v in runnable.items() if not RUNNABLE.fullmatch(v)}
    assert len(set(SEED_MODELS["unstereo_eval"])) == 28
    assert set(SEED_MODELS["unstereo_eval"]) <= set(CONFIGS)


def test_models_csv_lists_the_models_of_the_papers_shipped_results():
    """The 28 models of the authors' per-row Winogender results (tests/fixtures), under their hub ids there
    (``org__name``; the Llama-2 rows name local copies, matched by size)."""
    import pandas as pd

    results = REPO / "tests" / "fixtures" / "unstereo_eval" / "results" / "Winogender-no-maxpmi-constraint.csv.gz"
    shipped = pd.read_csv(results, usecols=["model", "orig_model_name"]).drop_duplicates()
    assert sorted(shipped["model"]) == sorted(r["model"] for r in ROWS)
    hub = {r["model"]: r["hub_id"] for r in ROWS}
    for model, orig in zip(shipped["model"], shipped["orig_model_name"]):
        expected = hub[model].replace("/", "__")
        local_llama = model.startswith("llama-2") and model.removeprefix("llama-2-").upper() in orig.upper()
        assert orig == expected or local_llama, (model, orig)


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r["model"])
def test_models_csv_config_loads_the_checkpoint_it_names(row):
    """The config's source is the csv's ``loads``: the paper's hub id, or a conversion the note explains."""
    config = _yaml(RUNNABLE.fullmatch(row["runnable_in_jaxassoc"]).group(1))
    assert config["source"] == row["loads"] and config["kind"] == "causal"
    assert row["loads"] == row["hub_id"] or row["note"], f"{row['model']}: loads another checkpoint without a note"


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r["model"])
def test_models_csv_architecture_is_a_registered_family(row):
    """The ``architecture`` column is the HF ``model_type`` of the checkpoint the config loads."""
    assert row["architecture"] in registry(), row


@pytest.mark.parametrize("name", sorted(CURRENT_MODELS))
def test_current_models_have_configs_of_registered_families(name):
    assert name in CONFIGS
    assert CURRENT_MODELS[name] in registry()
