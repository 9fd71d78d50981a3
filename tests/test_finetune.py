"""Fine-tuning low-rank adapters against a bias (``jaxassoc.finetune``, docs/methods.md §13) on a tiny Llama with
adapters whose ``B`` is not zero (so every adapter entry has a gradient):

1. one ``train_step`` equals the same loss differentiated by hand (mean next-token NLL over the weighted tokens +
   lam * mean KL(base || adapted) over the held tokens) and an optax ``chain(clip_by_global_norm, adamw(schedule))``
   update built here, from the first state and from the second (Adam's moments, the schedule's count);
2. gradient accumulation over 4 micro batches of different token counts equals one batch of the same rows, where
   the mean of the micro batches' own means does not;
3. a run interrupted after a checkpoint and resumed from it ends bit for bit as the uninterrupted run;
4. a checkpoint of other options is refused naming the option, a corrupt one is a TrainingError, and a full disk
   while checkpointing leaves the previous checkpoint intact and no temporary behind;
5. a non-finite loss stops the run with a TrainingError naming its step, the last checkpoint kept;
6. (slow) the CrowS-Pairs and RPAM bias terms' gradients equal central differences, in float64;
7. CDA's swaps equal a reference rule written here (case, punctuation, possessives, plurals, mixed classes, three
   classes);
8. bad options, a metric objective without a metric, a corpus too small, the temperature choice and the item split;
9. a masked LM's masked positions are a function of (seed, step); (slow) a tiny BERT CDA run of 2 steps;

and the CrowS-Pairs term's log-likelihoods against the metric's (slow) and the RPAM term with no item held out.

Tolerances (``tests/tolerances.py``): two float32 programs computing the gradient of a loss through the L blocks and
the head (the train step, scanned over micro batches, and the hand-written loss) differ by at most
``f32_chain(2 (L + 1), INNER, scale)``: a forward and a backward pass through L + 1 layers whose reductions have at
most ``INNER`` terms (the vocabulary's log-sum-exp is the widest), ``scale`` the largest gradient entry of the array
(:func:`_grad_tol`). The optimiser's step turns a gradient discrepancy into a parameter discrepancy through Adam's
update, bounded entry by entry by its Lipschitz constant over the interval the gradient may lie in, plus the
roundings of Adam's arithmetic (:func:`_adam_bound`).
"""

from __future__ import annotations

import dataclasses
import errno
import json
import math
import re
import types

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from safetensors.numpy import save_file
from tolerances import EPS32, EPS64, f32_chain, f32_log_softmax, f32_sum

from jaxassoc import data
from jaxassoc.data import counterfactual as cf
from jaxassoc.data._files import data_path
from jaxassoc.errors import ConfigError, InputError, TrainingError
from jaxassoc.finetune import adapt, batches, checkpoints, loop
from jaxassoc.finetune.adapt import FinetuneOptions, fine_tune
from jaxassoc.finetune.bias import choose_temperature, split_items
from jaxassoc.finetune.objectives import Objective
from jaxassoc.finetune.optim import OptimizerConfig
from jaxassoc.finetune.step import init_state, train_step
from jaxassoc.models import load_model, lora
from jaxassoc.models.heads import head_logits

T = 10  # tokens per row: short rows, most texts shorter (different token counts per row)
B = 8  # rows per step
LAM = 0.5  # the preservation term's weight (not 1, so a dropped weight shows)
TRAIN = [
    "he",
    "she studies math",
    "The doctor said that he would help the nurse",
    "they",
    "his work and her art",
    "music",
    "The engineer fixed the computer",
    "she",
    "her brother wrote on the board",
    "the nurse",
    "He and his father",
    "a man",
]
HELD = [
    "flower and pleasant",
    "People from every country",
    "food",
    "The teacher wrote on the board while",
    "insect",
    "a test",
    "good",
    "music and friends",
    "friends",
    "the computer and the board",
    "unpleasant",
    "every family",
]
# the optimiser of the step tests: clipping active (the gradient's norm is ~0.3), eps comparable to the smaller
# gradient entries (so Adam's step depends on the gradient's size, not only its sign), weight decay, a cosine schedule
OPT = OptimizerConfig(learning_rate=1e-2, steps=4, schedule="cosine", weight_decay=0.1, clip=0.1, eps=1e-4)
OPTIONS = {"objective": "cda", "lam": LAM, "seed": 0}  # what the loop tests key their checkpoints on


def _numpy(tree):
    return jax.tree.map(lambda x: np.array(x), tree)  # a copy: train_step donates its state


def _micro(tree, micro: int):
    return jax.tree.map(lambda v: batches.split_micro({"x": v}, micro)["x"], tree)


def _with_random_b(model, seed=0):
    """``model`` with rank-2 adapters on attn.q and attn.v, ``B`` random, and their trained arrays (NumPy)."""
    adapted = lora.add_adapters(model, lora.LoRASpec(2, 4.0), jax.random.key(seed))
    rng = np.random.default_rng(seed)
    params = {
        name: {"a": np.asarray(v["a"]), "b": (0.1 * rng.normal(size=v["b"].shape)).astype(np.float32)}
        for name, v in lora.trainable(adapted).items()
    }
    return lora.with_trainable(adapted, jax.tree.map(jnp.asarray, params)), params


@pytest.fixture(scope="module")
def tiny(tiny_checkpoint):
    """A tiny Llama with rank-2 adapters on attn.q and attn.v whose ``B`` is random, its training and held rows,
    the CDA objective, and the loss written by hand (jitted once)."""
    model = load_model(tiny_checkpoint("llama"))
    adapted, params = _with_random_b(model)
    base = lora.without_adapters(adapted)
    ids, mask = batches.token_rows(adapted, TRAIN, T)
    train = batches.causal_rows(ids, mask)
    held_ids, held_mask = batches.token_rows(adapted, HELD, T)
    objective = Objective(adapted.port, adapted.config, "cda", False, "kl", LAM, adapted.weights_dtype)

    def hand(p, rows, held, held_weights, n_lm, n_held):
        """(loss, (lm, preservation, max |logit|)): sum(NLL * weights) / n_lm + LAM * sum(KL * held_weights) /
        n_held."""
        m = lora.with_trainable(adapted, p)
        logits = head_logits(m.head, m.forward(m.params["body"], rows["inputs"], rows["mask"]).hidden)
        logp = jax.nn.log_softmax(logits, axis=-1)
        nll = -jnp.take_along_axis(logp, rows["labels"][..., None], axis=-1)[..., 0]
        lm = jnp.sum(nll * rows["weights"]) / n_lm
        held_logits = head_logits(m.head, m.forward(m.params["body"], held["ids"], held["mask"]).hidden)
        base_logits = head_logits(base.head, base.forward(base.params["body"], held["ids"], held["mask"]).hidden)
        q, p_base = jax.nn.log_softmax(held_logits, axis=-1), jax.nn.log_softmax(base_logits, axis=-1)
        kl = jnp.sum(jnp.exp(p_base) * (p_base - q), axis=-1)
        pres = jnp.sum(kl * held_weights) / n_held
        top = jnp.max(jnp.stack([jnp.abs(x).max() for x in (logits, held_logits, base_logits)]))
        return lm + LAM * pres, (lm, pres, top)

    n_layers = len(jax.tree.leaves(base.params["body"]["layers"])[0])
    # the widest reduction: the vocabulary's log-sum-exp (wider than the MLP's 64)
    inner = max(int(model.head.W.shape[0]), 64)
    return types.SimpleNamespace(
        model=adapted, params=params, frozen=adapted.params, train=train, held={"ids": held_ids, "mask": held_mask},
        objective=objective, grad=jax.jit(jax.value_and_grad(hand, has_aux=True)), layers=n_layers, inner=inner,
    )  # fmt: skip


