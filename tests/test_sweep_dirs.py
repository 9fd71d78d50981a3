"""Sweep job folders get safe, short, deterministic names (``jaxassoc.app.sweep_dirs``): a path-valued
override makes one folder, not nested ones, and rerunning the sweep lands in the same folders (resume)."""

import json
from pathlib import Path

import numpy as np
import pytest

from jaxassoc import data
from jaxassoc.app.sweep_dirs import MAX_LENGTH, safe_dirname


def test_plain_names_are_kept():
    for name in ("", "model=gpt2,seed=1", "metric.templates=[all],template=tp1", "stats.alpha=0.01,+x=a-b_c"):
        assert safe_dirname(name) == name


def test_unsafe_characters_are_replaced_and_a_hash_keeps_names_apart():
    names = [
        "model.source=/tmp/x/y",
        "model.source=_tmp_x_y-0",
        "model.source=/tmp/x/y ",
        "model.source=C:\\m",
        "metric.groups=[woman,Black person]",
        "template.text='{target} is'",
        "model.source=~/m$HOME",
    ]
    safe = [safe_dirname(n) for n in names]
    assert all("/" not in s and "\\" not in s and " " not in s and "'" not in s and "$" not in s for s in safe)
    assert safe[0].startswith("model.source=_tmp_x_y-") and len(set(safe)) == len(safe)
    assert safe == [safe_dirname(n) for n in names]  # deterministic


def test_long_names_are_cut_and_stay_distinct():
    long = ",".join(f"metric.option_{i}=value_{i}" for i in range(20))
    a, b = safe_dirname(long + "1"), safe_dirname(long + "2")
    assert len(a) == len(b) == MAX_LENGTH and a != b and a[:100] == long[:100]


def write_vectors(path: Path, seed: int) -> None:
    """A small GloVe-format file: random 8-d vectors for every word of the Caliskan et al. suite."""
    suite = data.load_weat_suite("weat_caliskan2017")
    words = sorted(
        {w.lower() for t in suite.tests for s in (t.targets_x, t.targets_y, t.attributes_a, t.attributes_b) for w in s}
    )
    rows = np.random.default_rng(seed).normal(size=(len(words), 8))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{w} {' '.join(f'{v:.6f}' for v in row)}\n" for w, row in zip(words, rows)))


@pytest.mark.slow
def test_sweep_over_path_valued_overrides_makes_one_flat_folder_per_job_and_resumes_there(tmp_path, cli):
    sources = [tmp_path / "vectors" / f"set {seed}" / "glove.txt" for seed in (0, 1)]  # nested, with a space
    for seed, source in enumerate(sources):
        write_vectors(source, seed)
    command = [
        "-m",
        "metric=weat",
        "model=glove-6b-50d",
        "model.name=tiny",
        f"model.source={','.join(map(str, sources))}",
        "stats.n_permutations=100",
        "stats.n_bootstrap=40",
        "hydra.sweep.dir=sweep",
        "cache_dir=null",
    ]
    first = cli("jaxassoc", *command, cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    jobs = sorted(p for p in (tmp_path / "sweep").iterdir() if p.is_dir())
    assert sorted(p.parent for p in (tmp_path / "sweep").rglob("results.json")) == jobs  # no nested folders
    assert len(jobs) == 2 and all(j.name.startswith("metric=weat,model.name=tiny,model.source=_") for j in jobs)
    by_source = {json.loads((j / "results.json").read_text())["provenance"]["model_source"]: j.name for j in jobs}
    assert sorted(by_source) == sorted(map(str, sources))

    second = cli("jaxassoc", *command, cwd=tmp_path)
    assert second.returncode == 0, second.stderr[-3000:]
    assert (second.stdout + second.stderr).count("skip weat") == 2  # the same folders: both jobs resumed
    assert sorted(p for p in (tmp_path / "sweep").iterdir() if p.is_dir()) == jobs
