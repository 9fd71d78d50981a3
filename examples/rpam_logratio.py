"""A user-defined metric, registered as a plugin: the log-ratio RPAM Test (``metric=rpam_logratio``).

RPAM's association (Hodel et al. 2026, Eq. 2) is a difference of mean probabilities,
s(t) = mean_A p(a, t) − mean_B p(b, t). This variant takes their log-ratio instead,

    s_log(t) = log mean_{a∈A} p(a, t) − log mean_{b∈B} p(b, t)
             = LSE_{a∈A}(z_a + log c_a) − LSE_{b∈B}(z_b + log c_b) − log(|A| / |B|),

with z the first-token logits and c the App. E continuation factors: the softmax over C cancels, so the
score needs no normalisation choice, and it does not shrink with the attribute probabilities. d is the
WEAT effect size of s_log over X ∪ Y (Eq. 1; ddof from ``stats.ddof``), p the permutation test of
:func:`jaxassoc.stats.permutation_test` on s_log (``stats.alternative``, two-sided by default). Not a
published metric: an example of extending jaxassoc from user code, through :mod:`jaxassoc.plugin` only;
its kernel is jit-compiled and differentiable like the built-in ones.

Use it from the command line without editing jaxassoc::

    PYTHONPATH=examples JAXASSOC_PLUGINS=rpam_logratio \\
        jaxassoc -m metric=rpam_logratio dataset=weat_ws template=tp1 metric.swap_gender_roles=true,false
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
from jaxtyping import Array, Float

from jaxassoc import stats
from jaxassoc.metrics import effect_size
from jaxassoc.plugin import ConfigError, Job, JobResult, MetricConfig, register_metric
from jaxassoc.readouts.rpam_prompts import PromptTemplate, rpam_inputs, tokenize_attributes

SUITES = ("weat_ws", "weat_caliskan2017")
GENDER_ROLE_TESTS = ("C7", "C8")


@functools.partial(jax.jit, static_argnames=("n_a",))
def log_ratio_scores(
    first_logits: Float[Array, "T C"], continuation: Float[Array, "T C"], *, n_a: int
) -> Float[Array, " T"]:
    """s_log(t) for targets (rows) and attributes A then B (columns); see the module docstring."""
    logp = first_logits + jnp.log(continuation)
    n_b = first_logits.shape[1] - n_a
    return jax.nn.logsumexp(logp[:, :n_a], axis=1) - jax.nn.logsumexp(logp[:, n_a:], axis=1) - jnp.log(n_a / n_b)


@functools.partial(jax.jit, static_argnames=("n_x", "n_a", "ddof"))
def log_ratio_effect_size(
    first_logits: Float[Array, "T C"],
    continuation: Float[Array, "T C"],
    *,
    n_x: int,
    n_a: int,
    ddof: int = stats.StatsOptions.ddof,
) -> Float[Array, ""]:
    """d of s_log over X (the first ``n_x`` rows) and Y: a scalar to differentiate."""
    s = log_ratio_scores(first_logits, continuation, n_a=n_a)
    return effect_size(s[:n_x], s[n_x:], ddof=ddof)


@dataclasses.dataclass
class LogRatioConfig(MetricConfig):
    swap_gender_roles: bool = True  # C7/C8: gender terms as targets, as RPAM's App. B
    tests: list[str] = dataclasses.field(default_factory=list)  # test ids to run (empty: all)


def run(job: Job) -> JobResult:
    """One WEAT suite on a causal LM: s_log per target, d and permutation p per test."""
    cfg, suite = job.metric, job.dataset.name
    if suite not in SUITES:
        raise ConfigError(f"metric=rpam_logratio needs a WEAT suite as dataset ({SUITES}); got {suite!r}")
    template = PromptTemplate(
        job.template.name, job.template.text or "These words are associated: {target} and", job.template.quote
    )
    model = job.language_model()
    tests = [t for t in job.weat_suite().tests if not cfg.tests or t.id in cfg.tests]
    unknown = set(cfg.tests) - {t.id for t in tests}
    if unknown:
        raise ConfigError(f"metric.tests names {sorted(unknown)}, which are not in {suite!r}")
    rows, items = [], []
    for test, key in zip(tests, jax.random.split(job.key(), len(tests))):
        if cfg.swap_gender_roles and test.id in GENDER_ROLE_TESTS:
            test = test.with_roles_swapped()
        x, y, a, b = test.targets_x, test.targets_y, test.attributes_a, test.attributes_b
        tokens = tokenize_attributes(model.tokenizer, a + b, template)
        inputs = rpam_inputs(model, x + y, tokens, template, add_bos=job.model.add_bos, batch_size=job.model.batch_size)
        s = log_ratio_scores(jnp.asarray(inputs.first_logits), jnp.asarray(inputs.continuation), n_a=len(a))
        perm = stats.permutation_test(key, s, len(x), options=job.stats.options())
        rows.append(
            {
                "test": test.id,
                "effect_size": float(effect_size(s[: len(x)], s[len(x) :], ddof=job.stats.ddof)),
                "p_value": float(perm.p_value),
                "p_exact": bool(perm.exact),
                "swap_gender_roles": cfg.swap_gender_roles,
                "n_targets": len(x) + len(y),
            }
        )
        items += [
            {"test": test.id, "target": t, "group": "X" if i < len(x) else "Y", "score": float(v)}
            for i, (t, v) in enumerate(zip(x + y, np.asarray(s)))
        ]
    provenance = {**job.provenance(model), "rpam_logratio_version": "1"}
    return JobResult(items=pd.DataFrame(items), aggregates=pd.DataFrame(rows), provenance=provenance)


register_metric(
    "rpam_logratio",
    run=run,
    config=LogRatioConfig,
    model_kinds=("causal",),
    description="log-ratio RPAM Test (user-defined example plugin)",
    # the shared options it reads: the app refuses any other one that is set
    uses={"stats.ddof", "stats.exact_bound", "stats.n_permutations", "stats.ties", "stats.alternative", "template"},
)
