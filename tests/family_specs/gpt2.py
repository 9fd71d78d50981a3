from family_specs import Spec

SPECS = [
    Spec("gpt2", "GPT2LMHeadModel", "GPT2Config", dict(n_layer=2, n_embd=32, n_head=4, n_positions=64)),
]
