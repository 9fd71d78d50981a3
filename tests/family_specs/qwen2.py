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
