"""The masked-LM stereotype pipeline (jaxassoc.readouts.stereotypes_mlm) against the authors' procedure
re-run with transformers' BertForMaskedLM / RobertaForMaskedLM on tiny checkpoints: the sentence tokenised
whole, the trait's tokens masked, one torch forward per subword written in left to right, the head input
computed by hand (dense -> activation -> LayerNorm), probabilities by torch softmax, token classes from the
token strings, and SeT by the NumPy re-implementation of the original per-problem algorithm."""

import math

import family_specs
import numpy as np
import pytest
import torch
import transformers
from reference_set_numpy import set_distance

from jaxassoc.app.tasks.stereotypes import usable_templates
from jaxassoc.data import load_abc
from jaxassoc.errors import ConfigError, DataError, InputError
from jaxassoc.models import load_model
from jaxassoc.readouts.stereotypes_mlm import build_masked_problems
from jaxassoc.suites.stereotypes_mlm import score_masked

ABC = load_abc()


@pytest.fixture(scope="module")
def tiny(tiny_checkpoint):
    folders = {family: tiny_checkpoint(family, 4) for family in ("roberta", "bert")}
    return {family: (load_model(f), family_specs.load_torch(family, f)) for family, f in folders.items()}


def _head_input(model, family, h):
    """The MLM head transform by hand: dense -> activation -> LayerNorm."""
    if family == "roberta":
        lm = model.lm_head
        return lm.layer_norm(torch.nn.functional.gelu(lm.dense(h)))
    t = model.cls.predictions.transform
    return t.LayerNorm(transformers.activations.ACT2FN[model.config.hidden_act](t.dense(h)))


def _reference(model, tok, family, before, word, after):
    """(log p(first subword), ILPS*'s renormalised log P(word), per-subword SeT distances) as the original."""
    ids = tok(before + word + after)["input_ids"]
    trait = tok.encode((" " if before.endswith(" ") else "") + word, add_special_tokens=False)
    found = [k for k in range(len(ids)) if ids[k : k + len(trait)] == trait]
    assert len(found) == 1, (before, word, after)
    pos = found[0]
    ids[pos : pos + len(trait)] = [tok.mask_token_id] * len(trait)
    out_emb = model.get_output_embeddings()
    W, b = out_emb.weight.detach().double().numpy(), out_emb.bias.detach().double().numpy()
    names = tok.convert_ids_to_tokens(list(range(len(tok))))
    if family == "roberta":
        initial = np.array([n.startswith("Ġ") for n in names])
    else:
        initial = np.array([not n.startswith("##") for n in names])
    first, chain, distances = None, 0.0, []
    for i, t in enumerate(trait):
        with torch.no_grad():
            out = model(torch.tensor([ids]), output_hidden_states=True)
            x = _head_input(model, family, out.hidden_states[-1][0, pos + i])
        x = x.double().numpy()
        np.testing.assert_allclose(W @ x + b, out.logits[0, pos + i].double().numpy(), rtol=1e-4, atol=1e-4)
        probs = torch.softmax(out.logits[0, pos + i].double(), -1).numpy()
        first = np.log(probs[t]) if i == 0 else first
        chain += np.log(probs[t] / probs[initial if i == 0 else ~initial].sum())
        distances.append(set_distance(W, b, x, t))
        ids[pos + i] = t
    return first, chain, distances


def _log1m(d):
    return math.log1p(-d) if d < 1 else (-math.inf if d == 1 else math.nan)


TEMPLATES = ["The <sgroup> is <mask>.", "The <mask> people are <pgroup>.", "<cpgroup> are more <mask> than others."]
GROUPS = {
    "<sgroup>": ["doctor", "Asian person"],
    "<pgroup>": ["doctors", "immigrants"],
    "<cpgroup>": ["Doctors", "Asian people"],
}


@pytest.mark.parametrize("family", ["roberta", "bert"])
def test_masked_pipeline_matches_the_original_procedure_in_torch(tiny, family):
    ours, ref = tiny[family]
    tok = ours.tokenizer
    words = ["warm", "poor", "self-assured"] if family == "roberta" else ["warm", "poor", "music"]
    assert max(len(tok.encode(" " + w, add_special_tokens=False)) for w in words) > 2  # write-in steps
    for template in TEMPLATES:
        slot = ABC.slot_of(template)
        default = score_masked(ours, ABC, template, groups=GROUPS[slot], words=words, batch_size=4)
        parity = score_masked(
            ours,
            ABC,
            template,
            groups=GROUPS[slot],
            words=words,
            batch_size=4,
            set_transform="log1m",
            set_nan_policy="python",
        )
        terms = {}
        for filler in [*GROUPS[slot], ABC.priors[slot]]:
            before, after = template.replace(slot, filler).split("<mask>")
            for w in words:
                terms[filler, w] = _reference(ref, tok, family, before, w, after)
        for g in GROUPS[slot]:
            for w in words:
                (f_g, c_g, d_g), (f_p, c_p, d_p) = terms[g, w], terms[ABC.priors[slot], w]
                row = default[(default.group == g) & (default.word == w)].iloc[0]
                assert row.ilps == pytest.approx(f_g - f_p, abs=2e-4)
                assert row.ilps_star == pytest.approx(c_g - c_p, abs=2e-4)
                assert row.set == pytest.approx(max(d_p) - max(d_g), abs=2e-5)
                assert row.set_distance_max == pytest.approx(max(d_g), rel=1e-4)
                prow = parity[(parity.group == g) & (parity.word == w)].iloc[0]
                expected = min(_log1m(d) for d in d_g) - min(_log1m(d) for d in d_p)  # Python's min
                assert prow.set == pytest.approx(expected, abs=2e-5)
                assert prow.ilps == row.ilps


