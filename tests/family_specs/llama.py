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

# --- tests/test_models_llama.py: vocabulary 101, 3 layers of width 64, norm weights perturbed -----------
_PORT = dict(
    hidden_size=64,
    intermediate_size=96,
    num_hidden_layers=3,
    num_attention_heads=4,
    max_position_embeddings=64,
    rms_norm_eps=1e-5,
)
_NORMS = ("norm",)

PORT_LLAMA = Spec(
    "llama-port",
    "LlamaForCausalLM",
    "LlamaConfig",
    dict(_PORT, vocab_size=101, num_key_value_heads=2, tie_word_embeddings=True, rope_theta=500.0),
    perturb=_NORMS,
)
"""GQA (4 query heads, 2 key/value heads), tied embeddings, rope_theta != default."""

PORT_MISTRAL = Spec(
    "mistral-port",
    "MistralForCausalLM",
    "MistralConfig",
    dict(_PORT, vocab_size=101, num_key_value_heads=1, sliding_window=4),
    perturb=_NORMS,
    seed=1,
)
"""Sliding window 4 (sequences of 13 exceed it), one key/value head."""

PORT_DYNAMIC = Spec(
    "llama-dynamic",
    "LlamaForCausalLM",
    "LlamaConfig",
    dict(
        _PORT,
        vocab_size=101,
        num_key_value_heads=2,
        max_position_embeddings=16,
        rope_parameters={"rope_type": "dynamic", "rope_theta": 100.0, "factor": 4.0},
    ),
    perturb=_NORMS,
    seed=3,
)
"""Dynamic NTK rotary scaling with a context of 16."""

LOAD = [
    Spec("llama-load", "LlamaForCausalLM", "LlamaConfig", dict(_PORT, num_key_value_heads=2), perturb=_NORMS, seed=2),
    Spec(
        "mistral-load",
        "MistralForCausalLM",
        "MistralConfig",
        dict(_PORT, sliding_window=3, num_key_value_heads=1),
        perturb=_NORMS,
        seed=2,
    ),
]
"""load_model on a Llama and a Mistral folder (the tokenizer's vocabulary)."""

GGUF = Spec(
    "llama-gguf",
    "LlamaForCausalLM",
    "LlamaConfig",
    dict(
        vocab_size=262,  # tests/test_models_gguf.py's TINY_TOKENS: 3 specials, 256 bytes, 3 merges
        hidden_size=48,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=6,
        num_key_value_heads=2,
        max_position_embeddings=32,
        rope_theta=1000.0,
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
    ),
    perturb=(),
)
"""The torch model tests/test_models_gguf.py writes to GGUF files (untouched random weights)."""

# --- refused config fields (tests/test_models_refusals.py) ---------------------------------------------
BASE = dict(_PORT, vocab_size=101, model_type="llama", num_key_value_heads=2)

REFUSED = [
    (
        BASE,
        [
            (
                {"rope_scaling": {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 32}},
                "'yarn'",
            ),
            ({"rope_parameters": {"rope_type": "longrope", "rope_theta": 5e5}}, "'longrope'"),
            ({"rope_scaling": {"type": "su", "factor": 2.0}}, "rope_type = 'su'"),
            ({"rope_parameters": {"rope_type": "llama3", "rope_theta": 5e5, "factor": 8.0}}, "low_freq_factor"),
            ({"rope_scaling": {"rope_type": "linear"}}, "factor"),
            ({"partial_rotary_factor": 0.5}, "partial_rotary_factor"),
            ({"rope_parameters": {"rope_type": "default", "partial_rotary_factor": 0.5}}, "partial_rotary_factor"),
            ({"hidden_act": "gelu"}, "hidden_act"),
            ({"attention_bias": True}, "attention_bias"),
            ({"mlp_bias": True}, "mlp_bias"),
            ({"num_key_value_heads": 3}, "num_key_value_heads"),
            ({"model_type": "gpt2"}, "gpt2"),
            ({"hidden_size": None}, "hidden_size"),
        ],
    )
]
