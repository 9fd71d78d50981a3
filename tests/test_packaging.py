"""jaxassoc as an installed wheel: the configs (``conf/`` as ``jaxassoc.conf``) and the embedded data ship
inside it, ``jaxassoc`` runs from any folder, and a user's own Hydra app composes jaxassoc's config groups
through ``pkg://jaxassoc.conf``.

The wheel is built offline with the venv's setuptools (``pip wheel --no-build-isolation``) from a copy of
the source tree and installed with ``pip install --no-deps --target``; its dependencies come from the venv.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra

from jaxassoc.app import main

REPO = Path(__file__).resolve().parents[1]
PLUGINS = Path(__file__).parent / "plugins"

USER_APP_CONFIG = """\
defaults:
  - model: glove-6b-50d
  - metric: weat
  - _self_
hydra:
  searchpath:
    - pkg://jaxassoc.conf
greeting: mine
"""

USER_APP = """\
import hydra
from jaxassoc.app.main import register

@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def app(cfg):
    print("composed", cfg.greeting, cfg.model.name, cfg.model.kind, cfg.metric.name)

if __name__ == "__main__":
    register()  # the config schemas of jaxassoc's groups (metric/weat_schema, ...)
    app()
"""


def write_user_app(folder: Path) -> Path:
    """A user's Hydra app whose own config names jaxassoc's groups through ``pkg://jaxassoc.conf``."""
    (folder / "conf").mkdir(parents=True)
    (folder / "conf" / "config.yaml").write_text(USER_APP_CONFIG)
    (folder / "my_app.py").write_text(USER_APP)
    return folder / "my_app.py"


def test_a_users_hydra_app_composes_jaxassocs_groups(tmp_path):
    write_user_app(tmp_path)
    main.register()
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(tmp_path / "conf"), version_base="1.3"):
            cfg = compose(config_name="config")
            other = compose(config_name="config", overrides=["model=smollm2-135m", "metric=rpam"])
    finally:
        GlobalHydra.instance().clear()
    assert (cfg.greeting, cfg.model.name, cfg.model.kind, cfg.metric.name) == ("mine", "glove-6b-50d", "static", "weat")
    assert cfg.metric.max_oov_share == 0.2  # jaxassoc's conf/metric/weat.yaml, over its schema
    assert (other.model.name, other.metric.name) == ("smollm2-135m", "rpam")


def test_the_configs_are_the_package_jaxassoc_conf():
    import jaxassoc.conf

    assert Path(jaxassoc.conf.__file__).parent == main.CONF_DIR
    assert (main.CONF_DIR / "config.yaml").is_file() and (main.CONF_DIR / "metric" / "weat.yaml").is_file()


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The wheel built from a copy of the source tree, installed into a fresh folder (``site``)."""
    root = tmp_path_factory.mktemp("wheel")
    source = root / "source"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("jaxassoc", "conf"):
        shutil.copytree(REPO / name, source / name, ignore=ignore)
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy(REPO / name, source / name)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run(
        [*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(root / "dist"), str(source)],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    (wheel,) = (root / "dist").glob("jaxassoc-*.whl")
    subprocess.run(
        [*pip, "install", "--no-deps", "--target", str(root / "site"), str(wheel)],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return root


def in_wheel_env(installed: Path, **extra: str) -> dict[str, str]:
    """The environment of a user of the installed wheel: only ``site`` (no source tree) on PYTHONPATH."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(installed / "site"), *extra.values()])}


def run_installed(installed: Path, cwd: Path, *args: str, env: dict[str, str] | None = None):
    cwd.mkdir(parents=True, exist_ok=True)
    return subprocess.run(
        [*args], cwd=cwd, env=env or in_wheel_env(installed), capture_output=True, text=True, timeout=600
    )


@pytest.mark.process  # builds and installs the wheel with pip
def test_the_wheel_holds_the_configs_and_the_embedded_data(installed):
    (wheel,) = (installed / "dist").glob("jaxassoc-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    configs = {f"jaxassoc/conf/{p.relative_to(REPO / 'conf').as_posix()}" for p in (REPO / "conf").rglob("*.yaml")}
    data = {p.relative_to(REPO).as_posix() for p in (REPO / "jaxassoc" / "data" / "files").rglob("*") if p.is_file()}
    assert {"jaxassoc/conf/__init__.py", "jaxassoc/conf/config.yaml"} <= names
    assert "jaxassoc/py.typed" in names  # PEP 561: type checkers read jaxassoc's annotations
    assert configs - names == set()
    assert data and data - names == set()


@pytest.mark.process  # the installed wheel's console script, run from another folder
def test_the_installed_wheel_runs_a_job_from_another_folder(installed):
    probe = run_installed(
        installed,
        installed / "elsewhere",
        sys.executable,
        "-c",
        "import jaxassoc, jaxassoc.conf; print(jaxassoc.__file__); print(jaxassoc.conf.__file__)",
    )
    assert probe.returncode == 0, probe.stderr
    site = str((installed / "site").resolve())
    assert all(line.startswith(site) for line in probe.stdout.split()), probe.stdout  # not the source tree
    env = in_wheel_env(installed, plugins=str(PLUGINS))
    env["JAXASSOC_PLUGINS"] = "toy_metric"
    proc = run_installed(
        installed,
        installed / "elsewhere",
        str(installed / "site" / "bin" / "jaxassoc"),
        "metric=toy",
        "model=glove-6b-50d",
        "hydra.run.dir=out",
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    assert "config folder" not in proc.stderr
    results = json.loads((installed / "elsewhere" / "out" / "results.json").read_text())
    assert results  # the job's result record
    assert (installed / "elsewhere" / "out" / "aggregates.parquet").is_file()


@pytest.mark.process  # the installed wheel's console script
def test_the_installed_wheel_has_the_cache_command(installed, tmp_path):
    env = {**in_wheel_env(installed), "JAXASSOC_CACHE": str(tmp_path)}
    proc = run_installed(
        installed, installed / "elsewhere", str(installed / "site" / "bin" / "jaxassoc-cache"), "list", env=env
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [f"cache: {tmp_path}", "total: 0 entries, 0 B"]


@pytest.mark.process  # a user's app on the installed wheel alone (no source tree on sys.path)
def test_a_users_hydra_app_composes_the_installed_wheels_groups(installed):
    script = write_user_app(installed / "user")
    proc = run_installed(installed, installed / "user", sys.executable, str(script), "metric=rpam")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["composed", "mine", "glove-6b-50d", "static", "rpam"]


@pytest.mark.slow
@pytest.mark.process  # the installed wheel's console script
def test_the_installed_wheel_runs_weat_on_the_embedded_glove(installed):
    proc = run_installed(
        installed,
        installed / "weat",
        str(installed / "site" / "bin" / "jaxassoc"),
        "model=glove-6b-50d",
        "metric=weat",
        "stats.n_permutations=100",
        "stats.n_bootstrap=40",
        "hydra.run.dir=out",
    )
    assert proc.returncode == 0, proc.stderr
    out = installed / "weat" / "out"
    assert (out / "results.json").is_file() and (out / "aggregates.parquet").is_file()
    import pandas as pd

    aggregates = pd.read_parquet(out / "aggregates.parquet")
    assert len(aggregates) == 10  # W1..W10 of the embedded Caliskan et al. suite
