"""Plain-NumPy re-implementation of the original SeT per-problem algorithm (Cao et al. 2022), written from
its description: the authors' ``multiclassUpdate.py`` / ``quick_set.py`` at TristaCao/U.S_Stereotypes.

Per problem it builds A = [W | b] and x̃ = [x; 1], rescales the competitor gaps to
C_i = (a_i − a_j + γ) / ‖x̃‖² (C_j = 0), sorts the competitors, pools the gold entry with them in a Python
loop (column squishing, Bittorf et al. 2012, Alg. 5, without clipping), forms the full updated matrix
B = A + δ x̃ᵀ and returns ‖B − A‖_F — every step as the original does it, including the O(V·D) matrix
update. Used by the tests as an independent reference and by ``benchmarks/bench_set.py`` as the baseline.
"""

from __future__ import annotations

import math

import numpy as np


def squish_sorted(values: np.ndarray) -> np.ndarray:
    """Project ``values`` (gold first, competitors sorted descending) onto {y : y_0 ≥ y_i}: a Python scan."""
    n = values.shape[0]
    mean = values[0]
    last_pooled = n - 1
    for k in range(1, n):
        if values[k] <= mean:
            last_pooled = k - 1
            break
        mean = mean * k / (k + 1) + values[k] / (k + 1)
    out = np.array(values, dtype=np.float64)
    out[: last_pooled + 1] = mean
    return out


def minimal_scaled_delta(gaps: np.ndarray, gold: int) -> np.ndarray:
    """min ‖δ‖² s.t. δ_j ≥ δ_i + C_i: with y = δ + C this is the projection of C onto {y_j ≥ y_i}."""
    order = np.argsort(-gaps, kind="stable")
    order = np.concatenate([[gold], order[order != gold]])
    projected = squish_sorted(gaps[order])
    unsorted = np.empty_like(projected)
    unsorted[order] = projected
    return unsorted - gaps


def updated_head(A: np.ndarray, x_tilde: np.ndarray, gold: int, margin: float = 1.0) -> np.ndarray:
    """B minimising ‖B − A‖_F s.t. (B x̃)_j ≥ (B x̃)_i + γ: B = A + δ x̃ᵀ in the original's scaling."""
    logits = A @ x_tilde
    gaps = (logits - logits[gold] + margin) / (x_tilde @ x_tilde)
    gaps[gold] = 0.0
    delta = minimal_scaled_delta(gaps, gold)
    return A + delta[:, None] * x_tilde[None, :]


def set_distance(W: np.ndarray, b: np.ndarray | None, x: np.ndarray, gold: int, margin: float = 1.0) -> float:
    """‖ΔA‖_F of one problem, computed as the original does (A, x̃ built per call, full B formed)."""
    A = W if b is None else np.append(W, np.asarray(b).reshape(-1, 1), axis=1)
    x_tilde = x if b is None else np.append(x, 1.0)
    B = updated_head(A, x_tilde, gold, margin)
    return float(np.linalg.norm(A - B))


def set_distance_lean(W: np.ndarray, b: np.ndarray | None, x: np.ndarray, gold: int, margin: float = 1.0) -> float:
    """The same algorithm without forming A and B: ‖ΔA‖_F = ‖δ‖ ‖x̃‖ in the original's scaling."""
    logits = W @ x if b is None else W @ x + b
    sq = x @ x + (0.0 if b is None else 1.0)
    gaps = (logits - logits[gold] + margin) / sq
    gaps[gold] = 0.0
    return float(np.linalg.norm(minimal_scaled_delta(gaps, gold)) * np.sqrt(sq))


def original_score(distance: float) -> float:
    """The original transform log(1 − ‖ΔA‖_F): NaN past 1 (as NumPy, which warns)."""
    return math.log(1.0 - distance) if distance < 1.0 else (-math.inf if distance == 1.0 else math.nan)


def original_word_score(subword_scores: list[float]) -> float:
    """The original's Python ``min`` over a word's subword scores (NaN-order dependent)."""
    return min(subword_scores)


def set_distances_loop(W: np.ndarray, b: np.ndarray | None, X: np.ndarray, golds: np.ndarray, margin: float = 1.0):
    """The original-style baseline: one problem after another."""
    return np.array([set_distance(W, b, x, int(g), margin) for x, g in zip(X, golds)])
