from family_specs import Spec

_TINY = dict(
    num_hidden_layers=3,
    hidden_size=32,
    num_attention_heads=4,
    num_key_value_heads=2,
    intermediate_size=64,
    max_position_embeddings=64,
    rope_theta=1000.0,
)

SPECS = [
    # q/k/v biases (perturbed by the harness), tied head, a window of 3 on layers 1 and 2 (max_window_layers=1)
    Spec(
        "qwen2",
        "Qwen2ForCausalLM",
        "Qwen2Config",
        dict(_TINY, use_sliding_window=True, sliding_window=3, max_window_layers=1, tie_word_embeddings=True),
    ),
    # layer_types decides over max_window_layers: only layer 0 slides
    Spec(
        "qwen2-layer-types",
        "Qwen2ForCausalLM",
        "Qwen2Config",
        dict(
            _TINY,
            num_hidden_layers=2,
            use_sliding_window=True,
            sliding_window=2,
            max_window_layers=9,
            layer_types=["sliding_attention", "full_attention"],
        ),
    ),
]

# --- refused config fields (tests/test_models_refusals.py) ---------------------------------------------
BASE = {
    "model_type": "qwen2",
    "vocab_size": 101,
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 3,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "rms_norm_eps": 1e-6,
    "max_position_embeddings": 64,
    "rope_theta": 1e4,
}

REFUSED = [
    (
        BASE,
        [
            ({"hidden_act": "gelu"}, "hidden_act = 'gelu'"),
            ({"partial_rotary_factor": 0.5}, "partial_rotary_factor"),
            ({"rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}}, "'yarn'"),
            ({"rope_parameters": {"rope_type": "longrope", "rope_theta": 1e4}}, "'longrope'"),
            (
                {"layer_types": ["full_attention", "chunked_attention", "full_attention"]},
                r"layer_types.*chunked_attention",
            ),
            ({"layer_types": ["full_attention"]}, "layer_types names 1 layers but num_hidden_layers = 3"),
            (
                {"layer_types": ["sliding_attention"] * 3, "use_sliding_window": False, "sliding_window": 4},
                "sliding_attention layers but no window",
            ),
            (
                {"layer_types": ["sliding_attention"] * 3, "use_sliding_window": True, "sliding_window": None},
                "sliding_attention layers but no window",
            ),
            ({"num_key_value_heads": 3}, "num_key_value_heads"),
            ({"model_type": "qwen3"}, "'qwen3'"),
            ({"hidden_size": None}, "hidden_size"),
        ],
    )
]
