"""Config-level checks: every shipped config composes against its schema, and the launchers resolve."""

import pytest
from app_helpers import start_hydra
from hydra import compose
from omegaconf import OmegaConf

from jaxassoc.app.main import CONF_DIR, _model_identity, release_points
from jaxassoc.app.registry import METRICS


@pytest.fixture(scope="module", autouse=True)
def hydra_context():
    yield from start_hydra()


@pytest.mark.parametrize(
    "group",
    [pytest.param("model", marks=pytest.mark.slow), "metric", "dataset", "template", "whitening", "stats", "mesh"],
)  # model: every model config, ~9 s (issue 38: the default suite's budget)
def test_every_option_of_every_group_composes(group):
    options = sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))
    assert options
    for option in options:
        cfg = compose(config_name="config", overrides=[f"{group}={option}"])
        assert OmegaConf.to_container(cfg[group], resolve=True)  # schema-checked, fully resolved


def test_joblib_launcher_runs_jobs_in_processes():
    cfg = compose(config_name="config", overrides=["hydra/launcher=local_parallel"], return_hydra_config=True)
    assert cfg.hydra.launcher._target_.endswith("JoblibLauncher")
    assert cfg.hydra.launcher.prefer == "processes"
    assert cfg.hydra.job.env_set.XLA_PYTHON_CLIENT_PREALLOCATE == "false"


def test_slurm_launcher_resolves_through_submitit():
    cfg = compose(
        config_name="config",
        overrides=["hydra/launcher=slurm", "hydra.launcher.partition=gpu"],
        return_hydra_config=True,
    )
    assert cfg.hydra.launcher._target_.endswith("SlurmLauncher")
    assert cfg.hydra.launcher.partition == "gpu" and cfg.hydra.launcher.gpus_per_node == 1
    assert "XLA_PYTHON_CLIENT_PREALLOCATE=false" in " ".join(cfg.hydra.launcher.setup)


def test_distributed_switch_defaults_off():
    assert compose(config_name="config").distributed is False
    assert compose(config_name="config", overrides=["distributed=true"]).distributed is True


def test_audit_parts_name_known_metrics():
    cfg = compose(config_name="config")
    for part in cfg.audit.parts:
        part_cfg = compose(config_name="config", overrides=list(part.overrides))
        assert part_cfg.metric.name in METRICS, part.name


def test_audit_releases_a_model_after_its_last_part_and_never_reloads_one():
    assert release_points(["a", "a", "b", "a", "c"]) == [False, False, False, True, True]
    assert release_points(["a", "b", "c"]) == [True, True, True]
    assert release_points([]) == []
    cfg = compose(config_name="config")
    models = [_model_identity(compose(config_name="config", overrides=list(p.overrides))) for p in cfg.audit.parts]
    releases = release_points(models)
    assert releases[-1] and sum(releases) == len(set(models))  # the default audit loads each model once