def test_each_write_in_step_is_one_batched_call(tiny, monkeypatch):
    import jaxassoc.readouts.stereotypes_mlm as mlm

    model = tiny["roberta"][0]
    calls = []
    original = mlm.run_batched

    def counting(fn, params, sequences, **kw):
        calls.append(sequences)
        return original(fn, params, sequences, **kw)

    monkeypatch.setattr(mlm, "run_batched", counting)
    words = ["warm", "self-assured"]
    score_masked(model, ABC, "The <sgroup> is <mask>.", groups=["doctor"], words=words)
    lengths = [len(model.tokenizer.encode(" " + w, add_special_tokens=False)) for w in words]
    assert len(calls) == max(lengths)  # one call per step, never one per problem
    assert [len(c) for c in calls] == [2 * sum(n > i for n in lengths) for i in range(max(lengths))]
    mask_id = model.vocab.mask_id
    # step i: i subwords written in, the rest still masked
    assert [c[-1].count(mask_id) for c in calls] == list(range(max(lengths), 0, -1))


def test_prompt_ids_equal_the_tokenised_sentence(tiny):
    for family in ("roberta", "bert"):
        tok = tiny[family][0].tokenizer
        problems = build_masked_problems(
            tok, ABC, "The <mask> people are <pgroup>.", ["doctors"], ["warm"], mask_id=tok.mask_token_id
        )
        ids, start = list(problems.prompts[0]), problems.mask_starts[0]
        trait = problems.trait_tokens[0]
        ids[start : start + len(trait)] = trait
        assert ids == tok("The warm people are doctors.")["input_ids"]
        assert problems.fillers == ["doctors", "people"]


def test_every_template_is_usable_by_a_masked_lm():
    assert len(usable_templates(ABC, "masked")) == 35
    assert len(usable_templates(ABC, "causal")) == 33


def test_bad_templates_traits_and_models(tiny, tiny_checkpoint):
    bert = tiny["bert"][0]
    with pytest.raises(DataError, match="The <sgroup> is nice"):
        score_masked(bert, ABC, "The <sgroup> is nice.", words=["warm"])  # no mask
    with pytest.raises(DataError, match="People are <mask>"):
        score_masked(bert, ABC, "People are <mask>.", words=["warm"])  # no group slot
    with pytest.raises(ConfigError, match="exactly one <mask>"):
        score_masked(bert, ABC, "<mask> <sgroup> is <mask>.", groups=["doctor"], words=["warm"])
    with pytest.raises(InputError, match="'zealous'.*unknown token"):  # the tiny WordPiece lacks 'z'
        score_masked(bert, ABC, "The <sgroup> is <mask>.", groups=["doctor"], words=["warm", "zealous"])
    with pytest.raises(InputError, match="no trait words"):
        score_masked(bert, ABC, "The <sgroup> is <mask>.", groups=["doctor"], words=[])
    encoder = load_model(tiny_checkpoint("bert-encoder"))
    with pytest.raises(ConfigError, match="no MLM head"):
        score_masked(encoder, ABC, "The <sgroup> is <mask>.", groups=["doctor"], words=["warm"])
    causal = load_model(tiny_checkpoint("gpt2"))
    with pytest.raises(ConfigError, match="needs a masked LM"):
        score_masked(causal, ABC, "The <sgroup> is <mask>.", groups=["doctor"], words=["warm"])


def test_prompts_on_a_real_wordpiece_vocabulary_equal_the_tokenised_sentences():
    """The embedded all-MiniLM-L6-v2 tokenizer (BERT's uncased 30,522 WordPieces; the model itself has no
    MLM head): every template, every trait word, no [UNK]; the prompt with the trait written in is the
    tokenised sentence."""
    from jaxassoc.readouts.stereotypes import default_words
    from jaxassoc.resources import minilm_dir

    tok = transformers.AutoTokenizer.from_pretrained(minilm_dir())
    words = default_words(ABC)
    for template in ABC.all_templates:
        slot = ABC.slot_of(template)
        groups = list(ABC.groups[slot][::10])
        problems = build_masked_problems(tok, ABC, template, groups, words, mask_id=tok.mask_token_id)
        for n, (ids, start, trait) in enumerate(zip(problems.prompts, problems.mask_starts, problems.trait_tokens)):
            assert ids[start : start + len(trait)] == [tok.mask_token_id] * len(trait)
            ids = list(ids)
            ids[start : start + len(trait)] = trait
            filler, word = problems.fillers[n // len(words)], words[n % len(words)]
            assert ids == tok(template.replace(slot, filler).replace("<mask>", word))["input_ids"]
