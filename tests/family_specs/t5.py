"""Tiny T5 checkpoints (``tests/test_models_t5.py``, ``tests/test_app_t5.py``) with the "t5" tokenizer
(SentencePiece-style, ``<pad>`` 0, ``</s>`` 1 appended to every encoding), and the refused config fields.
No ``SPECS``: T5 is not in the causal conformance suite."""

from family_specs import Spec

_TINY = dict(
    d_model=32,
    d_kv=8,
    d_ff=48,
    num_layers=2,
    num_decoder_layers=3,
    num_heads=4,
    relative_attention_num_buckets=8,
    relative_attention_max_distance=16,
    feed_forward_proj="gated-gelu",
    tie_word_embeddings=False,
    decoder_start_token_id=0,
    pad_token_id=0,
    eos_token_id=1,
)
_PERTURB = ("layer_norm",)  # norm weights start at 1: perturbed so the tests see them

V11 = Spec("t5-v1.1", "T5ForConditionalGeneration", "T5Config", _TINY, perturb=_PERTURB, tokenizer="t5")
"""T5 v1.1: gated-gelu feed-forward, its own random ``lm_head.weight`` (``family_specs.write``)."""

ORIGINAL = Spec(
    "t5-original",
    "T5ForConditionalGeneration",
    "T5Config",
    dict(_TINY, feed_forward_proj="relu", tie_word_embeddings=True),
    perturb=_PERTURB,
    seed=1,
    tokenizer="t5",
)
"""Original T5: relu feed-forward, head tied to the embeddings with the d_model**-0.5 rescale."""

BASE = {
    "model_type": "t5",
    "vocab_size": 200,
    "d_model": 32,
    "d_kv": 8,
    "d_ff": 48,
    "num_layers": 2,
    "num_heads": 4,
    "feed_forward_proj": "gated-gelu",
    "tie_word_embeddings": False,
}


def _field_and_value(field, value) -> tuple[dict, str]:
    return {field: value}, f"{field}.*{value}|{value}.*{field}|{field}={value!r}"


REFUSED = [
    (
        BASE,
        [
            _field_and_value("is_encoder_decoder", False),
            _field_and_value("is_decoder", True),
            _field_and_value("add_cross_attention", True),
            _field_and_value("feed_forward_proj", "gated-swish"),
            _field_and_value("feed_forward_proj", "silu"),
            _field_and_value("feed_forward_proj", "relu-gated-gelu"),
            _field_and_value("model_type", "mt5"),
            ({"d_kv": None}, "'d_kv'"),
        ],
    )
]
