from family_specs import Spec

_TINY = dict(
    num_hidden_layers=3,
    hidden_size=32,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    intermediate_size=64,
    max_position_embeddings=64,
)

SPECS = [
    Spec("qwen3", "Qwen3ForCausalLM", "Qwen3Config", dict(_TINY, rope_theta=500.0, tie_word_embeddings=True)),
    Spec(
        "qwen3-window",
        "Qwen3ForCausalLM",
        "Qwen3Config",
        dict(_TINY, use_sliding_window=True, sliding_window=4, max_window_layers=1),
        seed=1,
    ),
]

# --- tests/test_models_qwen3.py ------------------------------------------------------------------------
_PORT = dict(
    vocab_size=61,
    hidden_size=32,
    intermediate_size=48,
    num_hidden_layers=3,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    max_position_embeddings=64,
    rms_norm_eps=1e-6,
)

PORT = Spec(
    "qwen3-port",
    "Qwen3ForCausalLM",
    "Qwen3Config",
    dict(_PORT, tie_word_embeddings=True, use_sliding_window=True, sliding_window=3, max_window_layers=1),
    perturb=("norm",),
)
"""head_dim 16 != 32 / 4, GQA, tied head, window 3 on layers 1-2; the q/k norm weights perturbed."""

# --- refused config fields (tests/test_models_refusals.py) ---------------------------------------------
BASE = dict(_PORT, model_type="qwen3")

REFUSED = [
    (
        BASE,
        [
            ({"hidden_act": "gelu"}, "hidden_act = 'gelu'"),
            ({"attention_bias": True}, "attention_bias = True"),
            ({"rope_scaling": {"rope_type": "yarn", "factor": 4.0}}, "rope_type = 'yarn'"),
            ({"rope_parameters": {"rope_type": "linear", "rope_theta": 1e6, "factor": 2.0}}, "rope_type = 'linear'"),
            ({"layer_types": ["full_attention", "chunked_attention", "full_attention"]}, "layer_types"),
            ({"layer_types": ["full_attention"]}, "layer_types"),
            ({"layer_types": ["sliding_attention"] * 3}, "layer_types"),  # sliding layers without use_sliding_window
            ({"num_key_value_heads": 3}, "num_key_value_heads = 3"),
            ({"head_dim": 15}, "head_dim = 15"),
            ({"model_type": "qwen2"}, "'qwen2' is not a qwen3 model"),
            ({"vocab_size": None}, "lacks the required field 'vocab_size'"),
        ],
    )
]
