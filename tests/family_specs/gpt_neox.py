from family_specs import Spec

# head_dim 16, so a quarter of it (4 dims: two frequencies) makes rotary_emb_base matter; weights at std 0.1
# give peaked attention, so the rotary dims and the per-head query_key_value layout change the logits by > 0.1.
_TINY = dict(
    num_hidden_layers=2,
    hidden_size=64,
    num_attention_heads=4,
    intermediate_size=96,
    max_position_embeddings=64,
    initializer_range=0.1,
)

SPECS = [
    # Pythia's layout: parallel residual, a quarter of each head rotating, another rotary base.
    Spec(
        "gpt_neox-parallel",
        "GPTNeoXForCausalLM",
        "GPTNeoXConfig",
        dict(_TINY, use_parallel_residual=True, rotary_pct=0.25, rotary_emb_base=500),
    ),
    Spec(
        "gpt_neox-sequential",
        "GPTNeoXForCausalLM",
        "GPTNeoXConfig",
        dict(_TINY, use_parallel_residual=False, rotary_pct=0.5, hidden_act="gelu_new"),
    ),
]

# --- refused config fields (tests/test_models_refusals.py) ---------------------------------------------
BASE = {
    "model_type": "gpt_neox",
    "vocab_size": 50,
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 96,
    "max_position_embeddings": 64,
}

REFUSED = [
    (
        BASE,
        [
            ({"rope_scaling": {"type": "linear", "factor": 2.0}}, "'linear'"),
            ({"rope_parameters": {"rope_type": "dynamic", "rope_theta": 1e4, "factor": 2.0}}, "'dynamic'"),
            ({"attention_bias": False}, "attention_bias"),
            ({"hidden_act": "gelu_fast"}, "hidden_act"),
            ({"rotary_pct": 0.1875}, "partial_rotary_factor"),  # 3 of 16 dims: odd
            ({"rope_parameters": {"rope_type": "default", "partial_rotary_factor": 2.0}}, "partial_rotary_factor"),
            ({"num_attention_heads": 5}, "num_attention_heads"),
            ({"model_type": "gptj"}, "'gptj'"),
            ({"intermediate_size": None}, "intermediate_size"),
        ],
    )
]
