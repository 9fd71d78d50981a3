"""Tests too small to say much: the caveat every two-group association test carries (docs/methods.md §2.2).

A permutation test on n items can only reach p = 1/C(n, n_x) (exact, the observed arrangement counted),
and a bootstrap over a handful of words resamples a few distinct sets: with two words a set, a 95 % CI
of d is the range of a few values and covers nothing reliably. A test is *small* when any word set has
fewer than :data:`MIN_SET_WORDS` words or the test has fewer than :data:`MIN_PARTITIONS` partitions; its
rows say so, with the smallest p they can reach and, where it has one, that its bootstrap CI is unreliable
(the CI stays in the results, for inspection, beside that warning). A Monte Carlo test whose draws cannot
reach p below 1/:data:`MIN_PARTITIONS` (19 draws or fewer: p >= 1/(n+1)) says so too.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

MIN_SET_WORDS = 5
"""Fewer words than this in any set makes a test small."""
MIN_PARTITIONS = 20
"""Fewer re-partitions than this (C(n, n_x)) makes a test small: its p cannot go below 1/20 = 0.05."""


def partitions(n_permuted: tuple[int, int]) -> int:
    """C(n_x + n_y, n_x): the re-partitions of two permuted groups of sizes ``n_permuted``."""
    return math.comb(sum(n_permuted), n_permuted[0])


def is_small(sizes: Mapping[str, int], n_permuted: tuple[int, int] | None = None) -> bool:
    """True when a set of ``sizes`` (set name -> words) is below :data:`MIN_SET_WORDS` or the two permuted
    groups of ``n_permuted`` (their sizes; None: no permutation test) have fewer than
    :data:`MIN_PARTITIONS` partitions."""
    few = n_permuted is not None and partitions(n_permuted) < MIN_PARTITIONS
    return few or min(sizes.values()) < MIN_SET_WORDS


def caveat(
    sizes: Mapping[str, int], n_permuted: tuple[int, int] | None = None, p_min: float | None = None, *, ci: bool
) -> str:
    """'' for a test that is not small (:func:`is_small`); else one sentence for the tables and the log:
    the set sizes, the partitions and the smallest p they allow (``p_min``, from
    :func:`jaxassoc.stats.smallest_p`), and, with ``ci``, that the bootstrap CI is unreliable. A test that is
    not small but whose ``p_min`` is 1/20 or more (a Monte Carlo p from too few draws) says that instead."""
    if not is_small(sizes, n_permuted):
        if p_min is not None and p_min >= 1 / MIN_PARTITIONS:  # Monte Carlo with a handful of draws
            return f"too few permutations drawn: p cannot go below {p_min:.3g}; raise stats.n_permutations"
        return ""
    text = "small test (words: " + ", ".join(f"{name} {n}" for name, n in sizes.items())
    if n_permuted is not None:
        text += f"; {partitions(n_permuted):,} partitions"
    text += ")"
    if p_min is not None:
        text += f": p cannot go below {p_min:.3g}"
    return text + ("; its bootstrap CI is unreliable" if ci else "")
