"""The statistics options of a two-group association test, as one value.

WEAT, SC-WEAT and the RPAM Test share a permutation p-value and (WEAT, RPAM) a bootstrap CI of d. Their
kernels (:func:`jaxassoc.stats.permutation_test`, :func:`jaxassoc.metrics.weat.weat`,
:func:`jaxassoc.metrics.weat.sc_weat`, :func:`jaxassoc.metrics.weat.association_test`,
:func:`jaxassoc.metrics.rpam.rpam_test`) and the suites that run them over a suite
(:func:`jaxassoc.suites.weat.run_weat_experiment`, :func:`jaxassoc.suites.rpam.weat_ws`) take a
:class:`StatsOptions` whole instead of seven keywords. It is frozen and hashable, so it can be a static
argument of ``jax.jit``, and its fields are the one place each default is written: a kernel that takes one
option alone (e.g. ``ddof`` of an effect size, ``confidence`` of a bootstrap) defaults to the field's value,
``StatsOptions.ddof``. The app's ``stats`` config group (:class:`jaxassoc.app.config.StatsConfig`, mutable as
Hydra needs) takes its defaults from here too and gives its options as one value with ``options()``
(docs/methods.md §2).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

ALTERNATIVES = ("greater", "less", "two-sided")
DEFAULT_ALTERNATIVE = "two-sided"
"""The p-value's default sidedness, beside a two-sided CI (docs/methods.md §5.8); the source papers' one-sided
Eq. 4 is ``"greater"``."""
TIES = ("inclusive", "strict")
DEFAULT_TIES = "inclusive"
"""The one default of every test's ``ties``: count the observed arrangement (p >= its resolution)."""

RESAMPLING_UNITS = ("sentence", "word")
"""What SEAT's bootstrap CI of d resamples (``stats.unit``): single sentences, as May et al. 2019, or whole
words with all their sentences (docs/methods.md §8)."""


@dataclass(frozen=True)
class StatsOptions:
    """Options of a two-group association test: the permutation p (``exact_bound``, ``n_permutations``,
    ``alternative``, ``ties``), the bootstrap CI of d (``n_bootstrap``, ``confidence``) and d's SD (``ddof``).

    Frozen and hashable: a static argument of ``jax.jit``, and a safe default argument. Values are checked
    where they are used (:func:`jaxassoc.stats.permutation_test`, the bootstrap, ``ddof`` by the metrics)
    and, in the app, by :class:`jaxassoc.app.config.StatsConfig`. ``dataclasses.replace(options, ...)``
    changes some of them."""

    ddof: int = 1  # 1: sample SD in d (Caliskan et al.); 0: population SD (WEFE)
    exact_bound: int = 1_000_000  # exact enumeration up to this many partitions, else Monte Carlo
    n_permutations: int = 100_000  # Monte Carlo permutations (p resolves to 1 / n_permutations)
    n_bootstrap: int = 10_000  # bootstrap resamples of the CI of d
    confidence: float = 0.95  # CI level
    alternative: str = DEFAULT_ALTERNATIVE  # two-sided | greater | less (the papers' Eq. 4: greater)
    ties: str = DEFAULT_TIES  # inclusive: the observed arrangement counts (p >= 1/N) | strict: Eq. 4 as printed

    def as_dict(self) -> dict[str, Any]:
        """The options as a dict by field name (e.g. the settings columns of a result table)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(StatsOptions)}

    def permutation_dict(self) -> dict[str, Any]:
        """The options of the permutation p and d alone (SC-WEAT's: no bootstrap CI), as a dict by field name."""
        return {k: v for k, v in self.as_dict().items() if k not in ("n_bootstrap", "confidence")}

    def smallest_p(self, n: int, n_x: int) -> float:
        """The smallest p-value :func:`jaxassoc.stats.permutation_test` can report with these options for n
        items, n_x in group X, when the observed arrangement counts (``ties="inclusive"``): 1/C(n, n_x)
        exact, 1/(n_permutations + 1) Monte Carlo, doubled for "two-sided". Eq. 4's strict count
        (``ties="strict"``) can read below it, down to 0, which only says p < this value."""
        partitions = math.comb(n, n_x)
        floor = 1 / partitions if partitions <= self.exact_bound else 1 / (self.n_permutations + 1)
        return min(1.0, 2 * floor) if self.alternative == "two-sided" else floor
