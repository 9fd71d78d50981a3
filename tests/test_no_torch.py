"""The library runs without torch: torch is only the reference in tests and benchmarks."""

import subprocess
import sys

import pytest

pytestmark = pytest.mark.process  # an interpreter that never imported torch

SCRIPT = r"""
import sys
sys.modules["torch"] = None  # any `import torch` now raises ImportError
import jax.numpy as jnp
import jaxassoc.app.main, jaxassoc.app.registry, jaxassoc.metrics, jaxassoc.embeddings, jaxassoc.stats
jaxassoc.app.registry.load_metrics()
from jaxassoc.models import load_model
for name in ("minilm-l6", "smollm2-135m"):
    model = load_model(name)
    ids = model.tokenizer("The nurse said that", add_special_tokens=False)["input_ids"]
    out = model.forward(model.params["body"], jnp.asarray([ids]), jnp.ones((1, len(ids)), jnp.int32))
    assert out.hidden.shape[:2] == (1, len(ids)), out.hidden.shape
print("ok without torch")
"""


@pytest.mark.slow  # both embedded models in a fresh interpreter: ~8 s (issue 38: the default suite's budget)
def test_library_loads_and_runs_both_embedded_models_without_torch():
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "ok without torch" in proc.stdout


CLI_SCRIPT = r"""
import runpy, sys
sys.modules["torch"] = None  # any `import torch` now raises ImportError
sys.argv = ["jaxassoc", "--cfg", "job", "metric=weat", "model=glove-6b-50d"]
runpy.run_module("jaxassoc", run_name="__main__")  # the CLI: imports the app, the models and transformers
import transformers
transformers.logging.get_logger("transformers").warning("another transformers notice")
"""


def test_cli_without_torch_prints_no_torch_not_found_banner(tmp_path):
    proc = subprocess.run([sys.executable, "-c", CLI_SCRIPT], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "metric:" in proc.stdout  # the CLI ran (it printed the job's config)
    assert "PyTorch was not found" not in proc.stderr
    assert "another transformers notice" in proc.stderr  # only that notice is silenced
