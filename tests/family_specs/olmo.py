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
