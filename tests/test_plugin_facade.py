"""The public plugin facade: a job gives its model, dataset and provenance (``jaxassoc.plugin``), the
plugins and examples import nothing from the app's internals, and ``Job`` is typed."""

import ast
import dataclasses
import typing
from pathlib import Path

import jax
import pytest
from app_helpers import compose_config, start_hydra, use_tiny_suite, write_tiny_glove

import jaxassoc.plugin as plugin
from jaxassoc.app.main import make_job
from jaxassoc.embeddings.static import StaticEmbeddings

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module", autouse=True)
def hydra():
    yield from start_hydra()


def app_imports(path: Path) -> list[str]:
    """The ``jaxassoc.app`` modules a file imports."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        found += [n for n in names if n == "jaxassoc.app" or n.startswith("jaxassoc.app.")]
    return found


@pytest.mark.parametrize(
    "path", sorted((ROOT / "tests" / "plugins").glob("*.py")) + [ROOT / "examples" / "rpam_logratio.py"], ids=str
)
def test_plugins_import_no_app_internals(path):
    assert app_imports(path) == [], f"{path.name} imports the app's internals; use jaxassoc.plugin"


def test_every_facade_name_exists_and_is_documented():
    assert plugin.__doc__ and "register_metric" in plugin.__doc__
    for name in plugin.__all__:
        assert getattr(plugin, name).__doc__, name


def test_job_is_typed():
    hints = typing.get_type_hints(plugin.Job, include_extras=True, localns={"Mesh": jax.sharding.Mesh})
    untyped = [f.name for f in dataclasses.fields(plugin.Job) if hints[f.name] is typing.Any]
    assert untyped == []
    assert hints["model"] is plugin.ModelConfig and hints["stats"] is plugin.StatsConfig


def test_a_job_gives_its_model_dataset_provenance_and_key(tmp_path, monkeypatch):
    use_tiny_suite(monkeypatch)
    glove = write_tiny_glove(tmp_path / "tiny.txt")
    cfg = compose_config(["metric=weat", "model=glove-6b-50d", f"model.source={glove}", "model.name=tiny"])
    job = make_job(cfg, tmp_path)
    vectors = job.static_embeddings()
    assert isinstance(vectors, StaticEmbeddings)
    suite = job.weat_suite()
    assert [t.id for t in suite.tests] == ["W1", "W2"]
    provenance = job.provenance(vectors)
    assert provenance["dataset_version"] and len(provenance["model_weights_sha256"]) == 64
    assert jax.random.key_data(job.key()).tolist() == jax.random.key_data(jax.random.key(0)).tolist()
    assert job.provenance() == {"dataset_version": provenance["dataset_version"]}  # no model: the data's only
