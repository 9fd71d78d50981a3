"""An encoder-decoder model (T5) in the app: ``metric=rpam`` runs it end to end from the CLI; every other
metric, and a T5 checkpoint declared with another kind, is refused by name before anything is scored."""

import numpy as np
import pandas as pd
import pytest
from app_helpers import compose_config, start_hydra
from family_specs.t5 import V11

from jaxassoc.app import model_loading
from jaxassoc.app.config import ModelConfig
from jaxassoc.app.main import make_job
from jaxassoc.app.registry import get_metric
from jaxassoc.errors import ConfigError
from jaxassoc.models import load_model
from jaxassoc.readouts.rpam_prompts import PromptTemplate
from jaxassoc.suites import rpam as rpam_suite


@pytest.fixture(scope="module")
def folder(tiny_checkpoint):
    return tiny_checkpoint(V11)


@pytest.fixture
def hydra_context():
    yield from start_hydra()


def test_cli_rpam_on_a_t5_checkpoint(tmp_path, folder, cli):
    proc = cli(
        "jaxassoc",
        "metric=rpam",
        "model=t5-v1.1-small",
        "model.name=tiny-t5",
        f"model.source={folder}",
        "template=tp1",
        "dataset=bellezza",
        "dataset.sample=5",
        "cache_dir=null",
        "quiet=true",
        "hydra.run.dir=out",
        cwd=tmp_path,
        env={"HYDRA_FULL_ERROR": "0"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    items = pd.read_parquet(tmp_path / "out" / "items.parquet")
    assert len(items) == 5 and np.isfinite(items["score"]).all()
    # the job's valence scores are the library's RPAM Valence from the encoder-decoder readout
    template = PromptTemplate("tp1", "These words are associated: {target} and")
    expected, _ = rpam_suite._valence(load_model(folder), list(items["word"]), template, normalise=True)
    np.testing.assert_allclose(items["score"].to_numpy(), expected, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("metric", ["weat", "ceat", "ilps", "ilps_star", "set", "unstereo", "intersectional"])
def test_other_metrics_refuse_a_seq2seq_model_by_name(hydra_context, no_model, tmp_path, metric):
    cfg = compose_config([f"metric={metric}", "model=t5-v1.1-small"])
    with pytest.raises(
        ConfigError,
        match=rf"metric '{metric}' cannot score model 't5-v1.1-small' of kind "
        r"'seq2seq'.*encoder-decoder model.*metrics that read one: \['rpam'\]",
    ):
        make_job(cfg, tmp_path)


def test_rpam_downstream_refuses_a_seq2seq_model(hydra_context, no_model, tmp_path):
    cfg = compose_config(
        ["metric=rpam", "model=t5-v1.1-small", "template=tp1", "dataset=bellezza", "metric.downstream=true"]
    )
    with pytest.raises(ConfigError, match="metric.downstream=true.*'t5-v1.1-small' is an encoder-decoder"):
        get_metric("rpam").run(make_job(cfg, tmp_path))


def test_a_t5_checkpoint_declared_causal_is_refused(folder):
    model_loading._load_language_model.cache_clear()
    with pytest.raises(
        ConfigError,
        match="'tiny-t5' is an encoder-decoder \\(t5\\) model but model.kind=causal: set model.kind=seq2seq",
    ):
        model_loading.language_model(ModelConfig(name="tiny-t5", source=str(folder), kind="causal"))


def test_a_causal_checkpoint_declared_seq2seq_is_refused(tiny_checkpoint):
    gpt2 = tiny_checkpoint("gpt2")
    model_loading._load_language_model.cache_clear()
    with pytest.raises(
        ConfigError, match="'tiny' is a causal model \\(gpt2\\) but model.kind=seq2seq: set model.kind=causal"
    ):
        model_loading.language_model(ModelConfig(name="tiny", source=str(gpt2), kind="seq2seq"))
