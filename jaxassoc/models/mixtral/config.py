"""Mixtral hyper-parameters from a transformers ``config.json`` (v4 or v5 rotary fields), refusing what the
port does not implement: scaled rotary embeddings, activations other than SiLU, expert counts that cannot
route, and any routing other than Mixtral's softmax top-k with renormalised weights. Training-only router
fields (``router_jitter_noise``, ``router_aux_loss_coef``, ``output_router_logits``) are accepted: they do
not change the forward pass in evaluation."""

from __future__ import annotations

from jaxassoc.errors import ModelError
from jaxassoc.models.llama_like import LlamaLikeConfig, config_from_fields
from jaxassoc.models.rope import unscaled_rope_theta

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
    window = hf_config.get("sliding_window")
    config = config_from_fields(
        hf_config,
        MODEL_TYPE,
        rope_theta=unscaled_rope_theta(hf_config, MODEL_TYPE, default=1e6),
        num_local_experts=int(hf_config.get("num_local_experts", 8)),
        num_experts_per_tok=int(hf_config.get("num_experts_per_tok", 2)),
        sliding_window=int(window) if window else None,
    )
    if config.num_local_experts < 1:
        _refuse("num_local_experts", config.num_local_experts, "at least one expert")
    if not 1 <= config.num_experts_per_tok <= config.num_local_experts:
        _refuse(
            "num_experts_per_tok",
            config.num_experts_per_tok,
            f"between 1 and num_local_experts = {config.num_local_experts}",
        )
    return config
