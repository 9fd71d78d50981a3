from family_specs import Spec

_TINY = dict(
    num_hidden_layers=2,
    hidden_size=32,
    num_attention_heads=4,
    num_key_value_heads=2,
    intermediate_size=64,
    max_position_embeddings=64,
)
# Llama 3.1's rescaling with a pretraining context of 32 tokens: head_dim 8 at theta 100 has wavelengths
# 2*pi*(1, 3.2, 10, 32), so one frequency is kept (< 32/4), one interpolated and two divided by the factor (> 32/1).
_LLAMA3 = dict(
    rope_type="llama3",
    rope_theta=100.0,
    factor=4.0,
    low_freq_factor=1.0,
    high_freq_factor=4.0,
    original_max_position_embeddings=32,
)

SPECS = [
    Spec("llama", "LlamaForCausalLM", "LlamaConfig", dict(_TINY, rope_theta=500.0, tie_word_embeddings=True)),
    Spec("llama-rope-llama3", "LlamaForCausalLM", "LlamaConfig", dict(_TINY, rope_parameters=_LLAMA3)),
    Spec(
        "llama-rope-linear",
        "LlamaForCausalLM",
        "LlamaConfig",
        dict(_TINY, rope_parameters=dict(rope_type="linear", rope_theta=100.0, factor=3.0)),
    ),
    Spec("mistral", "MistralForCausalLM", "MistralConfig", dict(_TINY, num_key_value_heads=1, sliding_window=4)),
]