def _rows(tiny, n: int = B):
    """The first ``n`` training and held rows."""
    return {"train": {k: v[:n] for k, v in tiny.train.items()}, "held": {k: v[:n] for k, v in tiny.held.items()}}


def _by_hand(tiny, params, rows, train_weights=None, held_weights=None):
    """(loss, lm, preservation, max |logit|), gradient: the hand-written loss, normalised by the rows' total token
    counts."""
    tw = rows["train"]["weights"] if train_weights is None else train_weights
    hw = rows["held"]["mask"].astype(np.float32) if held_weights is None else held_weights
    n_lm, n_held = np.float32(rows["train"]["weights"].sum()), np.float32(rows["held"]["mask"].sum())
    (loss, (lm, pres, top)), g = tiny.grad(params, {**rows["train"], "weights": tw}, rows["held"], hw, n_lm, n_held)
    return (float(loss), float(lm), float(pres), float(top)), _numpy(g)


def _grad_tol(tiny, scale: float) -> float:
    """Two float32 programs of the same gradient, forward and backward through the blocks and the head (module
    docstring)."""
    return f32_chain(2 * (tiny.layers + 1), tiny.inner, scale)


def _loss_tol(tiny, rows, top: float) -> float:
    """Two float32 programs of the loss: each token's log-probability within f32_log_softmax of logits within
    f32_chain(L + 1, INNER, top) (``top``: the largest |logit| or |log p|, so |log p| <= 2 top + log V); the mean
    over the tokens adds f32_sum; KL's two log-softmaxes move it by 2 such log-probability bounds (its weights p
    sum to 1)."""
    vocab = tiny.inner
    max_logp = 2 * top + math.log(vocab)
    per_token = f32_log_softmax(vocab, f32_chain(tiny.layers + 1, tiny.inner, top), max_logp)
    n = int(rows["train"]["weights"].sum())
    return per_token + f32_sum(n, max_logp / n) + LAM * 2 * per_token


def _lr(count: int) -> float:
    """OPT's schedule written out: cosine from the peak to 0 over OPT.steps (optax counts from 0)."""
    return OPT.learning_rate * 0.5 * (1 + math.cos(math.pi * min(count, OPT.steps) / OPT.steps))


def _hand_chain(clip=OPT.clip, shift=0):
    """The optimiser written with optax's pieces (not ``OptimizerConfig.build``): clip by global norm, then AdamW
    with the cosine schedule. Wrong variants for the bound to separate: ``clip=inf`` (no clip), ``shift=1`` (the
    schedule read one step late); the same state layout."""

    def schedule(count):
        return OPT.learning_rate * 0.5 * (1 + jnp.cos(jnp.pi * jnp.minimum(count + shift, OPT.steps) / OPT.steps))

    adam = optax.adamw(schedule, b1=OPT.b1, b2=OPT.b2, eps=OPT.eps, weight_decay=OPT.weight_decay)
    return optax.chain(optax.clip_by_global_norm(clip), adam)


def _adam_bound(params, grads, grad_tol, mu, nu, count, lr):
    """Per entry, a bound on |p' - p''| for two float32 AdamW steps (clip, Adam, decoupled decay, learning rate
    ``lr``) from the same state (moments ``mu``, ``nu`` after ``count`` steps) and parameters, with gradients within
    ``grad_tol[name][k]`` of ``grads`` (float64 NumPy).

    - clip: c = clip / |g| moves by c * |dg| / |g| (+ the rounding of a norm of N squares, f32_sum(N, 1/N)),
      so each clipped entry within dgc = c * dg + |c g| * dc / c;
    - Adam's direction r = m^ / (sqrt(v^) + eps), m^ = (b1 mu + (1 - b1) gc) / bc1, v^ = (b2 nu + (1 - b2) gc^2)
      / bc2: |dr/dgc| <= (1 - b1) / (bc1 (s + eps)) + |m^| sqrt((1 - b2) / bc2) / (s + eps)^2 (as sqrt(v^) >=
      sqrt((1 - b2) / bc2) |gc|), taken at the interval's smallest s and largest |m^|;
    - roundings, on each side: m^ (3 operations and the bias correction on terms of size M = (b1 |mu| + (1 - b1)
      |gc|) / bc1), s (4 on positive terms, halved by the root, the root, + eps) and the division: 4u M / (s + eps)
      + 5u |r|; the update lr (r + wd p) and p + update: u (|r| + 2 wd |p|) lr + u |p'|; the learning rate itself
      (cosine of a float32 count, 5 operations and the cosine's few ulp): 8 EPS32 lr.
    """
    b1, b2, eps, wd = OPT.b1, OPT.b2, OPT.eps, OPT.weight_decay
    t = count + 1
    bc1, bc2 = 1 - b1**t, 1 - b2**t
    flat = np.concatenate([np.ravel(g[k]) for g in grads.values() for k in g])
    norm = float(np.sqrt(np.sum(flat**2)))
    dnorm = math.sqrt(sum(grad_tol[name][k] ** 2 * np.size(grads[name][k]) for name in grads for k in grads[name]))
    c = min(1.0, OPT.clip / norm)
    dc_rel = (dnorm / norm + f32_sum(flat.size, 1 / flat.size) + EPS32) if c < 1 else 0.0
    out = {}
    for name in grads:
        out[name] = {}
        for k in grads[name]:
            g, p = grads[name][k], params[name][k].astype(np.float64)
            m0, v0 = mu[name][k].astype(np.float64), nu[name][k].astype(np.float64)
            gc = c * np.abs(g)
            dgc = c * grad_tol[name][k] + gc * dc_rel
            s_lo = np.sqrt((b2 * v0 + (1 - b2) * np.maximum(gc - dgc, 0) ** 2) / bc2)
            m_hi = (b1 * np.abs(m0) + (1 - b1) * (gc + dgc)) / bc1
            lipschitz = (1 - b1) / (bc1 * (s_lo + eps)) + m_hi * math.sqrt((1 - b2) / bc2) / (s_lo + eps) ** 2
            m = (b1 * m0 + (1 - b1) * c * g) / bc1
            r = m / (np.sqrt((b2 * v0 + (1 - b2) * (c * g) ** 2) / bc2) + eps)
            dr = lipschitz * dgc + EPS32 * (4 * m_hi / (s_lo + eps) + 5 * np.abs(r))
            new = p - lr * (r + wd * p)
            out[name][k] = (
                lr * dr
                + 8 * EPS32 * lr * np.abs(r + wd * p)
                + EPS32 * (lr * (np.abs(r) + 2 * wd * np.abs(p)) + np.abs(new))
            )
    return out


