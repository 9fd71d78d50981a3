"""ILPS / ILPS* against the authors' procedure re-run with torch masked LMs (tiny random RoBERTa and BERT):
probabilities from torch softmax, token classes from the token strings, one forward pass per subword."""

import family_specs
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from tolerances import f32_log_softmax, f32_sum

from jaxassoc.errors import ConfigError, InputError
from jaxassoc.metrics.ilps import base_ilps, chain_rule_logprob, ilps_star, word_initial_mask

TEMPLATE = "The <group> is <mask>."
WORDS = ["music", "engineer", "pleasantly", "associated"]


def _masked_prompt(tok, group: str, n_sub: int) -> list[int]:
    text = TEMPLATE.replace(" <mask>", (" " + tok.mask_token) * n_sub).replace("<group>", group)
    return tok.encode(text)


def _trait_ids(tok, family: str, word: str) -> list[int]:
    return tok.encode((" " + word) if family == "roberta" else word)[1:-1]


def _reference_logprob(model, tok, family, ids, trait_ids):
    """mod_ilps.get_log_prob: softmax, token classes by string prefix, write each subword in."""
    ids = torch.tensor([ids])
    masks = (ids[0] == tok.mask_token_id).nonzero().flatten().tolist()
    total = 0.0
    for i, t in enumerate(trait_ids):
        with torch.no_grad():
            probs = torch.softmax(model(ids).logits[0, masks[i]], -1).double().numpy()
        names = tok.convert_ids_to_tokens(list(range(len(tok))))
        if family == "roberta":
            z_first = sum(p for p, n in zip(probs, names) if n.startswith("Ġ"))
            z_rest = sum(p for p, n in zip(probs, names) if not n.startswith("Ġ"))
        else:
            z_rest = sum(p for p, n in zip(probs, names) if n.startswith("##"))
            z_first = sum(p for p, n in zip(probs, names) if not n.startswith("##"))
        total += np.log(probs[t] / (z_first if i == 0 else z_rest))
        ids[0, masks[i]] = t
    return total


def _step_logits(model, tok, ids, trait_ids, S):
    """The logits our kernels read: at mask i after writing subwords < i in, padded to S steps."""
    ids = torch.tensor([ids])
    masks = (ids[0] == tok.mask_token_id).nonzero().flatten().tolist()
    rows = []
    for i, t in enumerate(trait_ids):
        with torch.no_grad():
            rows.append(model(ids).logits[0, masks[i]].numpy())
        ids[0, masks[i]] = t
    rows += [np.zeros_like(rows[0])] * (S - len(rows))
    return np.stack(rows)


@pytest.mark.parametrize("family,marker", [("roberta", "bpe"), ("bert", "wordpiece")])
def test_ilps_star_and_base_ilps_match_the_original_procedure(family, marker):
    model, tok = family_specs.build_torch(family_specs.tiny(family, 3))
    mask = word_initial_mask(tok, marker)
    S = 4
    traits = [_trait_ids(tok, family, w) for w in WORDS]
    assert max(len(t) for t in traits) > 1  # at least one multi-subword trait
    traits = [t[:S] for t in traits]
    logits = {g: [] for g in ("doctor", "person")}
    refs = {g: [] for g in logits}
    for g in logits:
        for t in traits:
            ids = _masked_prompt(tok, g, len(t))
            logits[g].append(_step_logits(model, tok, ids, t, S))
            refs[g].append(_reference_logprob(model, tok, family, ids, t))
    tokens = np.array([t + [0] * (S - len(t)) for t in traits])
    valid = np.array([[i < len(t) for i in range(S)] for t in traits])
    ours = ilps_star(
        jnp.asarray(np.stack(logits["doctor"])),
        jnp.asarray(np.stack(logits["person"])),
        jnp.asarray(tokens),
        jnp.asarray(valid),
        jnp.asarray(mask),
    )
    # the same float32 logits on both sides; each step's log-softmax over V (and the renormalisation over
    # the word-initial tokens, another) within f32_log_softmax(V, 0, log V + 2·max|logit|), ≤ S steps, two
    # prompts: 4·S of them (rtol=1e-4 with atol=1e-5 had been ~1.5x that for |ILPS*| ~ 5)
    all_logits = np.stack(logits["doctor"] + logits["person"])
    V, top = all_logits.shape[-1], float(np.abs(all_logits).max())
    step = f32_log_softmax(V, 0.0, np.log(V) + 2 * top)
    np.testing.assert_allclose(
        np.asarray(ours), np.array(refs["doctor"]) - np.array(refs["person"]), rtol=0, atol=4 * S * step
    )
    # base ILPS: the first subword's plain softmax probability at the first mask
    first = base_ilps(
        jnp.asarray(np.stack(logits["doctor"])[:, 0]),
        jnp.asarray(np.stack(logits["person"])[:, 0]),
        jnp.asarray(tokens[:, 0]),
    )
    ref_first = [
        np.log(torch.softmax(torch.tensor(a[0]), -1)[t[0]].item())
        - np.log(torch.softmax(torch.tensor(b[0]), -1)[t[0]].item())
        for a, b, t in zip(logits["doctor"], logits["person"], traits)
    ]
    np.testing.assert_allclose(np.asarray(first), ref_first, rtol=0, atol=4 * step)  # one step, two prompts


