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
