from family_specs import Spec

SPECS = [
    # 6 heads: not a power of two, so the ALiBi slopes interleave; clip_qkv small enough to clip
    Spec(
        "mpt",
        "MptForCausalLM",
        "MptConfig",
        dict(d_model=48, n_heads=6, n_layers=2, max_seq_len=64, attn_config=dict(clip_qkv=0.08)),
    ),
]

# --- refused config fields (tests/test_models_refusals.py) ---------------------------------------------
_ATTN = {  # the "mpt" spec's attn_config (transformers' MptAttentionConfig), softmax_scale null left out
    "alibi": True,
    "alibi_bias_max": 8,
    "attn_impl": "torch",
    "attn_pdrop": 0,
    "attn_type": "multihead_attention",
    "attn_uses_sequence_id": False,
    "clip_qkv": 0.08,
    "prefix_lm": False,
    "qk_ln": False,
}
BASE = {  # the "mpt" spec's config.json
    "model_type": "mpt",
    "vocab_size": 320,
    "d_model": 48,
    "n_heads": 6,
    "n_layers": 2,
    "max_seq_len": 64,
    "expansion_ratio": 4,
    "layer_norm_epsilon": 1e-05,
    "learned_pos_emb": True,
    "logit_scale": None,
    "no_bias": True,
    "norm_type": "low_precision_layernorm",
    "attn_config": _ATTN,
    "tie_word_embeddings": True,
    "bos_token_id": 1,
    "eos_token_id": 2,
}

REFUSED = [
    (
        BASE,
        [
            *(
                ({"attn_config": {**_ATTN, field: value}}, f"attn_config.{field}")
                for field, value in [
                    ("attn_type", "multiquery_attention"),
                    ("prefix_lm", True),
                    ("qk_ln", True),
                    ("alibi", False),
                    ("alibi_bias_max", 16),
                    ("rope", True),
                    ("sliding_window_size", 4),
                ]
            ),
            ({"no_bias": False}, "no_bias"),
            ({"logit_scale": 2.0}, "logit_scale"),
            ({"expansion_ratio": 2}, "expansion_ratio"),
            ({"norm_type": "rmsnorm"}, "norm_type"),
            # llm-foundry's ffn_config, which transformers ignores: only its default MLP
            ({"ffn_config": {"ffn_type": "mptglu"}}, "ffn_config.ffn_type"),
            ({"ffn_config": {"ffn_act_fn": {"name": "silu"}}}, "ffn_config.ffn_act_fn"),
            ({"d_model": None}, "'d_model'"),
            ({"model_type": "opt"}, "'opt'"),
        ],
    )
]
