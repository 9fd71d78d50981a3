from family_specs import Spec

_TINY = dict(
    num_hidden_layers=2, hidden_size=32, num_attention_heads=4, ffn_dim=64, max_position_embeddings=64, pad_token_id=0
)

SPECS = [
    Spec("opt", "OPTForCausalLM", "OPTConfig", dict(_TINY)),
    # opt-350m's layout: post-LN (no final LayerNorm), word embeddings of 16 projected in and out
    Spec(
        "opt-postln-proj",
        "OPTForCausalLM",
        "OPTConfig",
        dict(_TINY, do_layer_norm_before=False, word_embed_proj_dim=16),
    ),
]

# --- refused config fields (tests/test_models_refusals.py) ---------------------------------------------
BASE = {  # the "opt-postln-proj" spec's config.json (opt-350m's layout)
    "model_type": "opt",
    "vocab_size": 320,
    "hidden_size": 32,
    "ffn_dim": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "max_position_embeddings": 64,
    "activation_function": "relu",
    "do_layer_norm_before": False,
    "_remove_final_layer_norm": False,
    "enable_bias": True,
    "layer_norm_elementwise_affine": True,
    "word_embed_proj_dim": 16,
    "tie_word_embeddings": True,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "pad_token_id": 0,
}

REFUSED = [
    (
        BASE,
        [
            ({"enable_bias": False}, "enable_bias"),
            ({"layer_norm_elementwise_affine": False}, "layer_norm_elementwise_affine"),
            ({"activation_function": "swish"}, "activation_function"),
            ({"ffn_dim": None}, "'ffn_dim'"),
            ({"model_type": "gpt2"}, "'gpt2'"),
        ],
    )
]
