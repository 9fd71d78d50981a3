"""``intervention=lora`` in the app (docs/methods.md §13): the job's model with low-rank adapters trained against a
bias (:func:`jaxassoc.finetune.adapt.fine_tune`), the trained adapter a cache entry keyed on everything it
depends on (the model's fingerprint, every option, the seed, the bias term's metric and code), so a sweep trains
each adapter once and every metric scores the same adapted model; training checkpoints beside the cache entries
let an interrupted job resume. The columns every result of a fine-tuned model carries: :data:`FINETUNE_COLUMNS`.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path
from typing import Any

import jax
import numpy as np
import pandas as pd

from jaxassoc.array_cache import cache_key, cached_arrays, compute_code
from jaxassoc.errors import ConfigError
from jaxassoc.models import lora

log = logging.getLogger("jaxassoc")

NAMESPACE = "lora_adapter"
FINETUNE_COLUMNS = (
    "ft_objective",
    "ft_bias_metric",
    "ft_steps",
    "ft_trained_parameters",
    "ft_heldout_ppl_ratio",
    "ft_bias_train_before",
    "ft_bias_train_after",
    "ft_bias_heldout_before",
    "ft_bias_heldout_after",
    "ft_this_metric_trained",
)
"""The columns of a result of ``intervention=lora`` (docs/methods.md §13.5): the objective and bias metric, the
steps and trained parameters, the held-out text's perplexity ratio (adapted / base), the bias metric's real value
as its distance from the unbiased value (RMS over its sub-scores) on its training and held-out items before and
after training, and whether this row's metric is the one trained against (its items then include the training
items: read the held-out columns)."""

_TRAINED: dict[str, tuple[dict, dict]] = {}  # entry key -> (trained arrays, record): one training per process


@dataclasses.dataclass(frozen=True)
class Adapter:
    """A trained adapter as the app keeps it: its arrays, its history (one row per step) and its summary."""

    params: dict
    history: pd.DataFrame
    summary: dict


def trained_adapter(
    model: Any, cfg: Any, *, seed: int, cache_dir: Path | None, progress: bool, bias_term: Any = None
) -> Adapter:
    """The adapter ``cfg`` trains on ``model`` (its adapters removed first), from this process's memory, the
    cache, or trained now (checkpointing beside the cache entry, resuming from a checkpoint found there; the bias
    term, e.g. its temperature's choice, is built only then);
    ``bias_term``: the bias metric's builder (``MetricSpec.bias_term``, resolved: ``main.bias_term_of``) for
    ``objective=metric``."""
    from jaxassoc.finetune.adapt import fine_tune

    base = lora.without_adapters(model)
    options = cfg.finetune_options(seed)
    lora.check_spec(options.spec(), base.port.abstract_body(base.config), base.family)  # before any cache claim
    if cfg.objective == "metric" and bias_term is None:
        raise ConfigError(f"intervention.objective=metric: no bias term was given for metric {cfg.metric!r}")
    parts = {  # the bias term is a function of these (the model, its options, the data and code): built on a miss
        "model": base.fingerprint(),
        "options": dataclasses.asdict(options),
        "bias": None if cfg.objective != "metric" else {"metric": cfg.metric, **compute_code(bias_term)},
    }
    key = cache_key(NAMESPACE, parts)
    if key not in _TRAINED:
        checkpoint = None if cache_dir is None else Path(cache_dir) / "lora_checkpoints" / f"{key[:40]}.safetensors"
        if checkpoint is None:
            log.info("intervention=lora: no cache folder, so no training checkpoints (an interrupt starts again)")

        def compute() -> dict[str, np.ndarray]:
            setup = None
            if cfg.objective == "metric":
                setup = bias_term(base, cfg.bias_type, seed, heldout=cfg.heldout, temperature=cfg.temperature)
            log.info("intervention=lora: training %s (%s) for %d steps%s", ", ".join(options.targets),
                     options.objective, options.steps, "" if setup is None else f" against {setup.description}")  # fmt: skip
            tuned = fine_tune(base, options, setup, checkpoint=checkpoint, quiet=not progress)
            log.info("intervention=lora: trained in %.1f s (resumed at step %d)", tuned.seconds, tuned.resumed_from)
            arrays = {
                f"{name}/{k}": np.asarray(v) for name, ab in lora.trainable(tuned.model).items() for k, v in ab.items()
            }
            record = {"history": tuned.history.to_dict(orient="list"), "summary": tuned.summary,
                      "bias": None if setup is None else {"metric": cfg.metric, "names": list(setup.names),
                                                          "target": setup.term.target, "n_train": setup.n_train,
                                                          "n_heldout": setup.n_heldout}}  # fmt: skip
            arrays["record.json"] = np.frombuffer(json.dumps(record, default=float).encode(), np.uint8)
            return arrays

        stored = cached_arrays(cache_dir, NAMESPACE, parts, compute)
        if checkpoint is not None:
            checkpoint.unlink(missing_ok=True)  # the entry holds the result now
        record = json.loads(bytes(np.asarray(stored["record.json"])).decode())
        params: dict = {}
        for name, value in stored.items():
            if name != "record.json":
                path, _, k = name.rpartition("/")
                params.setdefault(path, {})[k] = value
        _TRAINED[key] = (params, record)
    params, record = _TRAINED[key]
    return Adapter(params, pd.DataFrame(record["history"]), {**record["summary"], "bias": record["bias"]})


def lora_model(
    model: Any, cfg: Any, *, seed: int, cache_dir: Path | None, progress: bool, bias_term: Any = None
) -> Any:
    """``model`` with the adapter ``cfg`` trains (:func:`trained_adapter`) in every forward pass."""
    adapter = trained_adapter(model, cfg, seed=seed, cache_dir=cache_dir, progress=progress, bias_term=bias_term)
    base = lora.without_adapters(model)
    options = cfg.finetune_options(seed)
    shaped = lora.add_adapters(base, options.spec(), jax.random.key(options.seed))
    return lora.with_trainable(shaped, jax.tree.map(lambda x: jax.numpy.asarray(x), adapter.params))


def finetune_columns(job: Any) -> dict[str, Any]:
    """:data:`FINETUNE_COLUMNS` of a job with ``intervention=lora`` (``{}`` otherwise), and its training history
    written to ``finetune_history.csv`` in the job's output folder (surrogate and real values on both splits at
    each evaluation, every step's loss terms)."""
    cfg = job.intervention
    if cfg.name != "lora":
        return {}
    adapter = trained_adapter(job.language_model(), cfg, seed=job.seed, cache_dir=job.cache_dir, progress=False,
                              bias_term=job.bias_term)  # fmt: skip
    if job.output_dir is not None:
        from jaxassoc.io import atomic_write

        target = Path(job.output_dir) / "finetune_history.csv"
        atomic_write(target, lambda tmp: adapter.history.to_csv(tmp, index=False))
    s, bias = adapter.summary, adapter.summary["bias"]

    def distance(split: str, when: str) -> float:
        if bias is None:
            return float("nan")
        values = [s.get(f"{name} real {split} {when}", float("nan")) for name in bias["names"]]
        return float(np.sqrt(np.mean(np.square(np.asarray(values) - bias["target"]))))

    return {
        "ft_objective": cfg.objective,
        "ft_bias_metric": "" if bias is None else bias["metric"],
        "ft_steps": cfg.steps,
        "ft_trained_parameters": int(s["trained_parameters"]),
        "ft_heldout_ppl_ratio": float(s.get("heldout_ppl_ratio after", float("nan"))),
        "ft_bias_train_before": distance("train", "before"),
        "ft_bias_train_after": distance("train", "after"),
        "ft_bias_heldout_before": distance("heldout", "before"),
        "ft_bias_heldout_after": distance("heldout", "after"),
        "ft_this_metric_trained": bias is not None and bias["metric"] == job.metric.name,
    }
