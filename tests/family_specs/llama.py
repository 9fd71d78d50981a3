from conformance import Spec

_TINY = dict(num_hidden_layers=2, hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
             intermediate_size=64, max_position_embeddings=64)

SPECS = [
    Spec("llama", "LlamaForCausalLM", "LlamaConfig", dict(_TINY, rope_theta=500.0, tie_word_embeddings=True)),
    Spec("mistral", "MistralForCausalLM", "MistralConfig", dict(_TINY, num_key_value_heads=1, sliding_window=4)),
]
