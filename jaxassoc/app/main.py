"""The ``jaxassoc`` command: a Hydra app that composes a model, a dataset and a metric.

``jaxassoc`` alone runs the default audit (``metric=audit``): the parts listed in ``conf/audit/``, each a
(model, metric, dataset) job on the embedded offline models. ``jaxassoc model=... metric=... dataset=...``
runs one job; ``jaxassoc -m ...`` sweeps. Every job writes its tables into its Hydra output folder
(see :mod:`jaxassoc.app.store`); a rerun of the same job finds ``results.json`` there and skips it, unless
its inputs (config, model files, dataset version) changed or a result file is missing or damaged.
``distributed=true`` runs one process per host over all global devices (``docs/multihost.md``).

``jaxassoc --help`` is jaxassoc's own (:mod:`jaxassoc.app.cli`); this module imports nothing heavy (JAX,
pandas, the models, Hydra) at the top, so that the help and a refused override answer at once: each
function imports what it uses. Before Hydra runs, :func:`main` composes every job's config and reports
a mistyped key or choice in jaxassoc's words. A job that fails on a bad input leaves no folder of its own
behind; a failed job of a sweep does not stop the others (:mod:`jaxassoc.app.sweep_failures`).
"""

from __future__ import annotations

import dataclasses
import errno
import importlib
import logging
import math
import os
import socket
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omegaconf import OmegaConf, open_dict
from omegaconf.errors import MissingMandatoryValue

from jaxassoc import progress as bars
from jaxassoc.app import cli, sweep_dirs
from jaxassoc.app.console import SIGINT_STATUS, closes_quietly
from jaxassoc.errors import ConfigError, JaxassocError

if TYPE_CHECKING:
    from omegaconf import DictConfig

    from jaxassoc.app.spec import Job, JobResult

log = logging.getLogger("jaxassoc")

CONFIG_PACKAGE = "jaxassoc.conf"
"""The configs (``conf/`` in the source tree), installed as a package: Hydra's ``pkg://jaxassoc.conf``."""
CONF_DIR = Path(importlib.import_module(CONFIG_PACKAGE).__file__).parent
JOB_GROUPS = ("model", "metric", "dataset", "template", "whitening", "stats", "intervention")

# On import, not in main(): a launcher's worker process resolves its job folder (hydra.sweep.subdir) before
# it runs _app, and it imports this module to unpickle _app.
sweep_dirs.register_resolver()
USER_CACHE_RESOLVER = "jaxassoc.user_cache_dir"


def _user_cache_dir() -> str:
    """``${jaxassoc.user_cache_dir:}`` (``cache_dir``'s default), importing the cache module on first use."""
    from jaxassoc.app import cache

    return str(cache.default_cache_dir())


if not OmegaConf.has_resolver(USER_CACHE_RESOLVER):  # the same as cache.register_resolver(), without JAX
    OmegaConf.register_new_resolver(USER_CACHE_RESOLVER, _user_cache_dir)


@closes_quietly("jaxassoc")
def main() -> None:
    """Console entry point (``jaxassoc``, ``python -m jaxassoc``).

    ``-h``/``--help`` prints jaxassoc's help (:func:`jaxassoc.app.cli.help_text`) without importing JAX,
    ``--version`` jaxassoc's version (not Hydra's, which ``--info`` still reports).
    Otherwise every job's config is composed first (:func:`jaxassoc.app.cli.check_overrides`), so a bad
    override is refused in jaxassoc's words before Hydra creates a folder; then Hydra runs the job or the
    sweep. A sweep whose jobs failed ends with their summary and exit status 1.
    """
    os.environ[MAIN_PID] = str(os.getpid())  # a launcher's worker processes inherit it (exit_with_parent)
    argv = sys.argv[1:]
    if cli.wants_help(argv):
        print(cli.help_text())
        return
    if cli.wants_version(argv):
        from jaxassoc import __version__

        print(f"jaxassoc {__version__}")
        return
    try:
        metrics = register()
        argv = sys.argv[1:] = cli.with_default_dataset(argv, {n: s.dataset for n, s in metrics.items() if s.dataset})
        n_jobs = cli.check_overrides(argv)
        cli.check_output_folder(argv)
    except JaxassocError as e:
        sys.exit(f"jaxassoc: error: {e}")
    import hydra

    from jaxassoc.app import sweep_failures

    sweep_failures.forget()
    hydra.main(version_base="1.3", config_path=f"pkg://{CONFIG_PACKAGE}", config_name="config")(_app)()
    ran = sweep_failures.failures()
    if ran is not None and ran[1]:
        sys.exit(sweep_failures.summary(*ran, n_jobs))
    from jaxassoc.app.store import RESULTS_JSON

    if ran is not None and any(ran[0].rglob(RESULTS_JSON)):
        print(f"report: jaxassoc-report {ran[0]}  (writes its tables and figures as one page into {ran[0] / 'report'})")


