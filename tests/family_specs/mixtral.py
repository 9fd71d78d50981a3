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

# --- tests/test_models_mixtral.py: 4 experts of width 24, top-2, vocabulary 61 ---------------------------
_PORT = dict(
    vocab_size=61,
    hidden_size=32,
    intermediate_size=24,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=64,
    num_local_experts=4,
    num_experts_per_tok=2,
)

PORT = Spec("mixtral-port", "MixtralForCausalLM", "MixtralConfig", _PORT, perturb=("norm", "mlp.gate"))
"""4 experts, top-2, GQA, a decisive router (saved in the hub's per-expert layout)."""

# --- refused config fields (tests/test_models_refusals.py) ---------------------------------------------
BASE = dict(_PORT, model_type="mixtral", rms_norm_eps=1e-5)

REFUSED = [
    (
        BASE,
        [
            ({"hidden_act": "gelu"}, "hidden_act = 'gelu'"),
            ({"rope_scaling": {"rope_type": "linear", "factor": 2.0}}, "rope_type = 'linear'"),
            ({"rope_parameters": {"rope_type": "yarn", "rope_theta": 1e6}}, "rope_type = 'yarn'"),
            ({"num_experts_per_tok": 5}, "num_experts_per_tok = 5"),
            ({"num_experts_per_tok": 0}, "num_experts_per_tok = 0"),
            ({"num_local_experts": 0, "num_experts_per_tok": 0}, "num_local_experts = 0"),
            ({"scoring_func": "sigmoid"}, "scoring_func = 'sigmoid'"),
            ({"norm_topk_prob": False}, "norm_topk_prob = False"),
            ({"topk_method": "group_limited_greedy"}, "topk_method = 'group_limited_greedy'"),
            ({"routed_scaling_factor": 2.5}, "routed_scaling_factor = 2.5"),
            ({"n_group": 8}, "n_group = 8"),
            ({"n_shared_experts": 1}, "n_shared_experts = 1"),
            ({"shared_expert_intermediate_size": 64}, "shared_expert_intermediate_size = 64"),
            ({"decoder_sparse_step": 2}, "decoder_sparse_step = 2"),
            ({"mlp_only_layers": [0]}, r"mlp_only_layers = \[0\]"),
            ({"first_k_dense_replace": 1}, "first_k_dense_replace = 1"),
            ({"num_key_value_heads": 3}, "num_key_value_heads = 3"),
            ({"head_dim": 7}, "head_dim = 7"),
            ({"model_type": "mistral"}, "'mistral' is not a mixtral model"),
            ({"hidden_size": None}, "lacks the required field 'hidden_size'"),
        ],
    )
]
