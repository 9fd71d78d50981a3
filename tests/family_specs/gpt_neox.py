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