def register() -> dict[str, Any]:
    """Register the built-in metrics, the plugins and their config schemas (Hydra's ConfigStore).

    Idempotent. ``main`` calls it before Hydra composes the config; ``_app`` calls it again, because a
    launcher's worker process (joblib, submitit, SLURM) imports this module but never runs ``main``.
    """
    from jaxassoc.app.config import register_configs
    from jaxassoc.app.registry import load_metrics

    metrics = load_metrics()
    yamls = {p.stem for p in (CONF_DIR / "metric").glob("*.yaml")}
    own = {name: spec.dataset for name, spec in metrics.items() if spec.dataset}
    register_configs({name: spec.config for name, spec in metrics.items()}, yamls, own)
    return metrics


def _app(cfg: DictConfig) -> None:
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    logging.getLogger("jaxassoc").setLevel(logging.WARNING if cfg.quiet else logging.INFO)
    logging.getLogger("jax._src.xla_bridge").setLevel(logging.WARNING)  # "no TPU" notices on CPU hosts
    logging.getLogger("jax._src.compilation_cache").setLevel(logging.WARNING)  # "Resetting cache" (compile_cache)
    logging.getLogger("fontTools").setLevel(logging.WARNING)  # dozens of INFO lines per PDF figure (font subsetting)
    hydra_cfg = HydraConfig.get()
    output_dir = Path(hydra_cfg.runtime.output_dir)
    in_sweep = hydra_cfg.mode == RunMode.MULTIRUN
    exit_with_parent()
    if not bars.bars_wanted():  # a log file: the hub's download bars off too (the stage lines stay)
        from huggingface_hub.utils import disable_progress_bars

        disable_progress_bars()
    if in_sweep:
        from jaxassoc.app import sweep_failures

        sweep_failures.clear(output_dir)
    try:
        register()
        if cfg.distributed:
            start_distributed(os.environ, cfg.distributed_timeout_s)
        name = cli.name_of_source(list(hydra_cfg.overrides.task), cfg.model.source)
        if name is not None and cfg.metric.name != "audit":
            log.info("model.name=%s: from model.source (give model.name= or model= to label it otherwise)", name)
            with open_dict(cfg):
                cfg.model.name = name
        if cfg.metric.name == "audit":
            run_audit(cfg, output_dir)
        else:
            from jaxassoc.app import validation
            from jaxassoc.app.registry import get_metric

            validation.check_groups_read(get_metric(cfg.metric.name), list(hydra_cfg.overrides.task))
            result = run_job(cfg, output_dir)
            if result is not None and not cfg.quiet and is_writer():
                print(console_tables(cfg.metric.name, result, cfg.stats.correction))
                if not in_sweep:
                    print(f"report: jaxassoc-report {output_dir}  (its tables and figures as one page)")
                print(f"results: {output_dir}")
    except KeyboardInterrupt:
        sys.exit(interrupted(hydra_cfg, in_sweep, output_dir))
    except (JaxassocError, MissingMandatoryValue, OSError) as e:
        if isinstance(e, OSError) and e.errno not in WRITE_ERRORS:
            raise
        message = _user_error(e, output_dir)
        if in_sweep:
            _job_failed(output_dir, message, hydra_cfg)
            return
        _remove_if_untouched(output_dir, _log_file(hydra_cfg))
        sys.exit(f"jaxassoc: error: {message}")
    except Exception as e:
        if not in_sweep:
            raise  # a fault of jaxassoc's, not of the input: Hydra prints the traceback
        log.exception("the job failed")
        first = (str(e).strip().splitlines() or [""])[0]
        fault = f"{type(e).__name__}: {first} (a fault, not a bad input: its traceback is in the job's log)"
        _job_failed(output_dir, fault, hydra_cfg)


def interrupted(hydra_cfg: Any, in_sweep: bool, output_dir: Path) -> int:
    """Ctrl-C: one line saying how to resume (finished jobs are skipped, the cache keeps finished chunks;
    nothing half-written is read back), and the exit status."""
    if in_sweep:
        how = f"rerun the same command with hydra.sweep.dir={hydra_cfg.sweep.dir} to resume (finished jobs are skipped)"
    else:
        how = (
            f"rerun the same command with hydra.run.dir={output_dir} to resume (finished work is reused from the cache)"
        )
    print(f"jaxassoc: interrupted; {how}", file=sys.stderr)
    return SIGINT_STATUS


