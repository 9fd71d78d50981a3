from family_specs import Spec

# Sliding window 3 on the alternating local layers (sequences up to 13 tokens exceed it), soft-caps small
# enough to bite (initializer_range 0.3: logits and attention scores reach several units), GQA, a head_dim unrelated to hidden / heads.
_TINY = dict(
    num_hidden_layers=3,
    hidden_size=32,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    intermediate_size=64,
    max_position_embeddings=64,
    query_pre_attn_scalar=24,
    sliding_window=3,
    attn_logit_softcapping=5.0,
    final_logit_softcapping=3.0,
    initializer_range=0.3,
)

SPECS = [
    Spec("gemma2", "Gemma2ForCausalLM", "Gemma2Config", dict(_TINY, rope_theta=500.0)),
    Spec(
        "gemma2-untied",
        "Gemma2ForCausalLM",
        "Gemma2Config",
        dict(
            _TINY,
            tie_word_embeddings=False,
            hidden_activation="gelu",
            layer_types=["full_attention", "sliding_attention", "sliding_attention"],
        ),
        seed=1,
    ),
]