def _max_excess(a, b, bound) -> float:
    """max over entries of |a - b| / bound (<= 1: within the bound)."""
    return max(float(np.max(np.abs(a[n][k] - b[n][k]) / bound[n][k])) for n in a for k in a[n])


def _hand_step(chain, params, grads, opt_state=None):
    """The parameters after one ``chain`` update of ``grads`` from ``opt_state`` (None: the initial state)."""
    p = jax.tree.map(jnp.asarray, params)
    state = chain.init(p) if opt_state is None else jax.tree.map(jnp.asarray, opt_state)
    return _numpy(optax.apply_updates(p, chain.update(jax.tree.map(jnp.asarray, grads), state, p)[0]))


def _step_bound(start, grads, grad_tol, count):
    """:func:`_adam_bound` of a step from the state ``start`` (NumPy) after ``count`` steps."""
    mu, nu = (optax.tree_utils.tree_get(start.opt_state, k) for k in ("mu", "nu"))
    return _adam_bound(start.params, jax.tree.map(lambda x: x.astype(np.float64), grads), grad_tol, mu, nu, count,
                       _lr(count))  # fmt: skip


def _norm_tol(tiny, grads, grad_tol) -> float:
    """The gradient's norm moves by at most the norm of the entries' bounds, and rounds as a sum of N squares."""
    flat = np.concatenate([np.ravel(v) for a in grads.values() for v in a.values()]).astype(np.float64)
    spread = sum(v.size * grad_tol[n][k] ** 2 for n, a in grads.items() for k, v in a.items())
    return math.sqrt(spread) + float(np.sqrt(np.sum(flat**2))) * (f32_sum(flat.size, 1 / flat.size) + EPS32)


def _norm(grads) -> float:
    return float(np.sqrt(sum(np.sum(np.asarray(v, np.float64) ** 2) for a in grads.values() for v in a.values())))


# --- 1. one train step = the loss and optax step written by hand ---------------------------------------------


def test_one_train_step_equals_the_hand_written_loss_and_optax_step(tiny):
    rows = _rows(tiny)
    batch = {"micro": _micro(rows, 1), "whole": None}
    state = _template(tiny)
    for count in range(2):  # from the first state, and from the second (moments and schedule count not zero)
        start = _numpy(state)
        (loss, lm, pres, top), g = _by_hand(tiny, start.params, rows)
        state, metrics = train_step(state, tiny.frozen, batch, objective=tiny.objective, optimizer=OPT)
        assert int(state.step) == count + 1
        loss_tol = _loss_tol(tiny, rows, top)
        assert abs(float(metrics["loss"]) - loss) <= loss_tol
        assert abs(float(metrics["lm"]) - lm) <= loss_tol and abs(float(metrics["preservation"]) - pres) <= loss_tol
        assert abs(float(metrics["loss"]) - (float(metrics["lm"]) + LAM * float(metrics["preservation"]))) <= loss_tol
        grad_tol = {n: {k: _grad_tol(tiny, float(np.abs(v).max())) for k, v in g[n].items()} for n in g}
        assert abs(float(metrics["grad_norm"]) - _norm(g)) <= _norm_tol(tiny, g, grad_tol)
        assert float(metrics["grad_norm"]) > OPT.clip  # the clip acts
        # the same step with the optimiser written here, from the same state (count 1: the step's moments)
        bound = _step_bound(start, g, grad_tol, count)
        stepped = _numpy(state.params)
        moments = None if count == 0 else start.opt_state
        assert _max_excess(stepped, _hand_step(_hand_chain(), start.params, g, moments), bound) <= 1
        # the bound separates: the step without the clip, or with the schedule one step late, is outside it
        assert _max_excess(stepped, _hand_step(_hand_chain(clip=math.inf), start.params, g, moments), bound) > 10
        assert _max_excess(stepped, _hand_step(_hand_chain(shift=1), start.params, g, moments), bound) > 10


# --- 2. gradient accumulation ------------------------------------------------------------------------------------