FULL_OR_READ_ONLY = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS})
WRITE_ERRORS = FULL_OR_READ_ONLY | {errno.EACCES, errno.EPERM}
"""What a full disk, a quota, a read-only file system or a forbidden file raise: one line naming the file,
no traceback."""


def _user_error(e: Exception, output_dir: Path) -> str:
    """The one-line message of a bad input or an unwritable output (``jaxassoc: error: `` follows)."""
    if isinstance(e, OSError) and e.errno in FULL_OR_READ_ONLY:
        return (
            f"cannot write {e.filename or output_dir}: {e.strerror}; free space there or write the results "
            f"elsewhere (hydra.run.dir=... / hydra.sweep.dir=...); output folder: {output_dir}"
        )
    if isinstance(e, OSError):  # EACCES, EPERM: a file this user may not read or write
        return f"cannot access {e.filename or output_dir}: {e.strerror}; check its permissions"
    if isinstance(e, MissingMandatoryValue):  # e.g. a model config of the user's own without `source`
        return (
            f"{e.full_key} has no value; set it on the command line ({e.full_key}=...) or in the config file "
            "that selects it"
        )
    return str(e)


def _log_file(hydra_cfg: Any) -> Path | None:
    """The job's log file (Hydra's ``job_logging`` file handler), if it has one."""
    name = OmegaConf.select(hydra_cfg, "job_logging.handlers.file.filename", default=None)
    return Path(name) if name else None


def _job_failed(output_dir: Path, message: str, hydra_cfg: Any) -> None:
    """A failed job of a sweep: its error into its log and its folder (``error.json``); the sweep goes on."""
    from jaxassoc.app import sweep_failures

    log.error("jaxassoc: error: %s", message)
    overrides = [o for o in hydra_cfg.overrides.task if not o.startswith("hydra.")]
    try:
        sweep_failures.record(output_dir, overrides, message, _log_file(hydra_cfg))
    except OSError as e:  # e.g. the disk that failed the job is still full
        log.error("jaxassoc: error: could not record the failure in %s either: %s", output_dir, e.strerror)


HYDRA_FILES = (".hydra",)
"""What Hydra writes into a job's folder before the job runs (besides the job's log file)."""


def _remove_if_untouched(output_dir: Path, log_file: Path | None) -> bool:
    """Remove the folder Hydra made for a job refused before it wrote anything (it holds only ``.hydra/``
    and the job's log), and the folders above it that this leaves empty, up to the working folder. A folder
    that holds anything else, the working folder and its parents stay. True when the folder went."""
    folder, cwd = output_dir.absolute(), Path.cwd().absolute()
    if folder == cwd or folder in cwd.parents or not folder.is_dir():
        return False
    logs = {log_file.absolute()} if log_file is not None else set()
    entries = list(folder.iterdir())
    if any(e.name not in HYDRA_FILES and e.absolute() not in logs for e in entries):
        return False
    hydra_dir = folder / ".hydra"
    if hydra_dir.is_dir() and any(not p.is_file() for p in hydra_dir.iterdir()):
        return False
    for handler in list(logging.getLogger().handlers):  # Hydra's file handler holds the log open
        if isinstance(handler, logging.FileHandler) and Path(handler.baseFilename).absolute() in logs:
            logging.getLogger().removeHandler(handler)
            handler.close()
    for path in logs:
        path.unlink(missing_ok=True)
    if hydra_dir.is_dir():
        for path in hydra_dir.iterdir():
            path.unlink()
        hydra_dir.rmdir()
    folder.rmdir()
    parent = folder.parent
    while parent != cwd and cwd in parent.parents and not any(parent.iterdir()):
        parent.rmdir()
        parent = parent.parent
    return True


MAIN_PID = "JAXASSOC_MAIN_PID"
_watching_parent = False


def exit_with_parent(poll_seconds: float = 0.5) -> None:
    """In a launcher's worker process, end the worker when its parent dies.

    A worker is a process that runs jobs but did not run ``main`` (its pid differs from ``JAXASSOC_MAIN_PID``,
    which ``main`` sets and workers inherit). Killing a ``hydra/launcher=local_parallel`` sweep with SIGKILL
    would otherwise leave its workers computing and writing. A daemon thread polls the parent's pid and
    exits the process once the worker is orphaned. The process that ran ``main`` never watches, so
    ``nohup jaxassoc &`` outlives its shell.
    """
    global _watching_parent
    if _watching_parent or os.environ.get(MAIN_PID, str(os.getpid())) == str(os.getpid()):
        return
    _watching_parent = True
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_seconds)
        log.warning("the sweep's process %d has died: stopping this worker (pid %d)", parent, os.getpid())
        os._exit(1)

    threading.Thread(target=watch, name="jaxassoc-exit-with-parent", daemon=True).start()


