from family_specs import NULL, Spec

# head_dim 16 with 8 rotary dims (four frequencies, interleaved pairs); weights at std 0.1 give peaked
# attention, so the rotary layout changes the logits by far more than the tolerance.
SPECS = [
    Spec(
        "gptj",
        "GPTJForCausalLM",
        "GPTJConfig",
        dict(n_layer=2, n_embd=64, n_head=4, n_inner=96, n_positions=64, rotary_dim=8, initializer_range=0.1),
    ),
]

# --- refused config fields (tests/test_models_refusals.py) ---------------------------------------------
BASE = {
    "model_type": "gptj",
    "vocab_size": 50,
    "n_embd": 64,
    "n_layer": 2,
    "n_head": 4,
    "n_positions": 64,
    "rotary_dim": 8,
}

REFUSED = [
    (
        BASE,
        [
            ({"activation_function": "swish"}, "activation_function"),
            ({"rotary_dim": NULL}, "rotary_dim"),
            ({"rotary_dim": 7}, "rotary_dim"),
            ({"rotary_dim": 32}, "rotary_dim"),  # more than head_dim 16
            ({"n_head": 5}, "n_head"),
            ({"model_type": "gpt_neox"}, "'gpt_neox'"),
            ({"n_embd": None}, "n_embd"),
        ],
    )
]
