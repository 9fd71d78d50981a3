from family_specs import NULL, Spec

# Sliding window 3 on the alternating local layers (sequences up to 13 tokens exceed it), soft-caps small
# enough to bite (initializer_range 0.3: logits and attention scores reach several units), GQA, a head_dim unrelated to hidden / heads.
_TINY = dict(
    num_hidden_layers=3,
    hidden_size=32,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    intermediate_size=64,
    max_position_embeddings=64,
    query_pre_attn_scalar=24,
    sliding_window=3,
    attn_logit_softcapping=5.0,
    final_logit_softcapping=3.0,
    initializer_range=0.3,
)

SPECS = [
    Spec("gemma2", "Gemma2ForCausalLM", "Gemma2Config", dict(_TINY, rope_theta=500.0)),
    Spec(
        "gemma2-untied",
        "Gemma2ForCausalLM",
        "Gemma2Config",
        dict(
            _TINY,
            tie_word_embeddings=False,
            hidden_activation="gelu",
            layer_types=["full_attention", "sliding_attention", "sliding_attention"],
        ),
        seed=1,
    ),
]

# --- refused config fields (tests/test_models_refusals.py) ---------------------------------------------
BASE = {
    "model_type": "gemma2",
    "vocab_size": 50,
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "rms_norm_eps": 1e-6,
    "max_position_embeddings": 64,
    "query_pre_attn_scalar": 16,
    "sliding_window": 3,
    "hidden_activation": "gelu_pytorch_tanh",
}

REFUSED = [
    (
        BASE,
        [
            ({"attention_bias": True}, "attention_bias"),
            ({"use_bidirectional_attention": True}, "use_bidirectional_attention"),
            ({"hidden_activation": "swish"}, "hidden_activation"),
            ({"rope_scaling": {"rope_type": "linear", "factor": 2.0}}, "rope_scaling"),
            # the scaling is named by the field transformers 4 and our message share
            ({"rope_parameters": {"rope_type": "yarn", "rope_theta": 1e4, "factor": 2.0}}, "rope_scaling"),
            (
                {"rope_parameters": {"rope_type": "default", "rope_theta": 1e4, "partial_rotary_factor": 0.5}},
                "partial_rotary_factor",
            ),
            ({"layer_types": ["sliding_attention", "chunked_attention"]}, "layer_types"),
            ({"layer_types": ["full_attention"]}, "layer_types has 1 entries"),
            ({"sliding_window": NULL}, "sliding_window"),
            ({"head_dim": 15}, "head_dim"),
        ],
    )
]
