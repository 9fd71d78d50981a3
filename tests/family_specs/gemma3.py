from family_specs import Spec

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
