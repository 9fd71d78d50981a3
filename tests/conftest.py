"""Shared test settings and fixtures.

- XLA's CPU backend at optimisation level 0 (quicker compiles, the same numbers; child processes too);
- fp32 matmuls at full precision for parity checks, and a cache folder of the session's own
  (``JAXASSOC_CACHE``), so no test or app it starts writes to the user's cache;
- XLA's persistent compilation cache in pytest's cache folder, so a second run of the suite loads what the
  first compiled (as the app does with ``compile_cache=true``);
- ``tiny_checkpoint``: the one factory of tiny checkpoints (``tests/family_specs``), written once into
  pytest's cache folder, keyed by the spec, and shared by every test, worker and later run;
- what a test module loaded and compiled is released when the module ends, and each pytest-xdist worker's
  peak resident memory is reported at the end of the run.
"""

import hashlib
import json
import os
import resource
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
# XLA's CPU backend at optimisation level 0: tiny test shapes compile in about half the time and run
# bit-identically (no fast-math at any level: jaxassoc/stats/compilation.py). On 2 cores a first run of
# the default tests took 660 s instead of 845 s, a warm one 249 s instead of 212 s; CI always runs cold.
if "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_backend_optimization_level=0").strip()
SESSION_CACHE = tempfile.mkdtemp(prefix="jaxassoc-test-cache-")
os.environ["JAXASSOC_CACHE"] = SESSION_CACHE

import jax  # noqa: E402

jax.config.update("jax_default_matmul_precision", "highest")
# 8 simulated CPU devices, so mesh tests run in process; a test that places nothing uses the first one.
jax.config.update("jax_num_cpu_devices", int(os.environ.get("JAXASSOC_TEST_DEVICES", "8")))

sys.path.insert(0, str(Path(__file__).parent))  # the helper modules beside the tests
import family_specs  # noqa: E402

from jaxassoc.io import trim_folder  # noqa: E402

_FACTORY_SOURCE = Path(family_specs.__file__)


_XLA_CACHE_BYTES = 1 << 30


def pytest_configure(config):
    """XLA's persistent compilation cache under pytest's cache folder (every compilation kept), trimmed
    to 1 GB at the start of a run (oldest files first; the controller or a lone process only).

    Not JAX's own size limit (``jax_compilation_cache_max_size``): with it every write lists and reads the
    whole folder, and an entry written by a process without the limit (a test's child interpreter) has no
    access-time file, after which every write fails and the cache stops filling."""
    if os.environ.get("JAXASSOC_TEST_COMPILE_CACHE", "1") == "0" or getattr(config, "cache", None) is None:
        return
    folder = config.cache.mkdir("jaxassoc-xla")
    if not hasattr(config, "workerinput"):
        trim_folder(folder, _XLA_CACHE_BYTES)
    jax.config.update("jax_compilation_cache_dir", str(folder))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", str(folder))  # for the interpreters tests start


_FILE_SECONDS = "jaxassoc/file-seconds"
_seconds_this_run: dict[str, float] = {}


_BASELINE_SECONDS = Path(__file__).parent / "file_seconds.json"
"""Each file's seconds in a fresh clone's first default run (issue 38), for the order of a run with no record
of its own: counting tests instead had put a 130 s file of two tests last."""


def pytest_collection_modifyitems(config, items):
    """Test files longest first: their seconds in earlier runs (pytest's cache), else in a fresh clone's first
    run (:data:`_BASELINE_SECONDS`). With ``--dist loadfile --no-loadscope-reorder`` (scripts/test.sh)
    pytest-xdist hands out files in this order, so no worker starts a long file when the others are nearly
    done."""
    seconds = config.cache.get(_FILE_SECONDS, {}) if getattr(config, "cache", None) is not None else {}
    seconds = seconds or json.loads(_BASELINE_SECONDS.read_text())
    counts: dict[str, int] = {}
    for item in items:
        counts[_file_of(item.nodeid)] = counts.get(_file_of(item.nodeid), 0) + 1
    if seconds:
        unknown = max(seconds.values())  # a new file: scheduled early, as if it were the longest
        cost = {f: seconds.get(f, unknown) for f in counts}
    else:
        cost = {f: float(n) for f, n in counts.items()}
    items.sort(key=lambda item: -cost[_file_of(item.nodeid)])  # stable: a file's tests keep their order


def _file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def pytest_runtest_logreport(report):
    _seconds_this_run[_file_of(report.nodeid)] = _seconds_this_run.get(_file_of(report.nodeid), 0.0) + report.duration