def test_word_initial_mask_classes():
    class Fake:
        tokens = ["<s>", "Ġthe", "the", "##ing", "Ġ", "▁a"]

        def __len__(self):
            return len(self.tokens)

        def convert_ids_to_tokens(self, ids):
            return [self.tokens[i] for i in ids]

    np.testing.assert_array_equal(word_initial_mask(Fake(), "bpe"), [0, 1, 0, 0, 1, 0])
    np.testing.assert_array_equal(word_initial_mask(Fake(), "wordpiece"), [1, 1, 1, 0, 1, 1])
    np.testing.assert_array_equal(word_initial_mask(Fake(), "sentencepiece", vocab_size=8), [0, 0, 0, 0, 0, 1, 0, 0])
    with pytest.raises(ConfigError, match="marker kind"):
        word_initial_mask(Fake(), "bytes")
    with pytest.raises(InputError, match="smaller"):
        word_initial_mask(Fake(), "bpe", vocab_size=3)


def test_chain_rule_without_renormalisation_is_the_plain_sum_and_logits_equal_logprobs():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(3, 2, 11)) * 3
    tokens = rng.integers(0, 11, (3, 2))
    valid = np.array([[1, 1], [1, 0], [1, 1]], bool)
    mask = rng.random(11) < 0.5
    logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    plain = np.asarray(
        chain_rule_logprob(
            jnp.asarray(logits), jnp.asarray(tokens), jnp.asarray(valid), jnp.asarray(mask), renormalize=False
        )
    )
    ref = [sum(logp[n, i, tokens[n, i]] for i in range(2) if valid[n, i]) for n in range(3)]
    # float32 copies of the logits (f32_sum(1, max|z|) each), a log-softmax over 11 per step, 2 steps
    # (rtol=1e-5 had been ~8x that); renormalised over the mask, from logits or log p: 2 more per step
    step = f32_log_softmax(11, f32_sum(1, float(np.abs(logits).max())), float(np.abs(logp).max()))
    np.testing.assert_allclose(plain, ref, rtol=0, atol=2 * step)
    a = chain_rule_logprob(jnp.asarray(logits), jnp.asarray(tokens), jnp.asarray(valid), jnp.asarray(mask))
    b = chain_rule_logprob(jnp.asarray(logp), jnp.asarray(tokens), jnp.asarray(valid), jnp.asarray(mask))
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=0, atol=4 * step)


def test_ilps_star_refuses_mismatched_masks_and_empty_traits():
    logits = jnp.zeros((2, 3, 10))
    tokens = jnp.zeros((2, 3), int)
    with pytest.raises(InputError, match="vocab_size"):
        ilps_star(logits, logits, tokens, jnp.ones((2, 3), bool), jnp.ones(9, bool))
    with pytest.raises(InputError, match="at least one subword"):
        ilps_star(logits, logits, tokens, jnp.zeros((2, 3), bool), jnp.ones(10, bool))
