"""The head-differentiable RPAM readout (:mod:`jaxassoc.readouts.rpam_head`, which the examples use) gives the
numbers of ``metric=rpam``: the app job's effect sizes on WEAT-WS equal d recomputed from the model's head."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tolerances import f32_log_softmax, f32_sum

from jaxassoc.app import model_loading
from jaxassoc.app.config import DatasetConfig, ModelConfig, StatsConfig, TemplateConfig, WhiteningConfig
from jaxassoc.app.spec import Job
from jaxassoc.app.tasks import rpam as rpam_task
from jaxassoc.metrics.rpam import rpam_effect_size
from jaxassoc.models import load_model
from jaxassoc.readouts import rpam_head


@pytest.fixture(scope="module")
def folder(tiny_checkpoint):
    # initializer_range 0.5: logits vary by O(1) across targets, so d is not a ratio of cancelling differences;
    # 512 positions: the app packs up to 256 continuation subwords behind a prompt in one row
    return tiny_checkpoint("gpt2", initializer_range=0.5, n_positions=512)


@pytest.mark.slow  # an RPAM app job on a tiny LM per case: ~23 s (issue 38: the default suite's budget)
@pytest.mark.parametrize("swap", [True, False])
def test_app_rpam_effect_sizes_equal_the_head_readout(folder, tmp_path, swap):
    job = Job(
        model=ModelConfig(name="tiny", source=str(folder), batch_size=8),
        metric=rpam_task.RpamMetricConfig(name="rpam", swap_gender_roles=swap),
        dataset=DatasetConfig(name="weat_ws"),
        template=TemplateConfig(name="tp1", text=rpam_head.TP1.text),
        whitening=WhiteningConfig(),
        stats=StatsConfig(n_permutations=100, n_bootstrap=40),
        seed=0,
        output_dir=tmp_path,
        quiet=True,
        cache_dir=None,
    )
    try:
        app = rpam_task.run(job).aggregates.set_index("test")["effect_size"]
    finally:
        model_loading._load_language_model.cache_clear()
    model = load_model(folder)
    specs = rpam_head.weat_ws_tests(swap_gender_roles=swap)
    assert sorted(specs) == sorted(t for t in app.index if t != "all")
    for tid in ("C6", "C7", "C9"):  # C7: multi-token attributes (App. E continuations) with the roles swapped
        spec = specs[tid]
        states = rpam_head.rpam_test_states(model, spec)
        d = rpam_effect_size(*rpam_head.head_rpam_inputs(model.head, states), n_x=len(spec.x), n_a=len(spec.a))
        np.testing.assert_allclose(float(d), app[tid], rtol=1e-4, atol=1e-5, err_msg=tid)
    assert bool(jnp.any(rpam_head.rpam_test_states(model, specs["C7"]).cont_valid))


def test_a_soft_capped_head_gives_the_capped_logits_and_keeps_its_cap():
    """Gemma 2's final soft-cap: the readout's first-token logits and continuation probabilities are those of
    ``head_logits`` (which applies the cap), and ``as_head`` keeps the model's cap."""
    from jaxassoc.models.base import Head
    from jaxassoc.models.heads import head_logits

    rng = np.random.default_rng(0)
    W, b = jnp.asarray(rng.normal(size=(11, 4)) * 3), jnp.asarray(rng.normal(size=11))
    capped = Head(W=W, b=b, softcap=2.0)
    states = rpam_head.HeadStates(
        first_hidden=jnp.asarray(rng.normal(size=(3, 4))),
        first_ids=jnp.array([1, 5]),
        cont_hidden=jnp.asarray(rng.normal(size=(1, 2, 4))),
        cont_ids=jnp.array([[7, 2]]),
        cont_valid=jnp.array([[True, True]]),
        cont_target=jnp.array([0]),
        cont_attribute=jnp.array([1]),
    )
    first, cont = rpam_head.head_rpam_inputs(capped, states)
    # the same float32 head_logits (a dot of 4, capped at 2) in another program: f32_sum(4, max|W||x|),
    # absolute; rtol=1e-6 had been below it for small logits
    bound = float(jnp.abs(W).max() * jnp.abs(states.first_hidden).max()) + float(jnp.abs(b).max())
    ref_first = head_logits(capped, states.first_hidden)[:, [1, 5]]
    np.testing.assert_allclose(first, ref_first, rtol=0, atol=f32_sum(5, bound))
    logp = jnp.log(jax.nn.softmax(head_logits(capped, states.cont_hidden[0]), -1))
    # probabilities over 11 tokens of capped logits (|z| ≤ 2, |log p| ≤ log 11 + 4): relative
    # expm1(f32_log_softmax(11, f32_sum(5, ·), 6.5)) (rtol=1e-6 had been below it)
    rtol = float(np.expm1(f32_log_softmax(11, f32_sum(5, bound), 6.5)))
    np.testing.assert_allclose(cont[0, 1], np.exp(logp[[0, 1], [7, 2]]).mean(), rtol=rtol)
    uncapped, _ = rpam_head.head_rpam_inputs(capped._replace(softcap=None), states)
    assert np.abs(np.asarray(first) - np.asarray(uncapped)).max() > 0.1  # the cap bites
