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

# --- refused config fields (tests/test_models_refusals.py) ---------------------------------------------
BASE = {
    "model_type": "gpt_neo",
    "vocab_size": 50,
    "hidden_size": 32,
    "num_layers": 2,
    "num_heads": 4,
    "max_position_embeddings": 64,
    "window_size": 3,
    "attention_types": [[["global", "local"], 1]],
}

REFUSED = [
    (
        BASE,
        [
            ({"attention_types": [[["global", "sparse"], 1]]}, "attention_types.*'sparse'"),
            ({"attention_types": [[["global", "local"], 2]]}, "num_layers"),
            ({"attention_types": [["global", 2]]}, "attention_types.*malformed"),
            ({"attention_layers": ["local", "global"]}, "attention_layers"),
            ({"activation_function": "swish"}, "activation_function"),
            ({"window_size": 0}, "window_size"),
            ({"num_heads": 5}, "num_heads"),
            ({"model_type": "gpt2"}, "'gpt2'"),
            ({"hidden_size": None}, "hidden_size"),
        ],
    )
]
