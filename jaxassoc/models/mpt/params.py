"""Where an MPT checkpoint keeps each parameter (``transformer.blocks.<i>.attn.Wqkv``, the fused q|k|v rows,
...), read by :func:`jaxassoc.models.gpt_like.params_from_hf`."""

from jaxassoc.models import gpt_like

LAYOUT = gpt_like.Layout(
    name="MPT",
    prefixes=("transformer.",),
    layer="blocks.{}",
    modules={
        "attn_norm": "norm_1",
        "attn.o": "attn.out_proj",
        "mlp_norm": "norm_2",
        "mlp.up": "ffn.up_proj",
        "mlp.down": "ffn.down_proj",
    },
    embed="wte",
    final_norm="norm_f",
    fused_qkv="attn.Wqkv",
)
