"""The ``jaxassoc`` command: a Hydra app that composes a model, a dataset and a metric.

``jaxassoc`` alone runs the default audit (``metric=audit``): the parts listed in ``conf/audit/``, each a
(model, metric, dataset) job on the embedded offline models. ``jaxassoc model=... metric=... dataset=...``
runs one job; ``jaxassoc -m ...`` sweeps. Every job writes its tables into its Hydra output folder
(see :mod:`jaxassoc.app.store`); a rerun of the same job finds ``results.json`` there and skips it.
"""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path
from typing import Any

import hydra
import pandas as pd
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from jaxassoc.app import builtin_metrics, report, store
from jaxassoc.app.config import register_configs
from jaxassoc.app.provenance import config_hash, device_kind, package_versions
from jaxassoc.app.registry import METRICS, Job, JobResult, get_metric, load_plugins
from jaxassoc.errors import ConfigError, JaxassocError

log = logging.getLogger("jaxassoc")

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"
JOB_GROUPS = ("model", "metric", "dataset", "template", "whitening", "stats")


def main() -> None:
    """Console entry point (``jaxassoc``, ``python -m jaxassoc``)."""
    try:
        builtin_metrics.register_all()
        load_plugins()
    except JaxassocError as e:
        sys.exit(f"jaxassoc: error: {e}")
    yamls = {p.stem for p in (CONF_DIR / "metric").glob("*.yaml")}
    register_configs({name: spec.config for name, spec in METRICS.items()}, yamls)
    if not (CONF_DIR / "config.yaml").is_file():
        sys.exit(
            f"jaxassoc: error: the config folder {CONF_DIR} is missing; install jaxassoc from its source "
            "tree with `pip install -e .` (the configs live beside the package)"
        )
    hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="config")(_app)()


def _app(cfg: DictConfig) -> None:
    logging.getLogger("jaxassoc").setLevel(logging.WARNING if cfg.quiet else logging.INFO)
    logging.getLogger("jax._src.xla_bridge").setLevel(logging.WARNING)  # "no TPU" notices on CPU hosts
    output_dir = Path(HydraConfig.get().runtime.output_dir)
    if cfg.distributed:
        # Multi-host: every host runs the same command; the coordinator comes from the cluster
        # environment (SLURM, TPU pod metadata) or JAX_COORDINATOR_ADDRESS / JAX_NUM_PROCESSES / JAX_PROCESS_ID.
        import jax

        jax.distributed.initialize()
        log.info("distributed: process %d of %d, %d global devices",
                 jax.process_index(), jax.process_count(), jax.device_count())
    try:
        if cfg.metric.name == "audit":
            run_audit(cfg, output_dir)
        else:
            result = run_job(cfg, output_dir)
            if result is not None and not cfg.quiet:
                print(format_table(result.summary if result.summary is not None else result.aggregates))
                print(f"results: {output_dir}")
    except JaxassocError as e:
        sys.exit(f"jaxassoc: error: {e}")


def make_job(cfg: DictConfig, output_dir: Path) -> Job:
    """Plain objects from the composed config, after checking the model/metric pairing."""
    spec = get_metric(cfg.metric.name)
    if cfg.model.kind not in spec.model_kinds:
        raise ConfigError(
            f"metric {spec.name!r} cannot score model {cfg.model.name!r} of kind {cfg.model.kind!r}; "
            f"it needs a model of kind {' or '.join(spec.model_kinds)}"
        )
    obj = {g: OmegaConf.to_object(cfg[g]) for g in JOB_GROUPS}
    return Job(
        **obj,
        seed=int(cfg.seed),
        output_dir=output_dir,
        quiet=bool(cfg.quiet),
        cache_dir=Path(cfg.cache_dir).expanduser() if cfg.cache_dir else None,
    )


def job_provenance(cfg: DictConfig) -> dict[str, Any]:
    """The provenance every row of a job carries (the pipeline adds model and dataset hashes)."""
    resolved = {g: OmegaConf.to_container(cfg[g], resolve=True) for g in JOB_GROUPS}
    return {
        "config_hash": config_hash({**resolved, "seed": cfg.seed}),
        "model": cfg.model.name,
        "model_source": cfg.model.source,
        "model_revision": cfg.model.revision,
        "metric": cfg.metric.name,
        "dataset": cfg.dataset.name,
        "template": cfg.template.name,
        "template_text": cfg.template.text,
        "whitening": cfg.whitening.name,
        "seed": int(cfg.seed),
        "config": resolved,
        "packages": package_versions(),
        "device": device_kind(),
    }


def run_job(cfg: DictConfig, output_dir: Path) -> JobResult | None:
    """Run one (model, metric, dataset) job into ``output_dir``; None when resume skips it."""
    job = make_job(cfg, output_dir)
    provenance = job_provenance(cfg)
    if cfg.resume and store.is_finished(output_dir, provenance["config_hash"]):
        log.info("skip %s: finished results in %s", cfg.metric.name, output_dir)
        return None
    start = time.perf_counter()
    result = get_metric(cfg.metric.name).run(job)
    provenance.update(result.provenance)
    seconds = time.perf_counter() - start
    log.info("%s on %s / %s: %.1f s", cfg.metric.name, cfg.model.name, cfg.dataset.name, seconds)
    for stem, figure in result.figures.items():
        store.atomic_write(output_dir / f"{stem}.png", lambda p, f=figure: f.savefig(p, format="png", dpi=120))
    summary = {"seconds": round(seconds, 3)}
    store.write_results(output_dir, result.items, result.aggregates, provenance, summary)
    return result


def run_audit(cfg: DictConfig, output_dir: Path) -> None:
    """The default audit: each part of ``cfg.audit.parts`` is a job composed from its overrides; the
    parts' aggregates are gathered into one report (:mod:`jaxassoc.app.report`)."""
    if not cfg.audit.parts:
        raise ConfigError("metric=audit needs audit.parts; pick an audit with audit=<name>")
    forwarded = [o for o in HydraConfig.get().overrides.task if o.startswith(("stats.", "stats="))]
    for part in cfg.audit.parts:
        part_cfg = hydra.compose(config_name="config", overrides=[*part.overrides, *forwarded])
        for key in ("seed", "quiet", "resume", "cache_dir"):
            part_cfg[key] = cfg[key]
        if part_cfg.metric.name == "audit":
            raise ConfigError(f"audit part {part.name!r} must name a metric other than audit")
        start = time.perf_counter()
        result = run_job(part_cfg, output_dir / part.name)
        if result is None:
            result_table = pd.read_parquet(output_dir / part.name / "aggregates.parquet")
            result_table = result_table[[c for c in result_table.columns if not c.startswith("prov_")]]
        else:
            result_table = result.summary if result.summary is not None else result.aggregates
        if not cfg.quiet:
            print(f"\n== {part.name} ({time.perf_counter() - start:.1f} s)")
            print(format_table(result_table))
    folder = report.write_report(output_dir)
    print(f"\nreport: {folder / 'report.md'} (all parts' aggregates in {folder / 'table.parquet'})")


def format_table(table: pd.DataFrame, max_rows: int = 40) -> str:
    """A compact text rendering: floats to 3 decimals, at most ``max_rows`` rows."""
    shown = table.head(max_rows)
    text = shown.to_string(index=False, float_format=lambda x: f"{x:.3f}")
    return text + (f"\n... ({len(table) - max_rows} more rows)" if len(table) > max_rows else "")


if __name__ == "__main__":
    main()

