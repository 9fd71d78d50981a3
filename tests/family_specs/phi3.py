from family_specs import Spec

SPECS = [
    # fused qkv_proj / gate_up_proj, GQA, a window of 3 on every layer (Phi-3-mini-4k: 2047)
    Spec(
        "phi3",
        "Phi3ForCausalLM",
        "Phi3Config",
        dict(
            num_hidden_layers=2,
            hidden_size=32,
            num_attention_heads=4,
            num_key_value_heads=2,
            intermediate_size=64,
            max_position_embeddings=64,
            original_max_position_embeddings=64,
            rope_theta=1000.0,
            sliding_window=3,
            pad_token_id=0,
        ),
    ),
]

# --- refused config fields (tests/test_models_refusals.py) ---------------------------------------------
BASE = {
    "model_type": "phi3",
    "vocab_size": 101,
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "rms_norm_eps": 1e-5,
    "max_position_embeddings": 64,
    "sliding_window": 2047,
    "rope_parameters": {"rope_type": "default", "rope_theta": 1e4, "partial_rotary_factor": 1.0},
}
_LONGROPE = {"type": "longrope", "short_factor": [1.0] * 4, "long_factor": [2.0] * 4}

REFUSED = [
    (
        BASE,
        [
            ({"rope_scaling": _LONGROPE, "rope_parameters": None}, "rope_type = 'longrope'"),  # Phi-3-mini-128k
            ({"rope_parameters": {**_LONGROPE, "type": None, "rope_type": "longrope"}}, "'longrope'"),
            ({"rope_scaling": {"type": "su", **{k: v for k, v in _LONGROPE.items() if k != "type"}}}, "'su'"),
            ({"rope_scaling": {"rope_type": "linear", "factor": 2.0}}, "'linear'"),
            (
                {"rope_parameters": {"rope_type": "default", "rope_theta": 1e4, "partial_rotary_factor": 0.75}},
                "partial_rotary_factor = 0.75",
            ),  # Phi-4-mini
            ({"hidden_act": "gelu"}, "hidden_act = 'gelu'"),
            ({"num_key_value_heads": 3}, "num_key_value_heads"),
            ({"model_type": "phi3small"}, "'phi3small'"),
            ({"hidden_size": None}, "hidden_size"),
        ],
    )
]
