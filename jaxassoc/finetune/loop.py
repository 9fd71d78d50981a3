"""The training loop (docs/methods.md §13.3): jitted steps from a batch function, progress on terminals, a
checkpoint every N steps, resume from the last one, and a stop naming the step whose loss or gradient is not
finite."""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from pathlib import Path
from typing import Any, Callable

import jax
import numpy as np

from jaxassoc.errors import TrainingError
from jaxassoc.finetune import checkpoints
from jaxassoc.finetune.step import init_state, train_step
from jaxassoc.progress import progress as progress_bar

log = logging.getLogger("jaxassoc")


@dataclasses.dataclass
class Trained:
    """What a run leaves: the trained arrays, one record per step (its terms, loss, gradient norm, learning
    rate, and at evaluation steps what ``evaluate`` returned), the step it resumed from (0: a fresh start) and
    the seconds its steps took in this process (the first step's included: compilation)."""

    params: Any
    history: list[dict]
    resumed_from: int
    seconds: float


def train(
    params: Any,
    frozen: Any,
    batches: Callable[[int], Any],
    *,
    objective: Any,
    optimizer: Any,
    checkpoint: Path | None = None,
    checkpoint_every: int = 50,
    options: dict[str, Any] | None = None,
    evaluate: Callable[[int, Any], dict] | None = None,
    evaluate_every: int = 0,
    place: Callable[[Any], Any] = lambda state: state,
    quiet: bool = False,
) -> Trained:
    """``optimizer.steps`` steps of :func:`~jaxassoc.finetune.step.train_step` from ``params`` (resumed from
    ``checkpoint`` when it holds a run of the same ``options``), ``batches(step)`` giving each step's batch.
    ``evaluate(step, params)``: records added at step 0, every ``evaluate_every`` steps and the last;
    ``place``: puts a state on the model's devices (a mesh). TrainingError naming the step whose loss or
    gradient norm is not finite (the last checkpoint is kept), or for a checkpoint of other options."""
    options = options or {}
    state = place(init_state(params, optimizer.build()))
    history: list[dict] = []
    resumed = checkpoints.load(checkpoint, state, options) if checkpoint is not None else None
    if resumed is not None:
        state, history = place(resumed[0]), resumed[1]
        log.info("fine-tuning: resumed at step %d from %s", int(state.step), checkpoint)
    start, total = int(state.step), optimizer.steps
    schedule = optimizer.learning_rates()
    began = time.perf_counter()
    if evaluate is not None and start == 0:
        history.append({"step": 0, **evaluate(0, state.params)})
    for step in progress_bar(range(start, total), "fine-tuning", quiet=quiet, unit="step", total=total - start):
        state, metrics = train_step(state, frozen, batches(step), objective=objective, optimizer=optimizer)
        record = {"step": step + 1, "learning_rate": float(schedule(step)), **{k: float(v) for k, v in metrics.items()}}
        bad = [k for k in ("loss", "grad_norm") if not math.isfinite(record[k])]
        if bad:
            raise TrainingError(
                f"fine-tuning stopped at step {step + 1}: the {' and '.join(bad)} is {record[bad[0]]} (learning rate "
                f"{record['learning_rate']:.3g}); lower the learning rate"
                + (f"; the last checkpoint ({checkpoint}) is kept" if checkpoint is not None else "")
            )
        last = step + 1 == total
        if evaluate is not None and (last or (evaluate_every and (step + 1) % evaluate_every == 0)):
            record.update(evaluate(step + 1, state.params))
        history.append(record)
        if checkpoint is not None and (last or (checkpoint_every and (step + 1) % checkpoint_every == 0)):
            checkpoints.save(checkpoint, state, options, history)
    jax.block_until_ready(state.params)
    return Trained(jax.tree.map(np.asarray, state.params), history, start, time.perf_counter() - began)
