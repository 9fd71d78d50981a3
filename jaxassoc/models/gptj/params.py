"""Where a GPT-J checkpoint keeps each parameter (``transformer.h.<i>.attn.q_proj``, ..., the head
``lm_head`` with its bias), read by :func:`jaxassoc.models.gpt_like.params_from_hf`."""

from jaxassoc.models import gpt_like

LAYOUT = gpt_like.Layout(
    name="GPT-J",
    prefixes=("transformer.",),
    layer="h.{}",
    modules={
        "attn_norm": "ln_1",
        **{f"attn.{p}": f"attn.{p}_proj" for p in "qkv"},
        "attn.o": "attn.out_proj",
        "mlp.up": "mlp.fc_in",
        "mlp.down": "mlp.fc_out",
    },
    embed="wte",
    final_norm="ln_f",
    buffers=("attn.bias", "attn.masked_bias"),  # older checkpoints' causal-mask buffers
)
