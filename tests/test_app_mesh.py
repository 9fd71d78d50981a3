"""The mesh config group (conf/mesh, MeshConfig): bad sizes and dtypes refused before any model loads,
``model.shard=true`` as an alias of ``mesh=data``, and a CLI run (in process) on a 2×4 fsdp×tp mesh of the 8
simulated devices giving the single-device effect sizes."""

from pathlib import Path

import jax
import numpy as np
import pandas as pd
import pytest
from app_helpers import compose_config, start_hydra

from jaxassoc.app.main import make_job
from jaxassoc.errors import ConfigError

RPAM = ["metric=rpam", "dataset=weat_ws", "template=tp1"]


@pytest.fixture(scope="module", autouse=True)
def hydra_context():
    yield from start_hydra()


@pytest.mark.parametrize(
    "overrides, match",
    [
        (
            ["mesh=fsdp_tp", "mesh.fsdp=3", "mesh.tp=3"],  # 9: neither 1 device nor the 8 simulated ones
            rf"mesh sizes mesh.data=1, mesh.fsdp=3, mesh.tp=3 multiply to 9 devices but there are "
            rf"{len(jax.devices())} devices",
        ),
        (["mesh=fsdp_tp", "mesh.tp=0"], r"mesh.tp=0: a mesh size is a positive integer"),
        (["model.precision=int8"], r"model.precision=int8 is not a precision policy"),
        (
            ["model=glove-6b-50d", "metric=weat", "model.precision=bfloat16"],
            r"model.precision=bfloat16 has no effect on static word vectors",
        ),
        (
            ["model.precision=mixed", "model.dtype=bfloat16"],
            r"model.dtype=bfloat16 was replaced by model.precision \(with model.precision=mixed\)",
        ),
        (
            ["mesh=fsdp_tp", "model.shard=true"],
            r"model.shard=true is an alias of mesh=data and conflicts with "
            r"mesh=fsdp_tp",
        ),
    ],
)
def test_bad_mesh_or_dtype_is_refused_before_the_model_loads(no_model, tmp_path, overrides, match):
    with pytest.raises(ConfigError, match=match):
        make_job(compose_config([*RPAM, *overrides]), Path(tmp_path))


def test_model_shard_is_an_alias_of_the_data_mesh(tmp_path):
    shard, data = (make_job(compose_config([*RPAM, *o]), Path(tmp_path)) for o in (["model.shard=true"], ["mesh=data"]))
    assert shard.mesh == data.mesh  # None on one device: a 1-device data mesh is no mesh
    assert make_job(compose_config(RPAM), Path(tmp_path)).mesh is None


@pytest.mark.slow  # two CLI runs on 8 simulated devices: ~40 s on 2 cores
def test_cli_rpam_on_a_2x4_fsdp_tp_mesh_gives_the_single_device_effect_sizes(tmp_path, tiny_checkpoint, cli):
    assert len(jax.devices()) == 8  # the 8 simulated CPU devices of tests/conftest.py
    runs = {}
    for name, extra in (("single", []), ("mesh", ["mesh=fsdp_tp", "mesh.fsdp=2", "mesh.tp=4"])):
        # a private copy per run: the process's model cache misses, so each run loads (and logs) the model
        folder = tiny_checkpoint("llama", into=tmp_path / f"model-{name}")  # 2 KV heads over tp=4: replicated, logged
        proc = cli(
            "jaxassoc",
            *RPAM,
            "model.name=tiny",
            f"model.source={folder}",
            "model.batch_size=4",
            "cache_dir=null",
            *extra,
            f"hydra.run.dir={name}",
            cwd=tmp_path,
            env={"HYDRA_FULL_ERROR": "0"},
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        runs[name] = proc.stdout + proc.stderr
    assert "mesh data=1xfsdp=2xtp=4" in runs["mesh"]
    assert runs["mesh"].count("replicated along a mesh axis") == 1 and "body/layers/attn/k/w" in runs["mesh"]
    one, many = (pd.read_parquet(tmp_path / d / "items.parquet") for d in ("single", "mesh"))
    # the tiny random model's scores are ~1e-6 (near-uniform probabilities): float32 sums taken in another
    # order move them by ~1e-10, which the effect sizes (differences over a tiny spread) magnify to ~1e-4
    np.testing.assert_allclose(many["score"], one["score"], rtol=1e-5, atol=1e-9)
    one, many = (pd.read_parquet(tmp_path / d / "aggregates.parquet") for d in ("single", "mesh"))
    assert one["effect_size"].notna().sum() >= 8
    np.testing.assert_allclose(many["effect_size"], one["effect_size"], atol=1e-3)