DISTRIBUTED_ENV = ("JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID")


def distributed_options(env: Mapping[str, str]) -> dict[str, Any]:
    """Arguments of ``jax.distributed.initialize`` from ``JAX_COORDINATOR_ADDRESS`` (host:port),
    ``JAX_NUM_PROCESSES`` and ``JAX_PROCESS_ID``; ``{}`` when none is set, so that JAX detects the cluster
    (SLURM, Open MPI, Cloud TPU, Kubernetes). See ``docs/multihost.md``."""
    given = {name: env[name] for name in DISTRIBUTED_ENV if env.get(name)}
    if not given:
        return {}
    missing = [name for name in DISTRIBUTED_ENV if name not in given]
    if missing:
        raise ConfigError(
            f"distributed=true: {', '.join(sorted(given))} set but {', '.join(missing)} not; set all three "
            "(the same address and count on every host, the process id 0..n-1 per host) or none (auto-detect)"
        )
    numbers = {}
    for name in DISTRIBUTED_ENV[1:]:
        try:
            numbers[name] = int(given[name])
        except ValueError:
            raise ConfigError(f"distributed=true: {name}={given[name]!r} is not an integer") from None
    n, pid = numbers["JAX_NUM_PROCESSES"], numbers["JAX_PROCESS_ID"]
    if n < 1 or not 0 <= pid < n:
        raise ConfigError(f"distributed=true: JAX_PROCESS_ID={pid} must lie in 0..JAX_NUM_PROCESSES-1 ({n - 1})")
    address = given["JAX_COORDINATOR_ADDRESS"]
    if not address.rpartition(":")[2].isdigit():
        raise ConfigError(f"distributed=true: JAX_COORDINATOR_ADDRESS={address!r} is not host:port (e.g. node0:8476)")
    return {"coordinator_address": address, "num_processes": n, "process_id": pid}


MAX_DISTRIBUTED_TIMEOUT_S = 86_400


def start_distributed(env: Mapping[str, str], timeout_s: int) -> None:
    """``jax.distributed.initialize`` before any work (multi-host: one process per host, same command),
    waiting at most ``timeout_s`` (``distributed_timeout_s``) for the other processes.

    JAX ends a wait that runs out with a native abort (rc 134, "another task died") that Python cannot
    catch, so the wait is announced first; a process other than 0 polls the coordinator's port itself,
    so that a coordinator that never comes up is one ConfigError instead.
    """
    from jaxassoc.app.config import check_range

    check_range(
        "distributed_timeout_s",
        timeout_s,
        1,
        MAX_DISTRIBUTED_TIMEOUT_S,
        hint="the seconds each process waits for the others to connect, e.g. 120",
    )
    options = distributed_options(env)
    deadline = time.monotonic() + timeout_s
    log.info("distributed: %s", waiting_for(options, timeout_s))
    if options.get("process_id"):
        wait_for_coordinator(options["coordinator_address"], timeout_s)
    import jax

    jax.config.update("jax_cpu_collectives_implementation", "gloo")  # CPU-only clusters and local tests
    try:
        jax.distributed.initialize(**options, initialization_timeout=max(1, math.ceil(deadline - time.monotonic())))
    except (RuntimeError, ValueError) as e:
        raise ConfigError(
            f"distributed=true: jax.distributed.initialize failed ({e}); run under SLURM / Open MPI / a TPU "
            "slice, or set JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES and JAX_PROCESS_ID on every host"
        ) from e
    log.info(
        "distributed: process %d of %d, %d global devices (%d local)",
        jax.process_index(),
        jax.process_count(),
        jax.device_count(),
        jax.local_device_count(),
    )


def waiting_for(options: dict[str, Any], timeout_s: int) -> str:
    """The log line before ``jax.distributed.initialize``: whom it waits for, how long, and what then."""
    wait = f"waiting up to {timeout_s} s (distributed_timeout_s)"
    until = time.strftime("%H:%M:%S", time.localtime(time.time() + timeout_s))
    abort = f"if they have not all connected by {until}, JAX aborts this process a few seconds later (rc 134)"
    if not options:
        return f"{wait} for the processes of the cluster JAX detects; {abort}"
    n, pid, address = options["num_processes"], options["process_id"], options["coordinator_address"]
    if pid == 0:
        return f"process 0 of {n} {wait} for the {n - 1} other process(es) to connect to {address}; {abort}"
    return (
        f"process {pid} of {n} {wait} for the coordinator (process 0) at {address} and the others; if the "
        f"coordinator has not answered by {until}, this process stops with an error; {abort}"
    )