def test_four_micro_batches_accumulate_to_the_step_of_one_batch_of_their_rows(tiny):
    rows, M = _rows(tiny), 4
    of_micro = np.repeat(np.arange(M), B // M)  # row -> its micro batch
    n_lm = np.array([rows["train"]["weights"][of_micro == m].sum() for m in range(M)])
    n_held = np.array([rows["held"]["mask"][of_micro == m].sum() for m in range(M)])
    assert len(set(n_lm.tolist())) == M and len(set(n_held.tolist())) > 1  # micro means are not the step's mean
    stepped, metrics = {}, {}
    for micro in (1, M):
        batch = {"micro": _micro(rows, micro), "whole": None}
        new, out = train_step(_template(tiny), tiny.frozen, batch, objective=tiny.objective, optimizer=OPT)
        stepped[micro], metrics[micro] = _numpy(new.params), {k: float(v) for k, v in out.items()}
    (loss, lm, pres, top), exact = _by_hand(tiny, tiny.params, rows)
    # each micro batch's share (normalised by the whole step's counts): the terms the accumulation adds, whose
    # size bounds the rounding of their sum
    w, mask = rows["train"]["weights"], rows["held"]["mask"].astype(np.float32)
    shares = [_by_hand(tiny, tiny.params, rows, w * (of_micro == m)[:, None], mask * (of_micro == m)[:, None])[1]
              for m in range(M)]  # fmt: skip
    grad_tol = {}
    for n in exact:
        grad_tol[n] = {}
        for k in exact[n]:
            scale = max(float(np.abs(exact[n][k]).max()), *(float(np.abs(s[n][k]).max()) for s in shares))
            grad_tol[n][k] = _grad_tol(tiny, scale) + f32_sum(M, scale)
    # the new parameters: the gradients' directions (Adam); the gradient's norm: their scale (which the clip hides)
    bound = _step_bound(_numpy(_template(tiny)), exact, grad_tol, 0)
    assert _max_excess(stepped[M], stepped[1], bound) <= 1
    assert _max_excess(stepped[M], _hand_step(_hand_chain(), tiny.params, exact), bound) <= 1
    norm_tol = _norm_tol(tiny, exact, grad_tol)
    assert abs(metrics[M]["grad_norm"] - metrics[1]["grad_norm"]) <= norm_tol
    assert abs(metrics[M]["grad_norm"] - _norm(exact)) <= norm_tol
    loss_tol = _loss_tol(tiny, rows, top)
    for name, value in (("loss", loss), ("lm", lm), ("preservation", pres)):
        assert abs(metrics[M][name] - value) <= loss_tol and abs(metrics[1][name] - value) <= loss_tol
    # the mean of the micro batches' own means (each token weighted 1 / (M n_m) instead of 1 / n) is another
    # step, far outside the bounds
    naive_w = w * (n_lm.sum() / (M * n_lm))[of_micro][:, None]
    naive_h = mask * (n_held.sum() / (M * n_held))[of_micro][:, None]
    (naive_loss, *_), naive = _by_hand(tiny, tiny.params, rows, naive_w, naive_h)
    assert _max_excess(stepped[M], _hand_step(_hand_chain(), tiny.params, naive), bound) > 10
    assert abs(_norm(naive) - _norm(exact)) > 10 * norm_tol
    assert abs(naive_loss - loss) > 10 * loss_tol


# --- 3.-5. the loop: resume, refused and corrupt checkpoints, a full disk, divergence ---------------------------


def _loop_batches(tiny, interrupt_at=None, nan_at=None):
    """``batches(step)`` of the loop tests: rows of TRAIN and HELD by ``batches.step_rows``; KeyboardInterrupt at
    step index ``interrupt_at``, a NaN token weight at ``nan_at``."""

    def batch(step):
        if step == interrupt_at:
            raise KeyboardInterrupt
        pick, held = batches.step_rows(len(TRAIN), B, step, 0), batches.step_rows(len(HELD), B, step, 1)
        rows = {
            "train": {k: v[pick] for k, v in tiny.train.items()},
            "held": {k: v[held] for k, v in tiny.held.items()},
        }
        if step == nan_at:
            rows["train"]["weights"] = rows["train"]["weights"].copy()
            rows["train"]["weights"][0, 0] = np.nan
        return {"micro": _micro(rows, 1), "whole": None}

    return batch


def _evaluate(step, params):
    return {"sum_of_squares": float(sum(np.sum(np.asarray(v, np.float64) ** 2) for v in jax.tree.leaves(params)))}


def _train(tiny, checkpoint, *, every=2, batch=None, options=OPTIONS, optimizer=OPT):
    return loop.train(
        jax.tree.map(jnp.asarray, tiny.params), tiny.frozen, batch or _loop_batches(tiny), objective=tiny.objective,
        optimizer=optimizer, checkpoint=checkpoint, checkpoint_every=every, options=options, evaluate=_evaluate,
        evaluate_every=2, quiet=True,
    )  # fmt: skip


def _template(tiny, optimizer=OPT):
    return init_state(jax.tree.map(jnp.asarray, tiny.params), optimizer.build())


def test_a_run_resumed_from_its_checkpoint_ends_as_the_uninterrupted_run(tiny, tmp_path):
    """Bit for bit: the checkpoint holds the state's float32 arrays exactly (safetensors), each step's batch is a
    function of the step alone, and the resumed run feeds the same compiled step the same inputs (XLA on a CPU is
    deterministic), so no rounding can differ."""
    full = _train(tiny, tmp_path / "full.safetensors")
    assert full.resumed_from == 0 and [r["step"] for r in full.history] == [0, 1, 2, 3, 4]
    path = tmp_path / "run.safetensors"
    with pytest.raises(KeyboardInterrupt):
        _train(tiny, path, batch=_loop_batches(tiny, interrupt_at=2))  # after step 2 and its checkpoint
    state, history = checkpoints.load(path, _template(tiny), OPTIONS)
    assert int(state.step) == 2 and history == full.history[:3]
    resumed = _train(tiny, path)
    assert resumed.resumed_from == 2
    assert resumed.history == full.history  # the losses, gradient norms and evaluations of steps 3 and 4 too
    for name in full.params:
        for k in ("a", "b"):
            np.testing.assert_array_equal(resumed.params[name][k], full.params[name][k])
    assert any(not np.array_equal(full.params[n][k], tiny.params[n][k]) for n in full.params for k in ("a", "b"))


def test_a_checkpoint_of_other_options_is_refused_naming_them(tiny, tmp_path):
    path = tmp_path / "run.safetensors"
    with pytest.raises(KeyboardInterrupt):
        _train(tiny, path, batch=_loop_batches(tiny, interrupt_at=2))
    saved = path.read_bytes()
    with pytest.raises(TrainingError, match=r"other options \(lam: 0\.5 there, 1\.0 now\); it is not resumed"):
        _train(tiny, path, options={**OPTIONS, "lam": 1.0})
    with pytest.raises(TrainingError, match=r"other options \(rank: None there, 8 now\)"):
        _train(tiny, path, options={**OPTIONS, "rank": 8})
    assert path.read_bytes() == saved  # refused, not overwritten


def test_a_corrupt_checkpoint_is_a_training_error(tiny, tmp_path):
    path = tmp_path / "run.safetensors"
    checkpoints.save(path, _template(tiny), OPTIONS, [])
    whole = path.read_bytes()
    for broken in (b"not a checkpoint", whole[: len(whole) // 2]):
        path.write_bytes(broken)
        with pytest.raises(TrainingError, match="cannot read the training checkpoint .*delete it"):
            _train(tiny, path)
    save_file({"x": np.zeros(2, np.float32)}, str(path))  # a safetensors file, not a training checkpoint
    with pytest.raises(TrainingError, match="is not a jaxassoc fine-tuning checkpoint"):
        _train(tiny, path)
    fewer = {k: v for k, v in tiny.params.items() if k != "layers/attn/q"}  # the same options, other arrays
    checkpoints.save(path, init_state(jax.tree.map(jnp.asarray, fewer), OPT.build()), OPTIONS, [])
    with pytest.raises(TrainingError, match="does not hold the arrays of this run"):
        _train(tiny, path)


def test_a_full_disk_while_checkpointing_keeps_the_previous_checkpoint(tiny, tmp_path, monkeypatch):
    import safetensors.numpy

    path = tmp_path / "run.safetensors"
    real, calls, before = checkpoints.save_file, [], []

    def full_disk(tensors, filename, metadata=None):
        calls.append(filename)
        if len(calls) == 1:
            return real(tensors, filename, metadata=metadata)
        before.append(path.read_bytes())
        blob = safetensors.numpy.save(tensors, metadata=metadata)
        with open(filename, "wb") as f:
            f.write(blob[: len(blob) // 2])  # what fitted
        raise OSError(errno.ENOSPC, "No space left on device", filename)

    monkeypatch.setattr(checkpoints, "save_file", full_disk)
    with pytest.raises(
        TrainingError, match="No space left on device.*the previous checkpoint, if any, is intact"
    ) as caught:
        _train(tiny, path, every=1)
    assert caught.value.__cause__.errno == errno.ENOSPC and len(calls) == 2
    assert calls[1] != str(path)  # written under a temporary name, renamed into place only when complete
    assert path.read_bytes() == before[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]  # no temporary left behind
    state, history = checkpoints.load(path, _template(tiny), OPTIONS)
    assert int(state.step) == 1 and [r["step"] for r in history] == [0, 1]
    monkeypatch.setattr(checkpoints, "save_file", real)
    assert _train(tiny, path, every=1).resumed_from == 1  # readable: the run goes on from it


def test_a_non_finite_loss_stops_naming_its_step_and_keeps_the_last_checkpoint(tiny, tmp_path):
    path = tmp_path / "run.safetensors"
    with pytest.raises(TrainingError, match=r"stopped at step 3: the loss and grad_norm is nan") as caught:
        _train(tiny, path, every=1, batch=_loop_batches(tiny, nan_at=2))
    assert f"the last checkpoint ({path}) is kept" in str(caught.value)
    state, history = checkpoints.load(path, _template(tiny), OPTIONS)
    assert int(state.step) == 2 and [r["step"] for r in history] == [0, 1, 2]
    assert all(np.isfinite(x).all() for x in jax.tree.leaves(state.params))


@pytest.mark.slow
def test_a_huge_learning_rate_stops_at_the_first_non_finite_step(tiny, tmp_path):
    huge = dataclasses.replace(OPT, learning_rate=1e30)
    path = tmp_path / "run.safetensors"
    with pytest.raises(TrainingError, match="lower the learning rate") as caught:
        _train(tiny, path, every=1, optimizer=huge)
    step = int(re.search(r"stopped at step (\d+):", str(caught.value)).group(1))
    assert step >= 2  # the first step starts from finite adapters
    state, history = checkpoints.load(path, _template(tiny, huge), OPTIONS)
    assert int(state.step) == step - 1 and all(math.isfinite(r.get("loss", 0.0)) for r in history)


# --- 6. the metric objective's gradient against central differences (float64) -----------------------------------


def _first_items(arrays, n):
    """The first ``n`` items of a term's dict of arrays (items on the leading axis), cut to their longest row."""
    items = {k: v[:n] for k, v in arrays.items()}
    width = max(int(v.sum(1).max()) for k, v in items.items() if k.endswith("_mask"))
    return {k: v[:, :width] if v.ndim == 2 else v for k, v in items.items()}


def _float64(tree):
    return jax.tree.map(lambda x: jnp.asarray(x, jnp.float64) if np.issubdtype(np.asarray(x).dtype, np.floating)
                        else x, tree)  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("metric", ["crows_pairs", "rpam"])
def test_the_bias_terms_gradient_equals_central_differences_in_float64(tiny_checkpoint, monkeypatch, metric):
    """d(bias2)/d(one adapter entry), the entry of each adapter array with the largest gradient: jax.grad against
    central differences D(h) = (f(x + h) - f(x - h)) / 2h, all in float64.

    The model and the readouts cast to float32 in places (norms, attention scores, log-softmax): with
    ``jax.numpy.float32`` read as float64 for the test (and the config's activations float64), every value is
    float64. D(h/2) misses f' by its truncation h^2 f''' / 24 + O(h^4), estimated from D(h) (Richardson:
    |D(h) - D(h/2)| / 3, doubled), and by its rounding 2 E / h, E bounding f's float64 evaluation error to first
    order: the head inputs' error through L blocks, the head and the readout after it (f32_chain(L + 2, INNER,
    max|h|) with EPS64 for EPS32) times |df/dh| summed over every head input, computed. The gradient itself rounds
    by f32_chain(2 (L + 2), INNER, |g|) with EPS64. The tolerance must stay below 1e-4 |g|, so a float32 error in
    the gradient, a stop_gradient or a dropped term would fail."""
    from jaxassoc.readouts import crows_pairs, rpam_head

    fields = {"max_position_embeddings": 256} if metric == "crows_pairs" else {}  # CrowS-Pairs sentences fit
    model = load_model(tiny_checkpoint("llama", **fields))
    adapted, params = _with_random_b(model)
    if metric == "crows_pairs":  # 3 pairs, at a temperature where their margins do not saturate the sigmoid
        setup = crows_pairs.bias_term(model, "gender", 0, heldout=0.5, temperature=4.0)
        whole = _first_items(setup.train, 3)
    else:
        setup = rpam_head.bias_term(model, "gender", 0, heldout=0.5)
        whole = setup.train
    term = setup.term
    n_layers, inner = len(jax.tree.leaves(model.params["body"]["layers"])[0]), max(int(model.head.W.shape[0]), 64)
    with jax.enable_x64(True), monkeypatch.context() as patch:
        patch.setattr(jnp, "float32", jnp.float64)
        frozen, x = _float64(adapted.params), _float64(params)
        config = dataclasses.replace(adapted.config, activations="float64")
        objective = Objective(adapted.port, config, "metric", False, "kl", 1.0, "float64", term)

        def bias2(p):
            return objective.whole_terms(p, frozen, whole)["bias2"]

        def perturbed(deltas, p=x):  # bias2 with deltas added to the head inputs of each forward pass, in order
            model64 = objective.adapted(p, frozen)
            added = iter(deltas)
            hidden = lambda i, m: objective.hidden(model64["body"], i, m) + next(added)  # noqa: E731
            return jnp.mean(jnp.square(term.surrogate(term.parts(hidden, model64["head"], whole)) - term.target))

        def head_inputs(p):
            model64, seen = objective.adapted(p, frozen), []
            term.parts(lambda i, m: seen.append(objective.hidden(model64["body"], i, m)) or seen[-1],
                       model64["head"], whole)  # fmt: skip
            return seen

        f = jax.jit(bias2)
        value = f(x)
        assert value.dtype == jnp.float64 and float(value) > 0
        grad = jax.jit(jax.grad(bias2))(x)
        states = jax.jit(head_inputs)(x)
        zeros = [jnp.zeros_like(h) for h in states]
        assert float(jax.jit(perturbed)(zeros)) == pytest.approx(float(value), rel=1e-12)
        sensitivity = sum(float(jnp.abs(s).sum()) for s in jax.jit(jax.grad(perturbed))(zeros))
        top = max(float(jnp.abs(h).max()) for h in states)
        rounding = sensitivity * f32_chain(n_layers + 2, inner, top) * EPS64 / EPS32
        h = 1e-4
        for name in grad:
            for k in ("a", "b"):
                g = np.asarray(grad[name][k])
                at = np.unravel_index(np.argmax(np.abs(g)), g.shape)

                def shifted(step, name=name, k=k, at=at):
                    return float(f({**x, name: {**x[name], k: x[name][k].at[at].add(step)}}))

                d1 = (shifted(h) - shifted(-h)) / (2 * h)
                d2 = (shifted(h / 2) - shifted(-h / 2)) / h
                tol = (2 * abs(d1 - d2) / 3 + 2 * rounding / h
                       + f32_chain(2 * (n_layers + 2), inner, float(np.abs(g).max())) * EPS64 / EPS32)  # fmt: skip
                assert tol < 1e-4 * abs(g[at]), (name, k, tol, g[at])
                assert abs(g[at] - d2) <= tol, (name, k, g[at], d2, tol)


# --- 7. CDA's swaps ----------------------------------------------------------------------------------------------


def _reference_augmentation(sentences, bias_type):
    """Two-sided CDA written from the packaged list file: whitespace tokens; punctuation around a token stripped
    (what is not a letter or digit); a trailing 's of a listed word kept aside; a word swapped to the word of the
    same tuple (its first tuple) ``k`` classes on, for k = 1 .. n - 1; the swap in the token's case (ALL CAPS,
    Each-Hyphen-Part, Capitalised, lower)."""
    raw = json.loads(data_path(cf.MITIGATION_FILES[bias_type]).read_text(encoding="utf-8"))
    tuples, n = raw["tuples"], len(raw["classes"])
    first = {}
    for i, t in enumerate(tuples):
        for c, word in enumerate(t):
            first.setdefault(word, (c, i))

    def case_of(new, old):
        if len(old) > 1 and old.upper() == old and old.lower() != old:
            return new.upper()
        if "-" in old and all(part[:1].isupper() for part in old.split("-")):
            return "-".join(part[:1].upper() + part[1:] for part in new.split("-"))
        return new[:1].upper() + new[1:] if old[:1].isupper() else new

    augmented, untouched = [], []
    for sentence in sentences:
        pieces = []
        for token in sentence.split():
            a, b = 0, len(token)
            while a < b and not token[a].isalnum():
                a += 1
            while b > a and not token[b - 1].isalnum():
                b -= 1
            lead, core, trail, poss = token[:a], token[a:b], token[b:], ""
            if core.lower() not in first and core.lower().endswith("'s") and core[:-2].lower() in first:
                core, poss = core[:-2], core[-2:]
            pieces.append((lead, core, poss, trail, first.get(core.lower())))
        if all(p[4] is None for p in pieces):
            untouched.append(sentence)
            continue
        augmented.append(sentence)
        for k in range(1, n):
            words = [lead + (core if hit is None else case_of(tuples[hit[1]][(hit[0] + k) % n], core)) + poss + trail
                     for lead, core, poss, trail, hit in pieces]  # fmt: skip
            augmented.append(" ".join(words))
    return augmented, untouched


CDA_CASES = {
    "gender": (
        [
            "He said that HE would help.",
            "The weather is fine today.",
            "The men and women met; the brothers stayed.",
            "Her brothers, (she) said, saw him.",
            "My father's house and FATHER'S day.",
            "The King spoke to his nephews' teacher.",
            "Nobody came",
        ],
        {  # the reference rule's own check: copies written out
            "He said that HE would help.": ["She said that SHE would help."],
            "The men and women met; the brothers stayed.": ["The women and men met; the sisters stayed."],
            "Her brothers, (she) said, saw him.": ["His sisters, (he) said, saw her."],
            "My father's house and FATHER'S day.": ["My mother's house and MOTHER'S day."],
        },
    ),
    "race": (
        [
            "Black and white people live in Africa.",
            "African-Americans and Asian-Americans voted.",
            "The game ended in a draw.",
        ],
        {
            "Black and white people live in Africa.": [
                "White and asian people live in Europe.",
                "Asian and black people live in Asia.",
            ],
            "African-Americans and Asian-Americans voted.": [
                "European-Americans and African-Americans voted.",
                "Asian-Americans and European-Americans voted.",
            ],
        },
    ),
    "religion": (
        ["The church, the mosque and the Torah.", "A Jew and a Christian met at CHRISTMAS.", "Rain fell all day."],
        {
            "The church, the mosque and the Torah.": [
                "The synagogue, the church and the Quran.",
                "The mosque, the synagogue and the Bible.",
            ],
            "A Jew and a Christian met at CHRISTMAS.": [
                "A Muslim and a Jewish met at HANUKKAH.",
                "A Christian and a Muslim met at EID.",
            ],
        },
    ),
}


@pytest.mark.parametrize("bias_type", sorted(CDA_CASES))
def test_cda_swaps_equal_a_reference_rule(bias_type):
    sentences, written_out = CDA_CASES[bias_type]
    words = data.load_attribute_words(bias_type)
    augmented, untouched = data.augmented_sentences(sentences, words)
    assert (augmented, untouched) == _reference_augmentation(sentences, bias_type)
    n = words.n_classes
    assert len(augmented) == n * (len(sentences) - len(untouched))  # each sentence then its n - 1 copies
    for sentence, copies in written_out.items():
        at = augmented.index(sentence)
        assert augmented[at + 1 : at + n] == copies
    assert untouched == [s for s in sentences if s not in augmented]


# --- 8. bad inputs, the temperature choice, the item split --------------------------------------------------------


@pytest.mark.parametrize(
    "fields, words",
    [
        ({"objective": "dpo"}, r"intervention\.objective='dpo': choose one of \['cda', 'metric'\]"),
        ({"batch_size": 6, "accumulate": 4}, r"batch_size=6 is not a multiple of intervention\.accumulate=4"),
        ({"learning_rate": 0.0}, r"intervention\.lr=0\.0 must be positive"),
        ({"learning_rate": -1e-3}, r"intervention\.lr=-0\.001 must be positive"),
        ({"preservation": "l2"}, r"intervention\.preservation='l2'"),
        ({"seq_len": 1}, r"intervention\.seq_len=1: a training row needs at least 2 tokens"),
        ({"lam": -1.0}, r"intervention\.lam=-1\.0 must be >= 0"),
        ({"warmup": 300}, r"intervention\.warmup=300 must be in 0\.\.intervention\.steps \(200\)"),
        ({"bias_batch": -1}, r"intervention\.bias_batch=-1 must be >= 0"),
        ({"heldout": 1.0}, r"intervention\.heldout=1\.0 must be in \[0, 1\)"),
    ],
)
def test_bad_options_are_config_errors(fields, words):
    with pytest.raises(ConfigError, match=words):
        FinetuneOptions(**fields)


def test_a_metric_objective_without_a_metric_is_a_config_error(tiny):
    with pytest.raises(ConfigError, match="intervention.objective=metric needs a metric's bias term"):
        fine_tune(tiny.model, FinetuneOptions(objective="metric"), quiet=True)


def test_a_corpus_too_small_is_an_input_error_naming_it(tiny, tmp_path):
    corpus = tmp_path / "three.txt"
    corpus.write_text("He went home.\nThe sky is blue.\nShe read a book.\n", encoding="utf-8")
    words = re.escape(f"intervention.corpus={str(corpus)!r}: 4 counterfactual sentences of gender words in {corpus}")
    with pytest.raises(InputError, match=words + "; CDA needs at least 8"):  # 2 sentences and their copies
        fine_tune(tiny.model, FinetuneOptions(corpus=str(corpus), steps=1), quiet=True)
    many = tmp_path / "gendered.txt"  # enough CDA rows, too few sentences without attribute words to preserve on
    many.write_text("".join(f"He saw her {i} times.\n" for i in range(8)) + "The sky is blue.\n", encoding="utf-8")
    with pytest.raises(InputError, match=re.escape(f"{str(many)!r}: 1 sentences of {many} without gender words")):
        fine_tune(tiny.model, FinetuneOptions(corpus=str(many), steps=1), quiet=True)


def _margins(hidden, head, arrays, **_):
    return arrays["margin"]


def _soft_count(parts, *, temperature=1.0):
    return jnp.mean(jax.nn.sigmoid(parts / temperature))[None]


def _count(parts):
    return np.array([np.mean(np.asarray(parts) > 0)])


def test_the_temperature_is_the_largest_that_agrees_with_the_real_score():
    """A synthetic count (its parts: margins given as the items; real: the share of positive margins; surrogate:
    the mean sigmoid(margin / t)) against the rule computed here in float64."""
    from jaxassoc.finetune.bias import BiasTerm

    term = BiasTerm("synthetic", _margins, _soft_count, _count, target=0.5)
    no_model = types.SimpleNamespace(head=None)  # the parts read no forward pass
    grid = (0.05, 0.1, 0.5, 1.0, 2.0, 4.0)
    margins = np.array([3.0, 2.0, -1.0, 0.5, -4.0, 6.0, 1.5, -2.0, 5.0, 0.8])
    for items, tolerance in ((margins, 1 / 10), (np.tile(margins, 50), 0.01)):  # one item's share, at least 0.01
        real = float(np.mean(items > 0))  # 0.7
        gap = {t: abs(float(np.mean(1 / (1 + np.exp(-items / t)))) - real) for t in grid}
        assert min(abs(g - tolerance) for g in gap.values()) > 1e-4  # no float32 borderline
        chosen, gaps = choose_temperature(no_model, term, {"margin": items.astype(np.float32)}, len(items), grid)
        assert sorted(gaps) == list(grid)
        np.testing.assert_allclose([gaps[t] for t in grid], [gap[t] for t in grid], rtol=0, atol=1e-6)
        agreeing = [t for t in grid if gap[t] <= tolerance]
        assert chosen == max(agreeing) and chosen < max(grid)  # the next one up disagrees
    # none agrees: the coldest temperature
    chosen, _ = choose_temperature(no_model, term, {"margin": np.full(4, 0.01, np.float32)}, 4, grid)
    assert chosen == min(grid)


def test_items_split_deterministically_into_disjoint_sets():
    for n, heldout in [(10, 0.5), (7, 0.3), (2, 0.5), (5, 0.01), (5, 0.99), (6, 0.0)]:
        train, held = split_items(n, heldout, 3, "items")
        again = split_items(n, heldout, 3, "items")
        np.testing.assert_array_equal(train, again[0])
        np.testing.assert_array_equal(held, again[1])
        assert not set(train.tolist()) & set(held.tolist())
        assert sorted([*train.tolist(), *held.tolist()]) == list(range(n))
        k = 0 if heldout == 0 else min(max(round(heldout * n), 1), n - 1)
        assert len(held) == k and len(train) == n - k
    splits = {tuple(split_items(10, 0.5, seed, "items")[1].tolist()) for seed in range(5)}
    assert len(splits) > 1  # the seed matters
    for heldout in (1.0, 1.5, -0.1):
        with pytest.raises(ConfigError, match=rf"intervention\.heldout={heldout} must be in \[0, 1\)"):
            split_items(10, heldout, 0, "items")
    with pytest.raises(ConfigError, match="pairs: 1 items cannot be split"):
        split_items(1, 0.5, 0, "pairs")


# --- 9. masked LMs -----------------------------------------------------------------------------------------------

MASKED_TEXTS = [
    "The doctor said that he would help the nurse with her work.",
    "She studies math and science; he studies art and music.",
    "People from every country enjoy food, music, family and friends.",
    "The engineer fixed the computer while the teacher wrote on the board.",
]


def test_masked_positions_are_a_function_of_seed_and_step(tiny_checkpoint):
    from jaxassoc.finetune.batches import MASK_SHARE

    model = load_model(tiny_checkpoint("bert"))
    train = adapt._rows(model, MASKED_TEXTS, 24, seed=0)
    rows = np.array([2, 0, 3, 1])
    first = adapt._train_rows(model, train, rows, 0, 5)
    again = adapt._train_rows(model, train, rows, 0, 5)
    for k in first:
        np.testing.assert_array_equal(first[k], again[k])
    ids, mask = train["labels"][rows], train["mask"][rows]
    special = adapt._special(model, ids)
    chosen = first["weights"] == 1
    assert set(np.unique(first["weights"]).tolist()) <= {0.0, 1.0}
    np.testing.assert_array_equal(first["labels"], ids)  # each masked position predicts its own token
    np.testing.assert_array_equal(first["inputs"], np.where(chosen, model.vocab.mask_id, ids))
    assert not (chosen & ((mask == 0) | special)).any()  # text tokens only: no padding, no [CLS] / [SEP]
    text = ((mask == 1) & ~special).sum(1)
    np.testing.assert_array_equal(chosen.sum(1), np.maximum(1, np.round(MASK_SHARE * text)))
    others = [adapt._train_rows(model, train, rows, 0, 6), adapt._train_rows(model, train, rows, 1, 5)]
    for other in others:  # another step, another seed: other positions
        assert not np.array_equal(other["weights"], first["weights"])
        np.testing.assert_array_equal(other["weights"].sum(1), first["weights"].sum(1))


@pytest.mark.slow
def test_a_tiny_bert_cda_run_of_two_steps(tiny_checkpoint, tmp_path):
    model = load_model(tiny_checkpoint("bert"))
    corpus = tmp_path / "corpus.txt"
    lines = MASKED_TEXTS[:2] + ["His father and her mother met.", "The man and the woman sang."]
    lines += ["People from every country enjoy food.", "The computer and the board.", "Music and friends.",
              "Flowers are pleasant.", "Insects are unpleasant.", "Every family cooks.", "A test is good.",
              "The engineer fixed it.", "The teacher wrote on it."]  # fmt: skip
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    options = FinetuneOptions(corpus=str(corpus), steps=2, batch_size=4, accumulate=2, seq_len=24, evaluate_every=1)
    runs = [fine_tune(model, options, quiet=True) for _ in range(2)]
    history = runs[0].history
    assert list(history["step"]) == [0, 1, 2]
    trained = history.dropna(subset=["loss"])
    assert len(trained) == 2 and np.isfinite(trained[["loss", "lm", "preservation", "grad_norm"]].to_numpy()).all()
    assert runs[0].history.equals(runs[1].history)  # the same masked positions and rows at each step
    assert lora.count(runs[0].model) > 0 and runs[0].resumed_from == 0


# --- the bias terms score their items as the metrics do -------------------------------------------------------------


@pytest.mark.slow
def test_the_crows_pairs_term_scores_its_pairs_as_the_metric(tiny_checkpoint):
    """The term's parts (log P(sent_more), log P(sent_less)) of 4 of its training pairs against the metric's
    ``score_pairs`` of the same pairs: a score sums T token log-probabilities, each within f32_log_softmax of
    logits within f32_chain(L + 1, INNER, max|logit|), plus the sum's rounding f32_sum(T, max|log p|)."""
    from jaxassoc.data.crows_pairs import load_crows_pairs
    from jaxassoc.readouts import crows_pairs

    model = load_model(tiny_checkpoint("llama", max_position_embeddings=256))
    setup = crows_pairs.bias_term(model, "gender", 0, heldout=0.5, temperature=1.0)
    pairs = load_crows_pairs()
    pairs = pairs[pairs["bias_type"] == "gender"].reset_index(drop=True)
    train, _ = split_items(len(pairs), 0.5, 0, "pairs")  # the term's split (bias_term's seed and share)
    assert len(train) == setup.n_train
    items = _first_items(setup.train, 4)
    forward = jax.jit(lambda i, m: model.forward(model.params["body"], i, m).hidden)
    more, less = (np.asarray(p) for p in setup.term.parts(forward, model.head, items))
    reference = crows_pairs.score_pairs(model, pairs.iloc[train[:4]])
    width = max(int(v.shape[1]) for k, v in items.items() if k.endswith("_ids"))
    top = max(float(jnp.abs(head_logits(model.head, forward(v, items[k.replace("_ids", "_mask")]))).max())
              for k, v in items.items() if k.endswith("_ids"))  # fmt: skip
    inner, n_layers = max(int(model.head.W.shape[0]), 64), len(jax.tree.leaves(model.params["body"]["layers"])[0])
    max_logp = 2 * top + math.log(inner)
    tol = width * f32_log_softmax(inner, f32_chain(n_layers + 1, inner, top), max_logp) + f32_sum(width, max_logp)
    np.testing.assert_allclose(more, reference["sent_more_score"], rtol=0, atol=tol)
    np.testing.assert_allclose(less, reference["sent_less_score"], rtol=0, atol=tol)


def test_the_rpam_term_trains_on_every_target_when_none_is_held_out(tiny):
    """``split_items`` documents heldout=0 as 'all trained' (intervention.heldout=0 reaches it unchecked)."""
    from jaxassoc.readouts import rpam_head

    setup = rpam_head.bias_term(lora.without_adapters(tiny.model), "gender", 0, heldout=0.0)
    assert setup.n_heldout == 0 and setup.n_train > 0


# --- mixed precision: bfloat16 weights and products, float32 master adapters and losses ----------------------------


@pytest.mark.slow
def test_mixed_precision_trains_float32_masters_through_bfloat16_products(tiny_checkpoint, tmp_path):
    """Under ``mixed`` the weights are bfloat16; the trained arrays, the optimiser state, the losses and the
    gradient stay float32, and the forward pass casts the adapters to bfloat16 (every adapter product in the step's
    HLO is bf16 x bf16 -> f32, as the weights'): the precision rule of docs/methods.md §12 with float32 masters."""
    model = load_model(tiny_checkpoint("llama"), precision="mixed")
    assert model.weights_dtype == "bfloat16"
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(TRAIN + HELD) + "\n", encoding="utf-8")
    options = FinetuneOptions(corpus=str(corpus), steps=2, batch_size=4, seq_len=T, evaluate_every=0, lam=LAM)
    tuned = fine_tune(model, options, quiet=True)
    trained = lora.trainable(tuned.model)
    assert {str(v.dtype) for ab in trained.values() for v in ab.values()} == {"float32"}
    assert any(float(jnp.abs(ab["b"]).max()) > 0 for ab in trained.values())  # it trained
    assert np.isfinite(tuned.history.dropna(subset=["loss"])[["loss", "lm", "preservation", "grad_norm"]]).all().all()

    adapted = lora.add_adapters(lora.without_adapters(model), options.spec(), jax.random.key(0))
    objective = Objective(adapted.port, adapted.config, "cda", False, "kl", LAM, adapted.weights_dtype)
    ids, mask = batches.token_rows(adapted, TRAIN[:4], T)
    held_ids, held_mask = batches.token_rows(adapted, HELD[:4], T)
    batch = {"micro": _micro({"train": batches.causal_rows(ids, mask), "held": {"ids": held_ids, "mask": held_mask}}, 1),
             "whole": None}  # fmt: skip
    state = init_state(lora.trainable(adapted), options.optimizer().build())
    text = train_step.lower(state, adapted.params, batch, objective=objective, optimizer=options.optimizer()).as_text()
    dots = re.findall(r"stablehlo\.dot_general.*?: \((tensor<[^>]*>), (tensor<[^>]*>)\) -> (tensor<[^>]*>)", text)
    factor = re.compile(rf"tensor<(\d+x{options.rank}|{options.rank}x\d+)x(bf16|f32)>")  # an adapter's A or B
    adapter_dots = [d for d in dots if factor.fullmatch(d[0]) or factor.fullmatch(d[1])]
    bad = [d for d in adapter_dots if not ("bf16" in d[0] and "bf16" in d[1] and "f32" in d[2])]
    assert adapter_dots and not bad, bad