def pytest_sessionfinish(session, exitstatus):
    shutil.rmtree(SESSION_CACHE, ignore_errors=True)
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # a pytest-xdist worker: its peak RSS goes to the controller
        workeroutput["peak_rss_mb"] = _peak_rss_mb()
    elif _seconds_this_run and getattr(session.config, "cache", None) is not None:
        seconds = session.config.cache.get(_FILE_SECONDS, {})
        session.config.cache.set(_FILE_SECONDS, seconds | {f: round(s, 2) for f, s in _seconds_this_run.items()})


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux


_WORKER_PEAKS: dict[str, float] = {}


def pytest_testnodedown(node, error):
    peak = getattr(node, "workeroutput", {}).get("peak_rss_mb")
    if peak is not None:
        _WORKER_PEAKS[node.gateway.id] = peak


def pytest_terminal_summary(terminalreporter):
    peaks = _WORKER_PEAKS or {"main": _peak_rss_mb()}
    terminalreporter.write_line(
        "peak RSS per process: " + ", ".join(f"{k} {v:,.0f} MB" for k, v in sorted(peaks.items()))
    )


@pytest.fixture(scope="module", autouse=True)
def _release_after_module():
    """Drop what a test module compiled and the models the app cached once the module ends, so a worker's
    memory does not grow with the number of modules it ran."""
    yield
    from jaxassoc.app import model_loading

    model_loading.release_models()  # the app's model caches, jax.clear_caches() and freed heap pages


@pytest.fixture
def no_model(monkeypatch):
    """Loading any model fails the test: a refusal must come before."""
    from jaxassoc.app import model_loading

    def boom(*args, **kwargs):
        raise AssertionError("a model was loaded before the config was refused")

    monkeypatch.setattr(model_loading, "_load_static", boom)
    monkeypatch.setattr(model_loading, "_load_language_model", boom)


class CliResult(NamedTuple):
    """What a console script did: its exit status and what it printed."""

    returncode: int
    stdout: str
    stderr: str


_CONSOLE_SCRIPTS = {
    "jaxassoc": "jaxassoc.app.main",
    "jaxassoc-report": "jaxassoc.app.report",
    "jaxassoc-cache": "jaxassoc.app.cache_command",
}


@pytest.fixture
def cli(monkeypatch):
    """``cli(program, *args, cwd=None, env=None) -> CliResult``: a console script (``jaxassoc``,
    ``jaxassoc-report``, ``jaxassoc-cache``) run in this process, as its entry point runs it: ``sys.argv``,
    working folder and ``env`` (variables to set; None values are unset) as given, its output captured and
    its exit status from ``SystemExit``. No interpreter start, and compiled functions are shared with the
    other tests; ``tests/test_console_scripts.py`` runs each script once as a real process."""
    import contextlib
    import importlib
    import io
    import logging
    import weakref

    from hydra.core.global_hydra import GlobalHydra
    from hydra.initialize import get_gh_backup, restore_gh_from_backup

    def run(program: str, *args: str, cwd: Path | None = None, env: dict | None = None) -> CliResult:
        entry = importlib.import_module(_CONSOLE_SCRIPTS[program]).main
        out, err = io.StringIO(), io.StringIO()
        with monkeypatch.context() as patch:
            patch.setattr(sys, "argv", [program, *map(str, args)])
            if cwd is not None:
                patch.chdir(cwd)
            for key, value in (env or {}).items():
                patch.delenv(key, raising=False) if value is None else patch.setenv(key, str(value))
            patch.setenv("JAXASSOC_MAIN_PID", str(os.getpid()))
            # Hydra's logging.config.dictConfig closes every handler of the process (pytest's, absl's: absl's
            # closes its stream, pytest's capture file, as it is not the redirected sys.stderr): it sees only
            # the handlers the run makes, and the loggers' settings are restored after it.
            patch.setattr(logging, "_handlerList", [])
            patch.setattr(logging, "_handlers", weakref.WeakValueDictionary())
            for name in ("jaxassoc", "jax._src.xla_bridge", "jax._src.compilation_cache"):  # levels the app sets
                logging.getLogger(name)
            loggers = [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]
            saved = [
                (lg, lg.handlers[:], lg.level, lg.disabled, lg.propagate)
                for lg in loggers
                if isinstance(lg, logging.Logger)
            ]
            hydra_backup = get_gh_backup()  # a Hydra context the test opened (start_hydra) is restored after
            compile_dir = jax.config.jax_compilation_cache_dir  # a job may set it (compile_cache=true)
            GlobalHydra.instance().clear()
            code = 0
            try:
                with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                    try:
                        entry() if program == "jaxassoc" else entry(list(map(str, args)))
                    except SystemExit as e:
                        if isinstance(e.code, str):
                            print(e.code, file=sys.stderr)
                        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            finally:
                GlobalHydra.instance().clear()
                restore_gh_from_backup(hydra_backup)
                if jax.config.jax_compilation_cache_dir != compile_dir:
                    from jax.experimental.compilation_cache import compilation_cache

                    jax.config.update("jax_compilation_cache_dir", compile_dir)
                    compilation_cache.reset_cache()
                known = {id(lg) for lg, *_ in saved}
                added = []
                for lg in logging.Logger.manager.loggerDict.values():  # loggers the run made: no handlers left
                    if isinstance(lg, logging.Logger) and id(lg) not in known:
                        added += lg.handlers
                        lg.handlers.clear()
                for lg, handlers, level, disabled, propagate in saved:
                    added += [h for h in lg.handlers if h not in handlers]
                    lg.handlers[:] = handlers
                    lg.setLevel(level)
                    lg.disabled, lg.propagate = disabled, propagate
                for handler in added:  # e.g. Hydra's job log file
                    if isinstance(handler, logging.FileHandler):
                        handler.close()
        return CliResult(code, out.getvalue(), err.getvalue())

    return run


