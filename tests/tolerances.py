"""Float tolerances derived from the arithmetic a test checks (issue 38: CI that cannot flake).

Two float32 programs computing the same value (JAX vs NumPy or torch, vmapped vs looped, mesh vs one
device, cached vs recomputed) may add in different orders: XLA, oneDNN (AMX) and torch pick blocked,
vectorised or tree reductions that depend on the CPU and the shapes. The bounds here hold for any order.

Rounding model: each float32 operation returns the exact result times (1 + δ), |δ| ≤ u = EPS32 / 2. A sum
of n terms, in any order, takes n - 1 additions, each adding an error ≤ u·|partial sum| ≤ u·Σ|x_i|.
The worst case, (n - 1)·u·Σ|x_i|, needs every rounding to go the same way and is so pessimistic that a
test using it could pass through real bugs; the pairwise bound log2(n)·u·Σ|x_i| is tighter but only holds
for a pairwise order, which nothing promises. With the roundings independent and of mean zero (Higham,
*Accuracy and Stability of Numerical Algorithms*, §4.2, the "rule of thumb" bound), the error has standard
deviation ≤ sqrt(n)·u·Σ|x_i| whatever the order: :func:`f32_sum` takes that, for the difference of two
such sums (√2 σ), with SAFETY = 2.8 of those standard deviations: 2·EPS32·sqrt(n)·Σ|x_i| in all; below
n = 4 terms the worst case of the difference, 2·n·u·Σ|x_i| = n·EPS32·Σ|x_i| (n - 1 additions and n
products, rounding the same way), is smaller and is taken instead. Both are generous, as the partial
sums are usually far smaller than Σ|x_i|.
"""

from __future__ import annotations

import math

import numpy as np

EPS32 = float(np.finfo(np.float32).eps)
"""2⁻²³ ≈ 1.19e-7, the float32 spacing at 1 (twice the unit roundoff u)."""
EPS64 = float(np.finfo(np.float64).eps)
"""2⁻⁵² ≈ 2.2e-16."""
SAFETY = 2.0
"""f32_sum = SAFETY·EPS32·sqrt(n)·Σ|x_i| = 4u·sqrt(n)·Σ|x_i| (n ≥ 4): 2.8 standard deviations of the
difference of two float32 sums (module docstring)."""


def f32_sum(n: int, scale: float = 1.0) -> float:
    """A bound on |a - b| for two float32 evaluations (or one against an exact / float64 value) of a sum or
    dot product of ``n`` terms of magnitude ≤ ``scale`` each (Σ|x_i| ≤ n·scale), in any order:
    EPS32·min(n, SAFETY·sqrt(n))·n·scale, the worst case for n < 4, the probabilistic bound above
    (module docstring). ``n = 1`` bounds one correctly rounded operation (a product, a division, a square
    root) on each side."""
    n = max(n, 1)
    return EPS32 * min(n, SAFETY * math.sqrt(n)) * n * scale


def f32_chain(depth: int, n: int, scale: float) -> float:
    """A bound on the float32 discrepancy between two implementations of ``depth`` stacked layers (a
    transformer block, the head: count each) whose matmuls have inner size ≤ ``n`` and whose outputs
    (the compared ones: logits, hidden states) have magnitude ≤ ``scale``.

    Random weights give the terms of a dot product random signs: its partial sums are ~sqrt(k)·t, not
    k·t, so the rms rounding of the sum is ~u·n·t/√2 ≈ u·sqrt(n)·|y| (|y| ~ sqrt(n)·t) whatever the
    order, and relative errors pass through the normalisations. A layer adds SAFETY·EPS32·sqrt(n)·scale
    = 4u·sqrt(n)·scale (= f32_sum(n, scale / n)): ~6σ of one matmul, ~2.5σ of the ~5 in series of an
    attention + MLP block; the layers' errors add up.
    """
    return depth * f32_sum(max(n, 4), scale / max(n, 4))


def f32_cos(d: int) -> float:
    """A bound on the float32 discrepancy of a cosine similarity of two ``d``-vectors: a dot product and two
    squared norms, each a sum of d terms whose absolute values add up to ≤ ‖a‖·‖b‖ (Cauchy–Schwarz), so
    relative to it each is within f32_sum(d, 1 / d); the square roots and the division round once more,
    inside that slack."""
    return 3 * f32_sum(d, 1 / d)


def f32_log_softmax(vocab: int, logit_tol: float, max_abs_logp: float) -> float:
    """A bound on the float32 discrepancy of log-softmax values (≤ ``max_abs_logp`` in magnitude) over
    ``vocab`` classes computed from logits within ``logit_tol`` of each other: the logit itself and the
    log-sum-exp (a weighted mean of the logits) move by ≤ logit_tol each; the sum of vocab positive
    terms rounds by f32_sum(vocab, 1 / vocab) relative, which the log turns absolute; the subtraction
    rounds once."""
    return 2 * logit_tol + f32_sum(vocab, 1 / vocab) + f32_sum(1, max_abs_logp)


def f32_association(d: int, n_a: int, n_b: int) -> float:
    """A bound on the float32 discrepancy of a WEAT association s(w, A, B) = mean_a cos(w, a) - mean_b
    cos(w, b) of ``d``-dimensional vectors: each cosine within f32_cos(d), then means of n_a and n_b
    cosines (|cos| ≤ 1)."""
    return 2 * f32_cos(d) + f32_sum(n_a, 1 / n_a) + f32_sum(n_b, 1 / n_b)


def f32_effect_size(s_tol: float, s, effect: float) -> float:
    """A bound on the float32 discrepancy of an effect size (mean_X s - mean_Y s) / sd(s) over the n
    scores ``s`` (the reference's, for their spread and range) when each score is within ``s_tol``: the
    means move by ≤ s_tol + f32_sum(n, max|s| / n), the standard deviation by ≤ s_tol (a norm of the
    centred scores is 1-Lipschitz) plus the rounding of its sum of n squares, so d moves by
    (2·δmean + |d|·δsd) / sd, with the ddof-0 SD (the smaller: conservative for ddof 1 too)."""
    s = np.asarray(s, np.float64)
    n, sd, top = s.size, float(s.std()), float(np.abs(s).max())
    mean_tol = s_tol + f32_sum(n, top / n)
    sd_tol = s_tol + sd * f32_sum(n, 1 / n)
    return (2 * mean_tol + abs(effect) * sd_tol) / sd


U_BF16 = 2.0**-9
"""bfloat16's unit roundoff (8 significant bits)."""


def bf16_chain(depth: int, scale: float) -> float:
    """A bound on |mixed - float32| of the outputs (magnitude ≤ ``scale``) of ``depth`` stacked layers under
    ``model.precision=mixed`` (docs/methods.md §12.2): each product's two inputs rounded to bfloat16 give it a
    relative error of σ ≈ √2·u whatever its inner size; ~5 products in series per block, σ ≈ √10·u of the
    output's scale; 3σ per layer, the layers' errors adding up."""
    return depth * 3 * math.sqrt(10) * U_BF16 * scale


def model_depth(model) -> int:
    """The stacked layers a logit goes through: the blocks and the head."""
    import jax

    return len(jax.tree.leaves(model.params["body"]["layers"])[0]) + 1
