"""Where a GPT-2 checkpoint keeps each parameter: ``transformer.h.<i>.attn.c_attn`` (the fused q|k|v, a
``Conv1D`` stored ``(in, out)``), ..., read by :func:`jaxassoc.models.gpt_like.params_from_hf`."""

from jaxassoc.models import gpt_like

LAYOUT = gpt_like.Layout(
    name="GPT-2",
    prefixes=("transformer.",),
    layer="h.{}",
    modules={
        "attn_norm": "ln_1",
        "attn.o": "attn.c_proj",
        "mlp_norm": "ln_2",
        "mlp.up": "mlp.c_fc",
        "mlp.down": "mlp.c_proj",
    },
    embed="wte",
    positions="wpe",
    final_norm="ln_f",
    fused_qkv="attn.c_attn",
    conv1d=True,
    buffers=("attn.bias", "attn.masked_bias"),  # older checkpoints' causal-mask buffers
)
