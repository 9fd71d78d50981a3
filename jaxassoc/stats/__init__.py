"""Statistics shared by every metric (METHODS.md §2 permutation test, §5): jit-compiled, explicit PRNG keys.

Correlations (checked against ``scipy.stats``), binary classification scores, percentile bootstrap
(joint, stratified and paired) and the exact / Monte Carlo permutation test of WEAT-style statistics.
"""

from jaxassoc.stats.classification import f1_score, precision, precision_at_k, recall
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
from jaxassoc.stats.permutation import (
    PermutationResult,
    difference_of_sums,
    permutation_test,
    permutation_test_batch,
)

__all__ = [
    "CorrelationResult",
    "PermutationResult",
    "difference_of_sums",
    "f1_score",
    "permutation_test",
    "permutation_test_batch",
    "precision",
    "precision_at_k",
    "recall",
    "kendall_tau_b",
    "kendall_test",
    "pearson",
    "pearson_test",
    "rankdata",
    "spearman",
    "spearman_test",
]
