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