def wait_for_coordinator(address: str, timeout_s: float) -> None:
    """Return once ``address`` (host:port) accepts a TCP connection; a ConfigError after ``timeout_s``."""
    host, _, port = address.rpartition(":")
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            socket.create_connection((host.strip("[]"), int(port)), timeout=1).close()
            return
        except OSError as e:
            if time.monotonic() >= deadline:
                raise ConfigError(
                    f"distributed=true: no coordinator answered at {address} (JAX_COORDINATOR_ADDRESS) within "
                    f"{timeout_s:g} s ({e}); start process 0 (JAX_PROCESS_ID=0) there with the same "
                    "JAX_COORDINATOR_ADDRESS and JAX_NUM_PROCESSES, check the address, or raise distributed_timeout_s"
                ) from None
            time.sleep(0.5)


def is_writer() -> bool:
    """Only process 0 writes results and reports (every process computes all of them)."""
    import jax

    return jax.process_index() == 0


def make_job(cfg: DictConfig, output_dir: Path) -> Job:
    """Plain objects from the composed config, after checking the model/metric pairing, every value's
    range (the config dataclasses) and that every option set is used by the metric (:mod:`validation`)."""
    from jaxassoc.app import validation
    from jaxassoc.app.registry import get_metric

    spec = get_metric(cfg.metric.name)
    if cfg.model.kind not in spec.model_kinds:
        raise ConfigError(
            f"metric {spec.name!r} cannot score model {cfg.model.name!r} of kind {cfg.model.kind!r}; "
            f"it needs a model of kind {' or '.join(spec.model_kinds)}"
            + (
                f" ({cfg.model.name!r} is an encoder-decoder model, neither a causal LM nor a masked LM nor a "
                f"sentence encoder; metrics that read one: {seq2seq_metrics()})"
                if cfg.model.kind == "seq2seq"
                else ""
            )
        )
    intervention = cfg.get("intervention") or {}
    if not spec.interventions and intervention.get("name", "none") != "none":
        raise ConfigError(f"metric={spec.name} intervenes on the model itself: run it with intervention=none")
    if intervention.get("name") == "self_debias" and not spec.scores_tokens:
        from jaxassoc.app.registry import load_metrics

        token_metrics = sorted(n for n, m in load_metrics().items() if m.scores_tokens)
        raise ConfigError(
            f"intervention=self_debias reweights the token probabilities a metric scores sentences with; "
            f"metric={spec.name} scores none that way (metrics it applies to: {', '.join(token_metrics)})"
        )
    job = _job_objects(cfg, output_dir)
    validation.check_options(spec, job)
    if job.intervention.name == "lora" and job.intervention.objective == "metric":
        job = dataclasses.replace(job, bias_term=bias_term_of(job.intervention.metric))
    cache_max_bytes(cfg)
    if job.intervention.name != "none" and job.intervention.from_mediation is not None:
        from jaxassoc.app.interventions import top_components

        top_components(job.intervention)  # the file read and checked before any model loads
    return job


def seq2seq_metrics() -> list[str]:
    """The registered metrics that score an encoder-decoder model (``model_kinds`` holds seq2seq)."""
    from jaxassoc.app.registry import load_metrics

    return sorted(name for name, spec in load_metrics().items() if "seq2seq" in spec.model_kinds)


def _job_objects(cfg: DictConfig, output_dir: Path) -> Job:
    """The config groups as dataclass instances (their ``__post_init__`` range-checks every value).
    ``quiet`` (the progress bars) is also on when stderr is not a terminal (:func:`jaxassoc.progress.bars_wanted`)."""
    from jaxassoc.app import validation
    from jaxassoc.app.config import AppConfig
    from jaxassoc.app.spec import Job

    validation.check_top_level_keys(cfg.keys(), AppConfig)
    obj = {g: OmegaConf.to_object(cfg[g]) for g in JOB_GROUPS if g in cfg}
    for group, value in obj.items():
        validation.check_known_keys(group, cfg[group].keys(), value)
    if "mesh" in cfg:
        validation.check_known_keys("mesh", cfg.mesh.keys(), OmegaConf.to_object(cfg.mesh))
    return Job(
        **obj,
        seed=int(cfg.seed),
        output_dir=output_dir,
        quiet=bool(cfg.quiet) or not bars.bars_wanted(),
        cache_dir=Path(cfg.cache_dir).expanduser() if cfg.cache_dir else None,
        mesh=_mesh(cfg),
    )


