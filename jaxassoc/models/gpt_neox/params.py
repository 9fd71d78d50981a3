"""Where a GPT-NeoX checkpoint keeps each parameter (``gpt_neox.layers.<i>.attention.query_key_value``, its
output columns per head ``[q_h, k_h, v_h]``; the head ``embed_out``, ``lm_head`` in some re-saved
checkpoints), read by :func:`jaxassoc.models.gpt_like.params_from_hf`."""

from jaxassoc.models import gpt_like

LAYOUT = gpt_like.Layout(
    name="GPT-NeoX",
    prefixes=("gpt_neox.",),
    layer="layers.{}",
    modules={
        "attn_norm": "input_layernorm",
        "attn.o": "attention.dense",
        "mlp_norm": "post_attention_layernorm",
        "mlp.up": "mlp.dense_h_to_4h",
        "mlp.down": "mlp.dense_4h_to_h",
    },
    embed="embed_in",
    final_norm="final_layer_norm",
    fused_qkv="attention.query_key_value",
    qkv_per_head=True,
    heads=("embed_out", "lm_head"),
    buffers=("attention.bias", "attention.masked_bias", "attention.rotary_emb."),  # older checkpoints' buffers
)
