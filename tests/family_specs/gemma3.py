from family_specs import NULL, Spec

# Sliding window 3 on local layers (sequences up to 13 tokens exceed it) with their own rotary base,
# linear rotary scaling on the global layers, q/k norms, GQA, a head_dim unrelated to hidden / heads;
# initializer_range 0.3 so the final soft-cap (3.0) bites.
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
    initializer_range=0.3,
)

SPECS = [
    Spec(
        "gemma3_text",
        "Gemma3ForCausalLM",
        "Gemma3TextConfig",
        dict(
            _TINY,
            sliding_window_pattern=2,
            rope_theta=500.0,
            rope_local_base_freq=50.0,
            rope_scaling={"rope_type": "linear", "factor": 2.0},
            final_logit_softcapping=3.0,
        ),
    ),
    Spec(
        "gemma3_text-default",
        "Gemma3ForCausalLM",
        "Gemma3TextConfig",
        dict(_TINY, layer_types=["sliding_attention", "sliding_attention", "full_attention"]),
        seed=1,
    ),
]

# --- refused config fields (tests/test_models_refusals.py) ---------------------------------------------
BASE = {
    "model_type": "gemma3_text",
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
            ({"attn_logit_softcapping": 50.0}, "attn_logit_softcapping"),
            ({"attention_bias": True}, "attention_bias"),
            ({"use_bidirectional_attention": True}, "use_bidirectional_attention"),
            ({"hidden_activation": "swish"}, "hidden_activation"),
            ({"rope_scaling": {"rope_type": "yarn", "factor": 2.0}}, "rope_scaling"),
            (
                {
                    "rope_parameters": {
                        "sliding_attention": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e4},
                        "full_attention": {"rope_type": "default", "rope_theta": 1e6},
                    }
                },
                "rope_parameters.sliding_attention",
            ),
            ({"layer_types": ["sliding_attention", "chunked_attention"]}, "layer_types"),
            ({"sliding_window": NULL}, "sliding_window"),
        ],
    )
]
