"""In-process app runs on tiny inputs: a two-test WEAT suite, tiny GloVe-like vectors, a tiny corpus, and
Hydra composition of the real ``conf/`` with ``make_job`` (validation) and the metric's ``run``;
``app_config`` composes the app's root config with test plugins registered (for tests that call ``run_job``
directly), and ``use_plugins`` readies plugins for an in-process CLI run (the ``cli`` fixture).

``tiny_suite`` replaces the packaged WEAT suites (monkeypatch ``jaxassoc.data.load_weat_suite``) so a job
scores two small tests in seconds; the ``weat_ws`` suite's ids are C7/C8, so RPAM's role swap applies.
"""

from __future__ import annotations

import contextlib
import importlib
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import DictConfig

from jaxassoc import data
from jaxassoc.app import main, registry
from jaxassoc.app.config import register_configs
from jaxassoc.app.main import CONF_DIR, make_job
from jaxassoc.app.registry import METRICS, get_metric
from jaxassoc.data.weat import WeatSuite, WeatTest

PLUGINS = Path(__file__).parent / "plugins"
"""The test plugins (metric modules registered from outside jaxassoc)."""

FLOWERS = ("rose", "tulip", "daisy", "lily", "zinnia")  # zinnia: no vector in the tiny GloVe (an OOV word)
INSECTS = ("ant", "spider", "moth", "wasp")
PLEASANT = ("love", "peace", "joy")
UNPLEASANT = ("war", "pain", "agony")
JOBS = ("doctor", "engineer", "teacher")
ARTS = ("music", "poetry", "dance")
MALE = ("he", "man", "his")
FEMALE = ("she", "woman", "her")
OOV = ("zinnia",)

CORPUS = [
    "The rose in the garden smells sweet and looks pleasant to everyone here .",
    "A tulip is a flower that grows in the spring in many gardens .",
    "She picked a daisy and a lily from the old garden this morning .",
    "The ant carried a crumb of bread across the kitchen floor today .",
    "There was a spider near the sink and it looked unpleasant to him .",
    "A moth flew around the lamp while the wasp stayed near the window .",
    "Love and peace and joy are words that many people find pleasant .",
    "The war caused much pain and agony for the people of the town .",
    "The doctor and the engineer met the teacher at the music school .",
    "He said that his poetry was as good as her dance in the show .",
    "The man and the woman listened to music and read poetry together .",
    "She gave him a rose and a tulip for his birthday party last week .",
    "The ant and the spider lived together under the old grey rock .",
    "His love of music made the teacher smile during the long war years .",
    "Then he said that she would read the poetry to the man and the woman .",
]


def tiny_suite(name: str, *, x=FLOWERS, y=INSECTS, a=PLEASANT, b=UNPLEASANT) -> WeatSuite:
    """Two tests; the first one's sets can be replaced (e.g. to hold a repeated word)."""
    prefix = "C" if name == "weat_ws" else "W"
    first, second = (f"{prefix}7", f"{prefix}8") if prefix == "C" else ("W1", "W2")
    return WeatSuite(
        name,
        (
            WeatTest(
                first,
                "flowers/insects",
                tuple(x),
                tuple(y),
                tuple(a),
                tuple(b),
                "Flowers",
                "Insects",
                "Pleasant",
                "Unpleasant",
            ),
            WeatTest(second, "jobs/arts", JOBS, ARTS, MALE, FEMALE, "Jobs", "Arts", "Male terms", "Female terms"),
        ),
        "tiny",
    )


def use_tiny_suite(monkeypatch, **sets) -> None:
    """Every packaged WEAT suite name loads the tiny suite (with ``sets`` replacing the first test's)."""
    monkeypatch.setattr(data, "load_weat_suite", lambda name: tiny_suite(name, **sets))


def small_abc(monkeypatch, held_out: int | None = None) -> None:
    """ABC scored on less, for jobs that solve every prompt (SeT with optax): each trait pole by its own word
    only (32 words instead of 117), and with ``held_out`` the 4 pilot groups (the template choice needs
    them) and that many other groups instead of all 25."""
    import dataclasses

    from jaxassoc.app.tasks import stereotypes

    abc = data.load_abc()
    poles = dataclasses.replace(abc, traits={pole: synonyms[:1] for pole, synonyms in abc.traits.items()})
    monkeypatch.setattr(data, "load_abc", lambda: poles)
    if held_out is not None:
        every = stereotypes.human_groups(abc)
        pilots = [abc.human_groups[g] for g in stereotypes.PILOT_GROUPS]
        chosen = pilots + [g for g in every if g not in pilots][:held_out]
        monkeypatch.setattr(stereotypes, "human_groups", lambda _: chosen)


