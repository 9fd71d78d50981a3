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
