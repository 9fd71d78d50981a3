from family_specs import Spec

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
