"""BERT / RoBERTa: the refused config fields (the tiny checkpoints are ``family_specs.TINY``'s "bert",
"bert-encoder" and "roberta"). No ``SPECS``: BERT is not in the causal conformance suite."""

BASE = {  # all-MiniLM-L6-v2's config.json (jaxassoc.resources.minilm_dir())
    "_name_or_path": "nreimers/MiniLM-L6-H384-uncased",
    "architectures": ["BertModel"],
    "attention_probs_dropout_prob": 0.1,
    "gradient_checkpointing": False,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "hidden_size": 384,
    "initializer_range": 0.02,
    "intermediate_size": 1536,
    "layer_norm_eps": 1e-12,
    "max_position_embeddings": 512,
    "model_type": "bert",
    "num_attention_heads": 12,
    "num_hidden_layers": 6,
    "pad_token_id": 0,
    "position_embedding_type": "absolute",
    "transformers_version": "4.8.2",
    "type_vocab_size": 2,
    "use_cache": True,
    "vocab_size": 30522,
}

REFUSED = [
    (
        BASE,
        [
            ({"position_embedding_type": "relative_key"}, "position_embedding_type"),
            ({"is_decoder": True}, "is_decoder"),
            ({"add_cross_attention": True}, "add_cross_attention"),
            ({"hidden_act": "swish"}, "hidden_act"),
        ],
    )
]
