"""MPT's hyper-parameters from a HF ``config.json`` (MptConfig with its nested ``attn_config``), refusing what
the port does not implement."""

from __future__ import annotations

from jaxassoc.errors import ModelError
from jaxassoc.models.gpt_like import GPTLikeConfig
from jaxassoc.models.layers import required_fields

MODEL_TYPES: tuple[str, ...] = ("mpt",)

# attn_config field -> the only value the port implements (absent fields take MptAttentionConfig's default)
_ATTN_REFUSED = {
    "attn_type": "multihead_attention",
    "prefix_lm": False,
    "qk_ln": False,
    "alibi": True,
    "alibi_bias_max": 8,  # transformers' MptModel always builds its ALiBi slopes with 8
    "rope": False,  # llm-foundry's options, which transformers ignores
    "sliding_window_size": -1,
}
# ffn_config field (llm-foundry; transformers ignores it) -> the only value the port implements
_FFN_REFUSED = {"ffn_type": "mptmlp", "ffn_act_fn": {"name": "gelu", "approximate": "none"}}
# top-level field -> the only value the port implements
_REFUSED = {
    "no_bias": True,
    "logit_scale": None,
    "expansion_ratio": 4,  # transformers' MptMLP always has 4 * d_model units
}
_NORM_TYPES = ("low_precision_layernorm", "layernorm")  # the same LayerNorm in float32


def config_from_hf(hf_config: dict) -> GPTLikeConfig:
    """MPT (MosaicML 2023) as a GPTLikeConfig: no biases, LayerNorms with a scale only, a fused ``Wqkv``
    optionally clamped to ``±clip_qkv``, ALiBi in place of position embeddings (slopes ``2^(-i *
    alibi_bias_max / n)``), an erf-GELU MLP, the head tied to the word embeddings; ModelError naming each
    field value the port does not implement."""
    if hf_config.get("model_type") not in MODEL_TYPES:
        raise ModelError(f"mpt port: model_type {hf_config.get('model_type')!r} is not one of {MODEL_TYPES}")
    attn = hf_config.get("attn_config") or {}
    for field, supported in _ATTN_REFUSED.items():
        if attn.get(field, supported) != supported:
            raise ModelError(
                f"MPT config field attn_config.{field}={attn[field]!r} is not supported (only {supported!r})"
            )
    ffn = hf_config.get("ffn_config") or {}
    for field, supported in _FFN_REFUSED.items():
        if ffn.get(field, supported) != supported:
            raise ModelError(
                f"MPT config field ffn_config.{field}={ffn[field]!r} is not supported (only {supported!r})"
            )
    for field, supported in _REFUSED.items():
        if hf_config.get(field, supported) != supported:
            raise ModelError(f"MPT config field {field}={hf_config[field]!r} is not supported (only {supported!r})")
    norm_type = hf_config.get("norm_type", _NORM_TYPES[0])
    if norm_type not in _NORM_TYPES:
        raise ModelError(f"MPT config field norm_type={norm_type!r} is not supported (only one of {_NORM_TYPES})")
    with required_fields("mpt"):
        d_model, n_heads = int(hf_config["d_model"]), int(hf_config["n_heads"])
        if d_model % n_heads:
            raise ModelError(f"MPT config: d_model={d_model} is not a multiple of n_heads={n_heads}")
        softmax_scale = attn.get("softmax_scale")
        clip_qkv = attn.get("clip_qkv")
        return GPTLikeConfig(
            model_type="mpt",
            hf_names=(
                ("hidden_size", "d_model"),
                ("num_hidden_layers", "n_layers"),
                ("num_attention_heads", "n_heads"),
                ("max_position_embeddings", "max_seq_len"),
                ("intermediate_size", "expansion_ratio"),
            ),
            vocab_size=int(hf_config["vocab_size"]),
            hidden_size=d_model,
            intermediate_size=int(hf_config.get("expansion_ratio", 4)) * d_model,
            num_hidden_layers=int(hf_config["n_layers"]),
            num_attention_heads=n_heads,
            max_position_embeddings=int(hf_config["max_seq_len"]),
            layer_norm_eps=float(hf_config.get("layer_norm_epsilon", 1e-5)),
            activation="gelu",
            tie_word_embeddings=bool(hf_config.get("tie_word_embeddings", True)),
            positions="alibi",
            alibi_bias_max=int(attn.get("alibi_bias_max", 8)),
            qkv_bias=False,
            o_bias=False,
            mlp_bias=False,
            norm_bias=False,
            attn_scale=float(softmax_scale) if softmax_scale is not None else None,
            clip_qkv=float(clip_qkv) if clip_qkv else None,  # 0 / None: no clipping, as in transformers
        )
