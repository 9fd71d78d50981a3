"""Metric registration: every process registers the built-in metrics and plugins on first use (a Hydra
launcher's worker never runs ``main``), a plugin cannot take a registered name, and a plugin's ``run``
must return a JobResult."""

import importlib
import sys

import pytest
from app_helpers import PLUGINS, app_config

from jaxassoc.app import registry
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
    for _ in range(2):  # e.g. the app and a test both register them
        for name in registry.BUILTIN:
            registry.register(registry.get_metric(name))
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


def test_a_plugin_metrics_spec_alone_gives_its_report_section(tmp_path):
    """Title, compact table, forest plot and heatmap from its effect columns, and its own figure: nothing in
    jaxassoc names the metric."""
    from jaxassoc.app import report

    sweep = tmp_path / "sweep"
    with app_config("spec_metric") as compose:
        for seed in (0, 1):
            run_job(
                compose("metric=spec_toy", "model=glove-6b-50d", "cache_dir=null", f"seed={seed}"), sweep / str(seed)
            )
    report.write_report(sweep, rank=True)
    text = (sweep / "report" / "report.md").read_text()
    assert "## Toy effect sizes (a plugin) (`metric=spec_toy`)" in text
    assert "### Toy effects per test" in text and "| seed |" in text
    for stem in ("forest", "effect_sizes", "spread"):
        assert (sweep / "report" / f"{stem}_spec_toy.png").stat().st_size > 0, stem
    assert not (sweep / "report" / "raw_vs_whitened_spec_toy.png").exists()


def test_asking_for_one_builtin_metric_imports_its_task_module_only():
    import subprocess
    import sys

    script = (
        "import sys; from jaxassoc.app.registry import get_metric; get_metric('crows_pairs'); "
        "print(sorted(m for m in sys.modules if m.startswith('jaxassoc.app.tasks.')))"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['jaxassoc.app.tasks.crows_pairs']"
