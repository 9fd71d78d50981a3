"""Where a GPT-Neo checkpoint keeps each parameter (``transformer.h.<i>.attn.attention.q_proj``, ...), read by
:func:`jaxassoc.models.gpt_like.params_from_hf`."""

from jaxassoc.models import gpt_like

LAYOUT = gpt_like.Layout(
    name="GPT-Neo",
    prefixes=("transformer.",),
    layer="h.{}",
    modules={
        "attn_norm": "ln_1",
        **{f"attn.{p}": f"attn.attention.{p}_proj" for p in "qkv"},
        "attn.o": "attn.attention.out_proj",
        "mlp_norm": "ln_2",
        "mlp.up": "mlp.c_fc",
        "mlp.down": "mlp.c_proj",
    },
    embed="wte",
    positions="wpe",
    final_norm="ln_f",
    buffers=("attn.attention.bias", "attn.attention.masked_bias"),  # older checkpoints' (local) mask buffers
)
