"""Fine-tune a model's low-rank adapters against a bias (docs/methods.md §13): the options, the data of each
objective, the evaluation during training and the result.

    setup = rpam_head.bias_term(model, "gender", seed=0, heldout=0.5)    # or None with objective="cda"
    tuned = fine_tune(model, FinetuneOptions(objective="metric", steps=200), bias=setup)
    tuned.model      # the adapted model: every metric scores it; lora.merged(tuned.model).save(folder)
    tuned.history    # one row per step: loss, terms, gradient norm, learning rate; evaluations every N steps
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from jaxassoc import data
from jaxassoc.errors import ConfigError, InputError
from jaxassoc.finetune import batches, loop
from jaxassoc.finetune.bias import BiasSetup
from jaxassoc.finetune.objectives import OBJECTIVES, PRESERVATION, Objective, token_nll
from jaxassoc.finetune.optim import OptimizerConfig
from jaxassoc.models import lora
from jaxassoc.models.heads import head_logits
from jaxassoc.models.mesh import batch_spec

log = logging.getLogger("jaxassoc")

EVAL_ROWS = 64
"""Held-text rows set aside (never trained on) to measure the held-out perplexity during training."""
MIN_ROWS = 8
"""The fewest training rows (augmented sentences) and preservation rows a run accepts."""


@dataclasses.dataclass(frozen=True)
class FinetuneOptions:
    """Everything a run depends on besides the model and the data (docs/methods.md §13.4 lists each default)."""

    objective: str = "cda"  # cda | metric
    bias_type: str = "gender"  # the word lists (cda's swaps) and the metric's items (metric)
    corpus: str = "wikitext2"  # cda's text and the held text: WikiText-2 valid, or a text file, one sentence a line
    rank: int = 8
    alpha: float = 16.0
    targets: tuple[str, ...] = ("attn.q", "attn.v")
    layers: tuple[int, ...] | None = None
    steps: int = 200
    batch_size: int = 8  # rows per step (each micro batch: batch_size // accumulate)
    seq_len: int = 128
    accumulate: int = 1
    learning_rate: float = 1e-3
    warmup: int = 0
    schedule: str = "cosine"
    weight_decay: float = 0.0
    clip: float = 1.0
    preservation: str = "kl"  # kl | mse
    lam: float = 1.0  # the preservation term's weight
    heldout: float = 0.5  # metric: the share of the metric's items held out of training
    bias_batch: int = 16  # metric: training items per step (0: all), where the term's items split into rows
    temperature: float | None = None  # metric: the surrogate's temperature (None: chosen by agreement)
    seed: int = 0
    evaluate_every: int = 25
    checkpoint_every: int = 50

    def __post_init__(self) -> None:
        if self.objective not in OBJECTIVES:
            raise ConfigError(f"intervention.objective={self.objective!r}: choose one of {list(OBJECTIVES)}")
        if self.preservation not in PRESERVATION:
            raise ConfigError(f"intervention.preservation={self.preservation!r}: choose one of {list(PRESERVATION)}")
        for name in ("steps", "batch_size", "seq_len", "accumulate"):
            if getattr(self, name) < 1:
                raise ConfigError(f"intervention.{name}={getattr(self, name)} must be a positive integer")
        if self.seq_len < 2:
            raise ConfigError(f"intervention.seq_len={self.seq_len}: a training row needs at least 2 tokens")
        if self.batch_size % self.accumulate:
            raise ConfigError(
                f"intervention.batch_size={self.batch_size} is not a multiple of intervention.accumulate="
                f"{self.accumulate}: each micro batch holds batch_size / accumulate rows"
            )
        if self.rank < 1:
            raise ConfigError(f"intervention.rank={self.rank}: an adapter's rank must be at least 1")
        if not self.learning_rate > 0:
            raise ConfigError(f"intervention.lr={self.learning_rate} must be positive")
        if self.warmup < 0 or self.warmup > self.steps:
            raise ConfigError(f"intervention.warmup={self.warmup} must be in 0..intervention.steps ({self.steps})")
        if not 0 <= self.heldout < 1:
            raise ConfigError(f"intervention.heldout={self.heldout} must be in [0, 1): the share of items held out")
        if self.bias_batch < 0:
            raise ConfigError(f"intervention.bias_batch={self.bias_batch} must be >= 0 (0: every item at every step)")
        if self.evaluate_every < 0 or self.checkpoint_every < 0:
            raise ConfigError("intervention.evaluate_every and checkpoint_every must be >= 0 (0: only at the end)")
        if self.lam < 0:
            raise ConfigError(f"intervention.lam={self.lam} must be >= 0")
        if self.temperature is not None and not self.temperature > 0:
            raise ConfigError(f"intervention.temperature={self.temperature} must be positive (or auto)")
        self.optimizer()  # its own checks (learning rate, warm-up, schedule)

    def optimizer(self) -> OptimizerConfig:
        return OptimizerConfig(self.learning_rate, self.steps, self.warmup, self.schedule, self.weight_decay, self.clip)

    def spec(self) -> lora.LoRASpec:
        return lora.LoRASpec(
            self.rank, self.alpha, tuple(self.targets), None if self.layers is None else tuple(self.layers)
        )


@dataclasses.dataclass
class FineTuned:
    """A run's result: the adapted ``model``, its ``history`` (one row per step), the step it resumed from, its
    seconds in this process, and the ``summary``: the bias term (surrogate and real value, training and held-out
    items) and the held-out perplexity ratio before and after."""

    model: Any
    history: pd.DataFrame
    resumed_from: int
    seconds: float
    summary: dict[str, Any]


def text_rows(model: Any, options: FinetuneOptions):
    """``(training sentences, preservation sentences, evaluation sentences)`` of the corpus: ``cda``: the
    two-sided augmentation of the sentences with attribute words (:func:`jaxassoc.data.augmented_sentences`),
    the others held text; ``metric``: no training text. The last :data:`EVAL_ROWS` held sentences are set aside
    for evaluation. InputError for a corpus too small for either."""
    words = data.load_attribute_words(options.bias_type)
    sentences = data.fitting_sentences(options.corpus)
    augmented, held = data.augmented_sentences(sentences, words)
    corpus = "WikiText-2 (valid)" if options.corpus == "wikitext2" else options.corpus
    if options.objective == "cda" and len(augmented) < MIN_ROWS:
        raise InputError(
            f"intervention.corpus={options.corpus!r}: {len(augmented)} counterfactual sentences of {words.bias_type} "
            f"words in {corpus}; CDA needs at least {MIN_ROWS}: give a larger corpus"
        )
    if len(held) < MIN_ROWS + 1:
        raise InputError(
            f"intervention.corpus={options.corpus!r}: {len(held)} sentences of {corpus} without {words.bias_type} "
            f"words to preserve the model on; at least {MIN_ROWS + 1} are needed"
        )
    n_eval = min(EVAL_ROWS, len(held) // 4 or 1)
    return (augmented if options.objective == "cda" else []), held[:-n_eval], held[-n_eval:]


@functools.partial(jax.jit, static_argnames=("objective",))
def _text_nll(params, frozen, rows, *, objective):
    """(summed NLL, tokens) of evaluation rows under the adapted model (``params`` None: the base model)."""
    model = frozen if params is None else objective.adapted(params, frozen)
    body = model["body"] if params is not None else lora.stripped(frozen["body"])
    logits = head_logits(model["head"], objective.hidden(body, rows["inputs"], rows["mask"]))
    return token_nll(logits, rows["labels"], rows["weights"]), jnp.sum(rows["weights"])


@functools.partial(jax.jit, static_argnames=("objective", "term"))
def _bias_parts(params, frozen, arrays, *, objective, term):
    model = objective.adapted(params, frozen)
    return term.parts(lambda i, m: objective.hidden(model["body"], i, m), model["head"], arrays)


def fine_tune(
    model: Any,
    options: FinetuneOptions,
    bias: BiasSetup | None = None,
    *,
    checkpoint: Path | None = None,
    quiet: bool = False,
) -> FineTuned:
    """Train adapters on ``model`` (module docstring); ``bias``: the metric's term (``objective="metric"``);
    ``checkpoint``: the file to checkpoint to and resume from. Errors: ConfigError for options that do not fit
    the model, InputError for data too small, TrainingError for a diverging run or a checkpoint of other
    options."""
    if options.objective == "metric" and bias is None:
        raise ConfigError("intervention.objective=metric needs a metric's bias term (intervention.metric=<name>)")
    if model.objective == "seq2seq":
        raise ConfigError(f"fine-tuning trains causal and masked LMs; {model.name!r} is an encoder-decoder")
    if model.head is None or (model.objective == "masked" and model.vocab.mask_id is None):
        raise ConfigError(f"{model.name!r} has no language-modelling head: its text loss cannot be computed")
    base = lora.without_adapters(model)
    adapted = lora.add_adapters(base, options.spec(), jax.random.key(options.seed))
    objective = Objective(base.port, base.config, options.objective, model.objective == "masked", options.preservation,
                          options.lam, base.weights_dtype, None if bias is None else bias.term)  # fmt: skip
    train_text, held_text, eval_text = text_rows(model, options)
    train = _rows(adapted, train_text, options.seq_len, options.seed) if train_text else None
    held_ids, held_mask = batches.token_rows(adapted, held_text, options.seq_len)
    evaluation = _rows(adapted, eval_text, options.seq_len, options.seed + 1)
    frozen = adapted.params
    place_rows = _placer(adapted.mesh)

    def batch(step: int) -> dict:
        B, micro = options.batch_size, options.accumulate
        pick = batches.step_rows(len(held_ids), B, step, options.seed + 1)
        out = {"held": {"ids": held_ids[pick], "mask": held_mask[pick]}}
        if train is not None:
            rows = batches.step_rows(len(train["mask"]), B, step, options.seed)
            out["train"] = _train_rows(adapted, train, rows, options.seed, step)
        return {"micro": place_rows(jax.tree.map(lambda v: batches.split_micro({"x": v}, micro)["x"], out)),
                "whole": None if bias is None else _bias_items(bias, options, step)}  # fmt: skip

    base_nll = _text_nll(None, frozen, evaluation, objective=objective)
    base_ppl = float(np.exp(base_nll[0] / base_nll[1]))

    def evaluate(step: int, params: Any) -> dict:
        nll, tokens = _text_nll(params, frozen, evaluation, objective=objective)
        out = {"heldout_ppl_ratio": float(np.exp(nll / tokens)) / base_ppl}
        if bias is not None:
            for split, arrays, n in (("train", bias.train, bias.n_train), ("heldout", bias.heldout, bias.n_heldout)):
                if not n:  # intervention.heldout=0: every item trained
                    continue
                parts = _bias_parts(params, frozen, arrays, objective=objective, term=bias.term)
                for name, s, r in zip(bias.names, np.asarray(bias.term.surrogate(parts)), bias.term.real(parts)):
                    out[f"{name} surrogate {split}"], out[f"{name} real {split}"] = float(s), float(r)
        return out

    fresh = jax.tree.map(jnp.copy, lora.trainable(adapted))  # the step donates its state: never frozen's buffers
    shardings = jax.tree.map(lambda x: x.sharding, fresh)
    trained = loop.train(
        fresh, frozen, batch, objective=objective, optimizer=options.optimizer(), checkpoint=checkpoint,
        checkpoint_every=options.checkpoint_every, options=dataclasses.asdict(options) | {"model": model.fingerprint()},
        evaluate=evaluate, evaluate_every=options.evaluate_every, quiet=quiet,
        place=lambda state: state._replace(params=jax.device_put(state.params, shardings)) if adapted.mesh else state,
    )  # fmt: skip
    tuned = lora.with_trainable(adapted, jax.tree.map(jnp.asarray, trained.params))
    history = pd.DataFrame(trained.history)
    evaluated = history.dropna(subset=["heldout_ppl_ratio"])
    measured = [c for c in evaluated.columns if c == "heldout_ppl_ratio" or " surrogate " in c or " real " in c]
    summary = {"base_heldout_ppl": base_ppl, "trained_parameters": lora.count(tuned),
               **{f"{k} before": float(evaluated.iloc[0][k]) for k in measured},
               **{f"{k} after": float(evaluated.iloc[-1][k]) for k in measured}}  # fmt: skip
    return FineTuned(tuned, history, trained.resumed_from, trained.seconds, summary)


def _bias_items(bias: BiasSetup, options: FinetuneOptions, step: int) -> Any:
    """The training items of a step's bias term: a minibatch of ``options.bias_batch`` (drawn as the text rows,
    from ``(seed + 2, epoch)``), or all of them."""
    if bias.sample is None or options.bias_batch == 0 or options.bias_batch >= bias.n_train:
        return bias.train
    return bias.sample(bias.train, batches.step_rows(bias.n_train, options.bias_batch, step, options.seed + 2))


def _rows(model: Any, sentences: list[str], seq_len: int, seed: int) -> dict[str, np.ndarray]:
    ids, mask = batches.token_rows(model, sentences, seq_len)
    if model.objective == "causal":
        return batches.causal_rows(ids, mask)
    # a stream of its own, apart from the steps' (seed, step): SeedSequence takes non-negative words only
    return batches.masked_rows(ids, mask, _special(model, ids), int(model.vocab.mask_id),
                               np.random.default_rng([seed, 2**32 - 1]))  # fmt: skip


def _special(model: Any, ids: np.ndarray) -> np.ndarray:
    special = [i for i in (model.vocab.bos_id, model.vocab.eos_id, model.vocab.pad_id) if i is not None]
    special += list(getattr(model.tokenizer, "all_special_ids", []))
    return np.isin(ids, np.asarray(sorted(set(special)), np.int64))


def _train_rows(model: Any, train: dict, rows: np.ndarray, seed: int, step: int) -> dict[str, np.ndarray]:
    """The training rows of a step; a masked LM's positions drawn afresh from ``(seed, step)``."""
    if model.objective == "causal":
        return {k: v[rows] for k, v in train.items()}
    ids, mask = train["labels"][rows], train["mask"][rows]
    return batches.masked_rows(ids, mask, _special(model, ids), int(model.vocab.mask_id),
                               np.random.default_rng([seed, step]))  # fmt: skip


def _placer(mesh: Any):
    """Micro batches ``(micro, rows, ...)`` split along their rows over the mesh's batch axes (one device: as is)."""
    if mesh is None:
        return lambda tree: tree
    sharding = NamedSharding(mesh, P(None, *batch_spec(mesh)))
    return lambda tree: jax.device_put(tree, sharding)
