"""``jaxassoc --help`` is jaxassoc's own: the metrics, datasets and models read from the configs (no Hydra
schemas), the options, sweeps and examples, printed without importing JAX, Flax or the models."""

import dataclasses
import json
import subprocess
import sys

import pytest

from jaxassoc.app import cli as cli_module
from jaxassoc.app.config import AppConfig
from jaxassoc.app.main import CONF_DIR


def test_help_lists_every_metric_dataset_and_model_and_no_schema(cli, tmp_path):
    proc = cli("jaxassoc", "--help", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    assert text.startswith("usage: jaxassoc")
    for group in ("metric", "dataset", "model", "template", "whitening", "mesh"):
        for path in (CONF_DIR / group).glob("*.yaml"):
            assert path.stem in text, f"{group}={path.stem} missing from --help"
    assert "_schema" not in text and "powered by Hydra" not in text
    assert "WEAT and ZCA-whitened WEAT" in text  # a metric's description, from its YAML's leading comment
    assert "Examples:" in text and "jaxassoc -m" in text and "jaxassoc[launchers]" in text
    assert not (tmp_path / "outputs").exists()
    assert cli("jaxassoc", "-h", cwd=tmp_path).stdout == text
    assert cli("jaxassoc", "metric=weat", "--help", cwd=tmp_path).stdout == text


def test_every_top_level_option_has_a_help_line():
    groups = set(cli_module.GROUPS)
    assert set(cli_module.OPTIONS) == {f.name for f in dataclasses.fields(AppConfig)} - groups


def test_help_names_the_plugin_modules_it_does_not_import(cli, tmp_path):
    proc = cli("jaxassoc", "--help", cwd=tmp_path, env={"JAXASSOC_PLUGINS": "my_metrics,other"})
    assert proc.returncode == 0 and "my_metrics, other" in proc.stdout


def test_descriptions_keep_whole_sentences():
    text = "RPAM (Hodel 2026, et al. 2024). The dataset chooses the task. " + "More words here. " * 20
    assert cli_module.first_sentences(text, 70) == "RPAM (Hodel 2026, et al. 2024). The dataset chooses the task."


HELP_IMPORTS = r"""
import sys
sys.argv = ["jaxassoc", "--help"]
from jaxassoc.app.main import main
main()
heavy = ("jax", "jaxlib", "flax", "optax", "torch", "transformers", "pandas", "matplotlib", "hydra", "jaxassoc.models")
print("IMPORTED", __import__("json").dumps(sorted(m for m in sys.modules if m.split(".")[0] in heavy or m == "jaxassoc.models")))
"""


@pytest.mark.process  # a fresh interpreter: this test process has imported JAX long ago
def test_help_imports_neither_jax_nor_flax_nor_the_models(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-c", HELP_IMPORTS], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Metrics (metric=NAME):" in proc.stdout
    imported = json.loads(proc.stdout.split("IMPORTED ", 1)[1])
    assert imported == [], f"--help imported {imported}"
