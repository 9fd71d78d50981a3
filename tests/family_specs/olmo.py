from family_specs import Spec

_TINY = dict(
    num_hidden_layers=2,
    hidden_size=32,
    num_attention_heads=4,
    intermediate_size=64,
    max_position_embeddings=64,
    pad_token_id=0,
)

SPECS = [
    # clip_qkv 0.05 clips many projections (they are ~0.1 at init); GQA; rope_theta != default
    Spec(
        "olmo",
        "OlmoForCausalLM",
        "OlmoConfig",
        dict(_TINY, num_key_value_heads=2, clip_qkv=0.05, rope_parameters=dict(rope_type="default", rope_theta=500.0)),
    ),
    Spec("olmo-tied", "OlmoForCausalLM", "OlmoConfig", dict(_TINY, tie_word_embeddings=True)),
]

# --- refused config fields (tests/test_models_refusals.py) ---------------------------------------------
BASE = {  # the "olmo" spec's config.json (transformers 5)
    "model_type": "olmo",
    "vocab_size": 320,
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 64,
    "hidden_act": "silu",
    "attention_bias": False,
    "clip_qkv": 0.05,
    "rope_parameters": {"rope_theta": 500.0, "rope_type": "default"},
    "tie_word_embeddings": False,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "pad_token_id": 0,
}

REFUSED = [
    (
        BASE,
        [
            ({"hidden_act": "gelu"}, "hidden_act"),
            ({"attention_bias": True}, "attention_bias"),
            (
                {"rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e4}},
                "rope_parameters.rope_type='linear'",
            ),
            ({"rope_scaling": {"type": "dynamic", "factor": 2.0}}, "rope_scaling.rope_type='dynamic'"),
            ({"num_key_value_heads": 3}, "num_key_value_heads"),
            ({"model_type": "olmo2"}, "'olmo2'"),
            ({"intermediate_size": None}, "'intermediate_size'"),
        ],
    )
]