class CheckpointFactory:
    """``tiny_checkpoint(spec, seed=None, *, fmt="safetensors", into=None, **fields) -> Path``.

    ``spec``: a :class:`family_specs.Spec` or a family name of :data:`family_specs.TINY`; ``seed`` and
    ``fields`` (HF config fields) override the spec's. The folder is written once per distinct content into
    pytest's cache folder (``.pytest_cache/d/jaxassoc-checkpoints``) and shared: treat it as read-only, or
    pass ``into=<folder>`` for a private copy there that the test may change.
    """

    def __init__(self, root: Path):
        self.root = root
        self.handed_out: set[Path] = set()
        self.checked: set[Path] = set()  # intact when first asked for in this process: not hashed again

    def __call__(
        self, spec, seed: int | None = None, *, fmt: str = "safetensors", into: Path | None = None, **fields
    ) -> Path:
        if isinstance(spec, str):
            spec = family_specs.tiny(spec, 0 if seed is None else seed, **fields)
        elif seed is not None or fields:
            spec = spec.with_fields(seed, **fields)
        folder = self._cached(spec, fmt)
        if into is None:
            self.handed_out.add(folder)
            return folder
        out = Path(into) / f"{spec.name}-{fmt}-{spec.seed}"
        shutil.copytree(folder, out, ignore=shutil.ignore_patterns(".manifest.json"))
        return out

    def _cached(self, spec, fmt: str) -> Path:
        import tokenizers
        import torch
        import transformers

        key = json.dumps(
            [
                repr(spec),
                fmt,
                transformers.__version__,
                torch.__version__,
                tokenizers.__version__,
                hashlib.sha256(_FACTORY_SOURCE.read_bytes()).hexdigest(),
            ]
        )
        folder = self.root / f"{spec.name}-{fmt}-{hashlib.sha256(key.encode()).hexdigest()[:16]}"
        if folder in self.checked or _intact(folder):
            self.checked.add(folder)
            return folder
        shutil.rmtree(folder, ignore_errors=True)
        tmp = Path(tempfile.mkdtemp(prefix=folder.name + ".", dir=self.root))
        family_specs.write(spec, tmp, fmt)
        (tmp / ".manifest.json").write_text(json.dumps(_contents(tmp)))
        try:
            tmp.rename(folder)  # atomic: another worker may have written the same one meanwhile
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
        self.checked.add(folder)
        return folder


def _contents(folder: Path) -> dict[str, str]:
    """File (relative path) -> sha256 of its bytes, for every file but the manifest."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != ".manifest.json"
    }


def _intact(folder: Path) -> bool:
    """The folder holds exactly the files its manifest lists, with their bytes (an interrupted run, or a test
    that wrote into the shared folder, makes it be written anew)."""
    try:
        return _contents(folder) == json.loads((folder / ".manifest.json").read_text())
    except (OSError, ValueError):
        return False


@pytest.fixture(scope="session")
def tiny_checkpoint(pytestconfig) -> Iterator[CheckpointFactory]:
    """The factory of tiny checkpoints (:class:`CheckpointFactory`)."""
    cache = getattr(pytestconfig, "cache", None)
    root = cache.mkdir("jaxassoc-checkpoints") if cache is not None else Path(SESSION_CACHE)
    factory = CheckpointFactory(Path(root))
    yield factory
    changed = sorted(str(f) for f in factory.handed_out if not _intact(f))
    assert not changed, (
        f"tests changed shared checkpoints {changed}: a test that modifies a checkpoint must ask for its own "
        "copy, tiny_checkpoint(..., into=tmp_path)"
    )


@pytest.fixture
def pole_words_only(monkeypatch):
    """Each ABC trait pole scored by its own word only (:func:`app_helpers.small_abc` with every group)."""
    from app_helpers import small_abc

    small_abc(monkeypatch)
