"""The statistics options of a two-group association test, as one value.

WEAT, SC-WEAT and the RPAM Test share a permutation p-value and (WEAT, RPAM) a bootstrap CI of d; the
readouts that run them over a suite (:func:`jaxassoc.readouts.weat.run_weat_experiment`,
:func:`jaxassoc.readouts.rpam.weat_ws`) take a :class:`StatsOptions` whole instead of seven keywords. The
app's ``stats`` config group extends it (:class:`jaxassoc.app.config.StatsConfig`), so its defaults are
these (docs/methods.md §2).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from jaxassoc.stats.permutation import DEFAULT_ALTERNATIVE, DEFAULT_TIES, smallest_p

RESAMPLING_UNITS = ("sentence", "word")
"""What SEAT's bootstrap CI of d resamples (``stats.unit``): single sentences, as May et al. 2019, or whole
words with all their sentences (docs/methods.md §8)."""


@dataclass
class StatsOptions:
    """Options of a two-group association test: the permutation p (``exact_bound``, ``n_permutations``,
    ``alternative``, ``ties``), the bootstrap CI of d (``n_bootstrap``, ``confidence``) and d's SD (``ddof``)."""

    ddof: int = 1  # 1: sample SD in d (Caliskan et al.); 0: population SD (WEFE)
    exact_bound: int = 1_000_000  # exact enumeration up to this many partitions, else Monte Carlo
    n_permutations: int = 100_000  # Monte Carlo permutations (p resolves to 1 / n_permutations)
    n_bootstrap: int = 10_000  # bootstrap resamples of the CI of d
    confidence: float = 0.95  # CI level
    alternative: str = DEFAULT_ALTERNATIVE  # two-sided | greater | less (the papers' Eq. 4: greater)
    ties: str = DEFAULT_TIES  # inclusive: the observed arrangement counts (p >= 1/N) | strict: Eq. 4 as printed

    def as_kwargs(self) -> dict[str, Any]:
        """The options as keywords of :func:`jaxassoc.metrics.weat.weat` and :func:`jaxassoc.metrics.rpam.rpam_test`
        (a subclass's own fields, e.g. the app's ``alpha``, left out)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(StatsOptions)}

    def smallest_p(self, n: int, n_x: int) -> float:
        """The smallest p these options let a test of n items, n_x in group X, report (:func:`smallest_p`)."""
        return smallest_p(
            n, n_x, exact_bound=self.exact_bound, n_permutations=self.n_permutations, alternative=self.alternative
        )

    def permutation_kwargs(self) -> dict[str, Any]:
        """The options of the permutation p alone: keywords of :func:`jaxassoc.metrics.weat.sc_weat`."""
        return {k: v for k, v in self.as_kwargs().items() if k not in ("n_bootstrap", "confidence")}
