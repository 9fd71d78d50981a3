"""Where an OPT checkpoint keeps each parameter (``model.decoder.layers.<i>.self_attn.q_proj``, ..., the
position table ``embed_positions``, opt-350m's ``project_in`` / ``project_out``), read by the GPT-like
``params_from_hf``."""

from jaxassoc.models import gpt_like

LAYOUT = gpt_like.Layout(
    name="OPT",
    prefixes=("model.decoder.", "decoder."),
    layer="layers.{}",
    modules={
        "attn_norm": "self_attn_layer_norm",
        **{f"attn.{p}": f"self_attn.{p}_proj" for p in "qkv"},
        "attn.o": "self_attn.out_proj",
        "mlp_norm": "final_layer_norm",
        "mlp.up": "fc1",
        "mlp.down": "fc2",
    },
    embed="embed_tokens",
    positions="embed_positions",
    final_norm="final_layer_norm",
    project=("project_in", "project_out"),
)