def benchmark_words() -> list[str]:
    """The WS-353 and SimLex-999 words and the 400 commonest STS-B dev words (similarity rows need them)."""
    words = [
        *data.load_wordsim353()[["word1", "word2"]].to_numpy().ravel(),
        *data.load_simlex999()[["word1", "word2"]].to_numpy().ravel(),
    ]
    stsb = data.load_stsb("dev")
    tokens = re.findall(r"[a-z]+(?:'[a-z]+)?", " ".join([*stsb.sentence1, *stsb.sentence2]).lower())
    counts = {}
    for t in tokens:
        counts[t] = counts.get(t, 0) + 1
    return [*words, *sorted(counts, key=counts.get, reverse=True)[:400]]


def write_tiny_glove(path: Path, dim: int = 8, *, same_as: dict[str, str] | None = None) -> Path:
    """A GloVe text file of seeded random vectors for the tiny suite's words (not the OOV one) and the
    benchmark words; ``same_as`` gives a word the vector of another one."""
    suite = [w for s in (FLOWERS, INSECTS, PLEASANT, UNPLEASANT, JOBS, ARTS, MALE, FEMALE) for w in s]
    words = [w for w in dict.fromkeys(w.lower() for w in [*suite, *benchmark_words()]) if w not in OOV and " " not in w]
    vectors = np.random.default_rng(0).normal(size=(len(words), dim)).astype(np.float32)
    index = {w: i for i, w in enumerate(words)}
    for word, other in (same_as or {}).items():
        vectors[index[word]] = vectors[index[other]]
    path.write_text("".join(f"{w} {' '.join(f'{v:.6f}' for v in row)}\n" for w, row in zip(words, vectors)))
    return path


def write_corpus(path: Path, sentences=CORPUS) -> Path:
    path.write_text("\n".join(sentences) + "\n")
    return path


def start_hydra():
    """Register the metrics and configs and open Hydra on the real conf/ (a generator for a fixture)."""
    for name in registry.BUILTIN:
        get_metric(name)
    yamls = {p.stem for p in (CONF_DIR / "metric").glob("*.yaml")}
    register_configs(
        {n: s.config for n, s in METRICS.items()}, yamls, {n: s.dataset for n, s in METRICS.items() if s.dataset}
    )
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        yield
    GlobalHydra.instance().clear()


def compose_config(overrides):
    return compose(config_name="config", overrides=["cache_dir=null", "quiet=true", *overrides])


def run_metric(overrides, output_dir: Path):
    """``make_job`` (range checks and option validation) then the metric's run, without writing results."""
    cfg = compose_config(overrides)
    job = make_job(cfg, output_dir)
    return get_metric(cfg.metric.name).run(job)


@contextlib.contextmanager
def app_config(*plugins: str) -> Iterator[Callable[..., DictConfig]]:
    """Import the test plugins named (modules in ``tests/plugins``), register every metric and config, and
    yield ``compose(*overrides)`` for the app's root config."""
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(PLUGINS))
        for plugin in plugins:  # (re)imported: registers its metrics even if another test reset the registry
            importlib.reload(sys.modules[plugin]) if plugin in sys.modules else importlib.import_module(plugin)
        main.register()
        GlobalHydra.instance().clear()
        try:
            with initialize_config_dir(config_dir=str(main.CONF_DIR), version_base="1.3"):
                yield lambda *overrides: compose(config_name="config", overrides=list(overrides))
        finally:
            GlobalHydra.instance().clear()


def use_plugins(monkeypatch, *plugins: str, folder: Path = PLUGINS) -> dict[str, str]:
    """Ready an in-process CLI run (the ``cli`` fixture) to load the plugins named (modules in ``folder``,
    by default ``tests/plugins``) as a new process would: ``folder`` on ``sys.path``, the plugin modules
    imported afresh and the registry's plugin loading run again. Returns the environment to pass to the run:
    ``{"JAXASSOC_PLUGINS": "a,b"}``."""
    monkeypatch.syspath_prepend(str(folder))
    for plugin in plugins:
        monkeypatch.delitem(sys.modules, plugin, raising=False)
    monkeypatch.setattr(registry, "_loaded", False)
    return {"JAXASSOC_PLUGINS": ",".join(plugins)}