def bias_term_of(metric: str) -> Any:
    """The fine-tuning bias term builder of ``metric`` (``MetricSpec.bias_term``, resolved); ConfigError naming a
    metric without a differentiable score, with the list of those that have one (docs/methods.md §13.2)."""
    from jaxassoc.app.registry import get_metric, load_metrics
    from jaxassoc.app.spec import resolve

    spec = get_metric(metric)
    if spec.bias_term is None:
        able = sorted(name for name, s in load_metrics().items() if s.bias_term is not None)
        raise ConfigError(
            f"intervention.metric={metric!r} has no differentiable score to train against; metrics that have "
            f"one: {able} (a plugin offers one with MetricSpec.bias_term)"
        )
    return resolve(spec.bias_term)


def cache_max_bytes(cfg: DictConfig) -> int | None:
    """``cache_max_gb`` in bytes (None: no limit), range-checked."""
    if cfg.get("cache_max_gb") is None:
        return None
    from jaxassoc.app import cache
    from jaxassoc.app.config import check_range

    check_range(
        "cache_max_gb",
        cfg.cache_max_gb,
        0,
        open_low=True,
        hint="a size in GB (e.g. 20; 0.5 for 500 MB), or null for no limit",
    )
    return int(cfg.cache_max_gb * cache.GB)


def _mesh(cfg: DictConfig):
    """The device mesh of the job's models (checked against the device count before any model loads)."""
    from jaxassoc.app import model_loading
    from jaxassoc.app.config import MeshConfig

    mesh_cfg = OmegaConf.to_object(cfg.mesh) if "mesh" in cfg else MeshConfig()
    if cfg.model.kind == "static":
        return None
    return model_loading.device_mesh(mesh_cfg, shard=bool(cfg.model.get("shard", False)))


def job_provenance(cfg: DictConfig) -> dict[str, Any]:
    """The provenance every row of a job carries (the task adds model and dataset hashes, and replaces
    ``model_revision`` as configured by the commit it resolved to)."""
    from jaxassoc.app.provenance import code_identity, code_provenance, config_hash, device_kind, package_versions
    from jaxassoc.app.registry import get_metric, metric_module

    spec = get_metric(cfg.metric.name)
    groups = [
        g for g in JOB_GROUPS if (spec.reads_dataset or g != "dataset") and (g != "intervention" or _ablates(cfg))
    ]
    resolved = {g: OmegaConf.to_container(cfg[g], resolve=True) for g in groups}
    code = code_identity(metric_module(spec))
    return {
        "config_hash": config_hash({**resolved, "seed": cfg.seed}),
        "model": cfg.model.name,
        "model_source": cfg.model.source,
        "model_revision": cfg.model.revision,
        "metric": cfg.metric.name,
        "dataset": cfg.dataset.name if spec.reads_dataset else None,
        "template": cfg.template.name,
        "template_text": cfg.template.text,
        "whitening": cfg.whitening.name,
        "intervention": cfg.intervention.name if "intervention" in cfg else "none",
        "seed": int(cfg.seed),
        "config": resolved,
        "packages": package_versions(),
        "device": device_kind(),
        **code_provenance(code),
    }


def _ablates(cfg: DictConfig) -> bool:
    """Whether the job ablates (a job without one hashes its config as before the group existed)."""
    return "intervention" in cfg and cfg.intervention.name != "none"


def job_inputs(job: Job, provenance: dict[str, Any]) -> dict[str, Any]:
    """What a job's result depends on, as resume compares it (:func:`jaxassoc.app.store.reuse_blocker`),
    read before any model is loaded: the config hash (from the job's ``provenance``), the code identity
    (jaxassoc's and a plugin metric's), the versions of JAX, jaxlib and NumPy, a ``stat`` fingerprint of the model's files and of any other file the config names
    (e.g. ``metric.corpus``), and the dataset's version."""
    from jaxassoc.app import model_loading
    from jaxassoc.app.provenance import code_identity, files_fingerprint, numeric_versions
    from jaxassoc.app.registry import get_metric, metric_module

    spec = get_metric(job.metric.name)
    groups = [g for g in JOB_GROUPS[1:] if spec.reads_dataset or g != "dataset"]
    model_files = model_loading.model_files(job.model)
    named = sorted({path for g in groups for v in _strings(getattr(job, g)) if (path := _file(v))})
    return {
        "config_hash": provenance["config_hash"],
        "code": code_identity(metric_module(spec)),
        "libraries": numeric_versions(),
        "model_files": None if model_files is None else files_fingerprint(model_files),
        "input_files": files_fingerprint(named),
        "dataset_version": _dataset_version(job.dataset) if spec.reads_dataset else None,
    }


def _dataset_version(dataset: Any) -> str | None:
    """A packaged dataset's version; for ``custom_weat`` a hash of its tests' words as read, so an edit of a
    ``.txt`` file its test file names (not itself named by the config) is noticed too."""
    from jaxassoc import data
    from jaxassoc.app import datasets

    if dataset.name == datasets.CUSTOM_WEAT:
        return datasets.dataset_version(dataset, datasets.weat_suite(dataset))
    return data.dataset_info(dataset.name).version if dataset.name in data.DATASETS else None


