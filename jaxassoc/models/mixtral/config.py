"""Mixtral hyper-parameters from a transformers ``config.json`` (v4 or v5 rotary fields), refusing what the
port does not implement: scaled rotary embeddings, activations other than SiLU, expert counts that cannot
route, and any routing other than Mixtral's softmax top-k with renormalised weights. Training-only router
fields (``router_jitter_noise``, ``router_aux_loss_coef``, ``output_router_logits``) are accepted: they do
not change the forward pass in evaluation."""

from __future__ import annotations

from jaxassoc.errors import ModelError
from jaxassoc.models.layers import required_fields, unscaled_rope_theta
from jaxassoc.models.llama_like import LlamaLikeConfig

MODEL_TYPE = "mixtral"

_ROUTING_FIELDS = {
    # Fields of other mixture-of-experts configs (DeepSeek, Qwen-MoE, ...) that change the routing or the
    # expert layout; a Mixtral config has none of them, or only their Mixtral value.
    "scoring_func": ("softmax",),
    "norm_topk_prob": (True,),
    "topk_method": ("greedy",),
    "routed_scaling_factor": (1, 1.0),
    "n_group": (1,),
    "topk_group": (1,),
    "n_shared_experts": (0,),
    "shared_expert_intermediate_size": (0,),
    "decoder_sparse_step": (1,),
    "mlp_only_layers": ([],),
    "first_k_dense_replace": (0,),
    "moe_layer_freq": (1,),
}


def _refuse(field: str, value, supported) -> None:
    raise ModelError(f"mixtral config field {field} = {value!r} is not supported by the mixtral port ({supported})")


def config_from_hf(hf_config: dict) -> LlamaLikeConfig:
    """A LlamaLikeConfig from a transformers ``config.json`` dict; ModelError naming every refused field."""
    if hf_config.get("model_type") != MODEL_TYPE:
        raise ModelError(f"model_type {hf_config.get('model_type')!r} is not a mixtral model")
    if hf_config.get("hidden_act", "silu") != "silu":
        _refuse("hidden_act", hf_config["hidden_act"], "only 'silu': each expert is a SwiGLU")
    for field, allowed in _ROUTING_FIELDS.items():
        if field in hf_config and hf_config[field] is not None and hf_config[field] not in allowed:
            _refuse(field, hf_config[field], f"only Mixtral's softmax top-k routing: {field} must be {allowed[0]!r}")
    with required_fields(MODEL_TYPE):
        hidden = int(hf_config["hidden_size"])
        heads = int(hf_config["num_attention_heads"])
        kv_heads = int(hf_config.get("num_key_value_heads") or heads)
        window = hf_config.get("sliding_window")
        config = LlamaLikeConfig(
            model_type=MODEL_TYPE,
            vocab_size=int(hf_config["vocab_size"]),
            hidden_size=hidden,
            intermediate_size=int(hf_config["intermediate_size"]),
            num_hidden_layers=int(hf_config["num_hidden_layers"]),
            num_attention_heads=heads,
            num_key_value_heads=kv_heads,
            head_dim=int(hf_config.get("head_dim") or hidden // heads),
            rms_norm_eps=float(hf_config["rms_norm_eps"]),
            rope_theta=unscaled_rope_theta(hf_config, MODEL_TYPE, default=1e6),
            max_position_embeddings=int(hf_config["max_position_embeddings"]),
            num_local_experts=int(hf_config.get("num_local_experts", 8)),
            num_experts_per_tok=int(hf_config.get("num_experts_per_tok", 2)),
            tie_word_embeddings=bool(hf_config.get("tie_word_embeddings", False)),
            sliding_window=int(window) if window else None,
        )
    if heads % kv_heads:
        _refuse("num_key_value_heads", kv_heads, f"num_attention_heads = {heads} must be a multiple of it")
    if config.head_dim % 2:
        _refuse("head_dim", config.head_dim, "rotary embeddings need an even head dimension")
    if config.num_local_experts < 1:
        _refuse("num_local_experts", config.num_local_experts, "at least one expert")
    if not 1 <= config.num_experts_per_tok <= config.num_local_experts:
        _refuse(
            "num_experts_per_tok",
            config.num_experts_per_tok,
            f"between 1 and num_local_experts = {config.num_local_experts}",
        )
    return config
