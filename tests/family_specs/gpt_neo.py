from family_specs import Spec

# A global then a local layer with a window of 3, shorter than the test sequences (up to 13 tokens);
# weights at std 0.1 give peaked (unscaled) attention, so the window changes the logits far beyond the tolerance.
SPECS = [
    Spec(
        "gpt_neo",
        "GPTNeoForCausalLM",
        "GPTNeoConfig",
        dict(
            num_layers=2,
            hidden_size=32,
            num_heads=4,
            intermediate_size=64,
            max_position_embeddings=64,
            window_size=3,
            attention_types=[[["global", "local"], 1]],
            initializer_range=0.1,
        ),
    ),
]