def _strings(value: Any) -> list[str]:
    """Every string inside a config object (dataclass, dict or list), depth first."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in _strings(v)]
    return [value] if isinstance(value, str) and value else []


def _file(text: str) -> Path | None:
    """The existing file that ``text`` names, if it names one (any other text: None)."""
    try:
        path = Path(text).expanduser()
        return path if path.is_file() else None
    except (OSError, ValueError):  # e.g. a template sentence longer than a file name may be
        return None


def reusable(output_dir: Path, inputs: dict[str, Any], metric: str) -> bool:
    """True (logged) when ``output_dir`` holds a finished result of a job with these inputs; otherwise
    logs why a previous result there is not reused (``weights changed: ...``, ``aggregates.parquet missing``)."""
    from jaxassoc.app import store
    from jaxassoc.models.multihost import all_processes

    blocker = store.reuse_blocker(output_dir, inputs)
    if all_processes(blocker is None):
        log.info("skip %s: finished results in %s", metric, output_dir)
        return True
    if blocker not in (None, store.NO_RESULTS):
        log.info("%s: not reusing the previous result in %s: %s", metric, output_dir, blocker)
    return False


def run_job(cfg: DictConfig, output_dir: Path) -> JobResult | None:
    """Run one (model, metric, dataset) job into ``output_dir``; None when resume skips it.

    First removes the temporaries that killed writers left in ``output_dir`` and the cache, and turns an
    unwritable cache off (with a warning)."""
    from jaxassoc.app import cache, figures, store
    from jaxassoc.app.registry import get_metric
    from jaxassoc.io import remove_stale_temporaries

    job = make_job(cfg, output_dir)
    provenance = job_provenance(cfg)
    job = dataclasses.replace(job, cache_dir=cache.usable_cache_dir(job.cache_dir))
    root = job.cache_dir if cfg.cache_dir else cache.default_cache_dir()  # None: cache_dir is not writable
    cache.use_compile_cache(root / "xla" if cfg.compile_cache and root is not None else None)
    remove_stale_temporaries(output_dir)
    cache.remove_stale_temporaries(job.cache_dir)
    inputs = job_inputs(job, provenance)
    if cfg.resume and reusable(output_dir, inputs, cfg.metric.name):
        return None
    spec = get_metric(cfg.metric.name)
    start, started = time.perf_counter(), math.floor(time.time())
    result = spec.result_of(spec.run(job))
    if spec.interventions and job.intervention.name != "none":
        from jaxassoc.app import interventions

        provenance["intervention_label"] = interventions.intervention_label(job.intervention)
        from jaxassoc.app.finetuning import finetune_columns

        result.aggregates = result.aggregates.assign(**interventions.lm_cost_columns(job), **finetune_columns(job))
    if is_writer():
        labels = {
            "model": cfg.model.name,
            "dataset": cfg.dataset.name if spec.reads_dataset else "none",
            "metric": cfg.metric.name,
            "intervention": cfg.intervention.name if "intervention" in cfg else "none",
        }
        cache.label_used(job.cache_dir, started, labels)
        cache.evict(job.cache_dir, cache_max_bytes(cfg), keep_since=started)
    provenance.update(result.provenance)
    seconds = time.perf_counter() - start
    dataset = cfg.dataset.name if spec.reads_dataset else "no dataset"
    log.info("%s on %s / %s: %.1f s", cfg.metric.name, cfg.model.name, dataset, seconds)
    if not is_writer():
        return result
    if inputs["model_files"] is None:  # a hub model that this job downloaded: fingerprint the snapshot
        inputs = job_inputs(job, provenance)
    for stem, figure in result.figures.items():
        figures.save(figure, output_dir / stem)  # <stem>.png (200 dpi), .pdf and .svg, tight bounding box
    summary = {"seconds": round(seconds, 3)}
    store.write_results(
        output_dir,
        result.items,
        result.aggregates,
        provenance,
        summary,
        inputs=inputs,
        extra_files=tuple(name for stem in result.figures for name in figures.names(stem)),
    )
    return result


AUDIT_JOB_KEYS = ("model", "metric", "dataset", "template", "whitening")
"""Groups an audit part sets from its own overrides: a command-line override of them reaches no part."""


def audit_parts(cfg: DictConfig, overrides: list[str]) -> list[tuple[Any, DictConfig]]:
    """Every part's composed config, validated before any part runs. The command line's ``stats.*``
    overrides (range-checked first) reach each part whose metric reads them; a part keeps the defaults of
    the others (logged). A command-line override of a part's own groups (model, dataset, ...) is refused."""
    import hydra

    from jaxassoc.app import validation
    from jaxassoc.app.config import StatsConfig
    from jaxassoc.app.registry import get_metric

    if not cfg.audit.parts:
        raise ConfigError("metric=audit needs audit.parts; pick an audit with audit=<name>")
    stray = [
        o for o in overrides if o.lstrip("+~").split("=")[0].split(".")[0] in AUDIT_JOB_KEYS and o != "metric=audit"
    ]
    if stray:
        raise ConfigError(
            f"{stray[0]} reaches no part of the audit: each part sets its own model, metric, dataset, template "
            f"and whitening (conf/audit/); run one job (metric=...) or edit the audit's parts"
        )
    OmegaConf.to_object(cfg.stats)  # range checks of the forwarded stats options, once
    forwarded = [o for o in overrides if o.startswith(("stats.", "stats="))]
    defaults = {f.name: validation.field_default(f) for f in dataclasses.fields(StatsConfig)}
    parts = []
    for part in cfg.audit.parts:
        part_cfg = hydra.compose(config_name="config", overrides=[*part.overrides, *forwarded])
        for key in ("seed", "quiet", "resume", "cache_dir", "cache_max_gb", "compile_cache"):
            part_cfg[key] = cfg[key]
        if part_cfg.metric.name == "audit":
            raise ConfigError(f"audit part {part.name!r} must name a metric other than audit")
        spec = get_metric(part_cfg.metric.name)
        for key, why in validation.unused_options(spec, _job_objects(part_cfg, Path(part.name))).items():
            group, name = key.split(".", 1)
            if group == "stats":
                part_cfg.stats[name] = defaults[name]
                log.info("audit part %s: %s left at its default (%s)", part.name, key, why)
        make_job(part_cfg, Path(part.name))
        parts.append((part, part_cfg))
    return parts


