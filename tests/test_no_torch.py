"""The library runs without torch: torch is only the reference in tests and benchmarks."""

import subprocess
import sys

SCRIPT = r"""
import sys
sys.modules["torch"] = None  # any `import torch` now raises ImportError
import jax.numpy as jnp
import jaxassoc.app.main, jaxassoc.app.builtin_metrics, jaxassoc.metrics, jaxassoc.embeddings, jaxassoc.stats
jaxassoc.app.builtin_metrics.register_all()
from jaxassoc.models import load_model
for name in ("minilm-l6", "smollm2-135m"):
    model = load_model(name)
    ids = model.tokenizer("The nurse said that", add_special_tokens=False)["input_ids"]
    out = model.forward(model.params["body"], jnp.asarray([ids]), jnp.ones((1, len(ids)), jnp.int32))
    assert out.hidden.shape[:2] == (1, len(ids)), out.hidden.shape
print("ok without torch")
"""


def test_library_loads_and_runs_both_embedded_models_without_torch():
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "ok without torch" in proc.stdout
