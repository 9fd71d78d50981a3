from family_specs import Spec

SPECS = [
    Spec("gpt2", "GPT2LMHeadModel", "GPT2Config", dict(n_layer=2, n_embd=32, n_head=4, n_positions=64)),
]

# --- refused config fields (tests/test_models_refusals.py) ---------------------------------------------
BASE = {  # the tiny GPT-2's config.json (family_specs.TINY["gpt2"])
    "model_type": "gpt2",
    "vocab_size": 320,
    "n_embd": 32,
    "n_head": 4,
    "n_layer": 2,
    "n_positions": 64,
    "n_inner": None,
    "activation_function": "gelu_new",
    "layer_norm_epsilon": 1e-05,
    "add_cross_attention": False,
    "reorder_and_upcast_attn": False,
    "scale_attn_by_inverse_layer_idx": False,
    "scale_attn_weights": True,
    "tie_word_embeddings": True,
    "bos_token_id": 0,
    "eos_token_id": 0,
}

REFUSED = [
    (
        BASE,
        [
            ({"activation_function": "swish"}, "activation_function"),
            ({"scale_attn_by_inverse_layer_idx": True}, "scale_attn_by_inverse_layer_idx"),
            ({"add_cross_attention": True}, "add_cross_attention"),
            ({"n_embd": None}, "'n_embd'"),
            ({"model_type": "bert"}, "'bert'"),
        ],
    )
]