def run_audit(cfg: DictConfig, output_dir: Path) -> None:
    """The default audit: each part of ``cfg.audit.parts`` is a job composed from its overrides; the
    parts' aggregates are gathered into one report (:mod:`jaxassoc.app.report`). Loaded models are
    released after a part once no later part reads any of them (list a model's parts together)."""
    import pandas as pd
    from hydra.core.hydra_config import HydraConfig

    from jaxassoc.app import model_loading, report
    from jaxassoc.app.spec import JobResult
    from jaxassoc.memory import release_freed_memory

    parts = audit_parts(cfg, list(HydraConfig.get().overrides.task))
    releases = release_points([_model_identity(part_cfg) for _, part_cfg in parts])
    for (part, part_cfg), release in zip(parts, releases):
        start = time.perf_counter()
        result = run_job(part_cfg, output_dir / part.name)
        if release:
            model_loading.release_models()
        else:
            release_freed_memory()  # the part's temporaries
        if result is None:  # reused: its stored aggregates
            stored = pd.read_parquet(output_dir / part.name / "aggregates.parquet")
            result = JobResult(items=pd.DataFrame(), aggregates=stored)
        if not cfg.quiet and is_writer():
            print(f"\n== {part.name} ({time.perf_counter() - start:.1f} s)")
            print(console_tables(part_cfg.metric.name, result, part_cfg.stats.correction))
    if not is_writer():
        return
    folder = report.write_report(output_dir)
    print(f"\nreport: {folder / 'report.md'} (all parts' aggregates in {folder / 'table.parquet'})")


def release_points(models: list[tuple]) -> list[bool]:
    """After which parts (reading ``models`` in turn) the loaded models go: once no later part reads any
    model loaded since the last release, so a release never forces a model to load twice."""
    loaded, points = set(), []
    for i, model in enumerate(models):
        loaded.add(model)
        points.append(not loaded & set(models[i + 1 :]))
        if points[-1]:
            loaded.clear()
    return points


def _model_identity(part_cfg: DictConfig) -> tuple:
    """What the in-process model cache tells apart: kind, source, revision and precision."""
    model = part_cfg.model
    return tuple(OmegaConf.select(model, f, default=None) for f in ("kind", "source", "revision", "precision"))


def console_tables(metric: str, result: JobResult, correction: str = "none") -> str:
    """The metric's compact tables (:mod:`jaxassoc.app.tables`; the same ones the report shows, with the
    ``stats.correction`` column), or the job's ``summary`` (else its aggregates) for a metric that declares
    no views."""
    from jaxassoc.app import tables
    from jaxassoc.app.registry import get_metric

    spec = get_metric(metric)
    if spec.views is None and result.summary is not None:
        return tables.text(result.summary)
    return tables.console(tables.views_of(spec.views, result.aggregates, correction))


if __name__ == "__main__":
    main()
