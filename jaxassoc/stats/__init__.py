"""Statistics shared by every metric (docs/methods.md §2 permutation test, §5): jit-compiled, explicit PRNG keys.

- correlations (checked against ``scipy.stats``): ``pearson``, ``spearman``, ``kendall_tau_b``,
  ``rankdata`` and the ``*_test`` variants with scipy's two-sided p-values;
- binary classification: ``precision``, ``recall``, ``f1_score``, ``precision_at_k``;
- percentile bootstrap: ``bootstrap_ci`` (rows resampled jointly), ``bootstrap_ci_groups`` (stratified),
  ``paired_bootstrap`` (difference of two statistics on the same resamples); ``cluster_bootstrap_means``
  (many means at once, clusters of rows resampled together);
- permutation test of a two-group statistic, exact or Monte Carlo: ``permutation_test``,
  ``permutation_test_batch``, with WEAT's ``difference_of_sums`` as the default statistic (SC-WEAT: ``difference_of_means``);
- multiple comparisons: ``multiple.holm``, ``multiple.benjamini_hochberg``;
- ``StatsOptions``: the options of a permutation test and bootstrap CI (WEAT, SC-WEAT, RPAM Test) as one frozen,
  hashable value, which those kernels take whole (``options=StatsOptions(n_permutations=10_000)``).
"""

from jaxassoc.stats import multiple, small_samples
from jaxassoc.stats.bootstrap import (
    BootstrapResult,
    PairedBootstrapResult,
    bootstrap_ci,
    bootstrap_ci_groups,
    paired_bootstrap,
)
from jaxassoc.stats.classification import f1_score, precision, precision_at_k, recall
from jaxassoc.stats.cluster_bootstrap import ClusterBootstrapResult, cluster_bootstrap_means, cluster_codes
from jaxassoc.stats.correlation import (
    CorrelationResult,
    kendall_tau_b,
    kendall_test,
    pearson,
    pearson_test,
    rankdata,
    spearman,
    spearman_test,
)
from jaxassoc.stats.options import DEFAULT_ALTERNATIVE, DEFAULT_TIES, StatsOptions
from jaxassoc.stats.permutation import (
    PermutationResult,
    difference_of_means,
    difference_of_sums,
    permutation_test,
    permutation_test_batch,
    smallest_p,
)

__all__ = [
    "DEFAULT_ALTERNATIVE",
    "DEFAULT_TIES",
    "BootstrapResult",
    "ClusterBootstrapResult",
    "CorrelationResult",
    "PairedBootstrapResult",
    "PermutationResult",
    "StatsOptions",
    "bootstrap_ci",
    "bootstrap_ci_groups",
    "cluster_bootstrap_means",
    "cluster_codes",
    "difference_of_means",
    "difference_of_sums",
    "f1_score",
    "kendall_tau_b",
    "kendall_test",
    "multiple",
    "paired_bootstrap",
    "pearson",
    "pearson_test",
    "permutation_test",
    "permutation_test_batch",
    "precision",
    "precision_at_k",
    "rankdata",
    "recall",
    "small_samples",
    "smallest_p",
    "spearman",
    "spearman_test",
]
