"""Metric registration: every process registers the built-in metrics and plugins on first use (a Hydra
launcher's worker never runs ``main``), a plugin cannot take a registered name, and a plugin's ``run``
must return a JobResult."""

import importlib
import sys

import pytest
from app_helpers import PLUGINS, app_config

from jaxassoc.app import builtin_metrics, registry
from jaxassoc.app.main import run_job
from jaxassoc.app.tasks import rpam
from jaxassoc.errors import ConfigError


@pytest.fixture
def fresh_registry(monkeypatch):
    """The registry of a process that has registered nothing yet (e.g. a launcher's worker)."""
    monkeypatch.setattr(registry, "METRICS", {})
    monkeypatch.setattr(registry, "_loaded", False)
    monkeypatch.syspath_prepend(str(PLUGINS))
    monkeypatch.delenv("JAXASSOC_PLUGINS", raising=False)
    for plugin in ("toy_metric", "shadow_weat"):  # imported afresh, then the session's modules are restored
        monkeypatch.delitem(sys.modules, plugin, raising=False)
    return monkeypatch


def test_get_metric_registers_builtins_and_plugins_on_first_use(fresh_registry):
    fresh_registry.setenv("JAXASSOC_PLUGINS", "toy_metric")
    assert registry.get_metric("rpam").run is rpam.run
    assert registry.get_metric("toy").name == "toy"


def test_plugin_cannot_replace_a_builtin_metric(fresh_registry):
    fresh_registry.setenv("JAXASSOC_PLUGINS", "shadow_weat")
    with pytest.raises(
        ConfigError,
        match=r"JAXASSOC_PLUGINS names 'shadow_weat': metric 'weat' is already "
        r"registered by jaxassoc\.app\.tasks\.weat; shadow_weat cannot replace it",
    ):
        registry.load_metrics()
    assert registry.METRICS["weat"].run.__module__ == "jaxassoc.app.tasks.weat"


def test_registering_the_same_metric_again_is_allowed(fresh_registry):
    builtin_metrics.register_all()
    builtin_metrics.register_all()  # e.g. the app and a test both register them
    toy = importlib.import_module("toy_metric")
    importlib.reload(toy)  # a researcher reloading their plugin module
    assert registry.METRICS["toy"].run is toy.run_toy


def test_plugin_run_returning_a_dict_is_a_config_error(tmp_path):
    with app_config("dict_metric") as compose:
        cfg = compose("metric=dict_result", "model=glove-6b-50d", "cache_dir=null")
    with pytest.raises(
        ConfigError,
        match=r"metric 'dict_result': dict_metric\.run_dict returned a dict, "
        r"not a JobResult",
    ):
        run_job(cfg, tmp_path / "job")
    assert not (tmp_path / "job" / "results.json").exists()
