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
