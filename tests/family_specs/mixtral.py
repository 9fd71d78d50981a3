from family_specs import Spec

_TINY = dict(
    num_hidden_layers=2,
    hidden_size=32,
    num_attention_heads=4,
    num_key_value_heads=2,
    intermediate_size=48,
    max_position_embeddings=64,
    num_local_experts=4,
    num_experts_per_tok=2,
)
_PERTURB = ("norm", "gate")  # the router ("mlp.gate") too: decisive routing, not near-uniform probabilities

SPECS = [
    Spec("mixtral", "MixtralForCausalLM", "MixtralConfig", dict(_TINY, rope_theta=500.0), perturb=_PERTURB),
    Spec(
        "mixtral-top1-window",
        "MixtralForCausalLM",
        "MixtralConfig",
        dict(_TINY, num_key_value_heads=1, num_experts_per_tok=1, sliding_window=4),
        perturb=_PERTURB,
        seed=1,
    ),
]
