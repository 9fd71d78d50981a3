"""Multiple-comparison corrections of a family of p-values (docs/methods.md §5.9).

- ``holm``: Holm's (1979) step-down adjustment; controls the family-wise error rate.
- ``bh``: Benjamini & Hochberg's (1995) step-up adjustment (q-values); controls the false discovery rate.

Both take the p-values of one family (the tests of one table of one job) and return adjusted ones in the
same order; a NaN p (an undefined test) stays NaN and does not count towards the family's size.
"""

from __future__ import annotations

import numpy as np
from jaxtyping import ArrayLike, Float

CORRECTIONS = ("none", "holm", "bh")
COLUMN_SUFFIX = {"holm": "_holm", "bh": "_bh"}
"""The adjusted column of ``p_value`` is ``p_value_holm`` or ``p_value_bh``."""


def holm(p: Float[ArrayLike, " m"]) -> Float[np.ndarray, " m"]:
    """Holm's step-down p: sorted ascending, p_(i) (m - i + 1) made monotone by a running max, capped at 1."""
    return _adjust(p, step_down=True)


def benjamini_hochberg(p: Float[ArrayLike, " m"]) -> Float[np.ndarray, " m"]:
    """Benjamini–Hochberg q: sorted ascending, p_(i) m / i made monotone by a running min from the top,
    capped at 1."""
    return _adjust(p, step_down=False)


def adjust(p: Float[ArrayLike, " m"], method: str) -> Float[np.ndarray, " m"]:
    """``holm(p)`` or ``benjamini_hochberg(p)`` by name (``"holm"``, ``"bh"``)."""
    if method == "holm":
        return holm(p)
    if method == "bh":
        return benjamini_hochberg(p)
    raise ValueError(f"multiple-comparison correction {method!r} is not one of 'holm', 'bh'")


def _adjust(p: Float[ArrayLike, " m"], *, step_down: bool) -> Float[np.ndarray, " m"]:
    p = np.asarray(p, dtype=np.float64)
    out = np.full(p.shape, np.nan)
    defined = np.flatnonzero(~np.isnan(p))
    m = len(defined)
    if m == 0:
        return out
    order = defined[np.argsort(p[defined], kind="stable")]
    rank = np.arange(1, m + 1)
    if step_down:
        adjusted = np.maximum.accumulate(p[order] * (m - rank + 1))
    else:
        adjusted = np.minimum.accumulate((p[order] * m / rank)[::-1])[::-1]
    out[order] = np.minimum(adjusted, 1.0)
    return out
