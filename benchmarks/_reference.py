"""The PyTorch reference model of the benchmarks: transformers' ``LlamaForCausalLM`` holding exactly the
weights jaxassoc reads from a GGUF file (``jaxassoc.models.gguf.read_gguf``, dequantised to float32), so
both frameworks compute with the same numbers. transformers' own GGUF loading needs ``accelerate``."""


def torch_llama_from_gguf(path):
    """``(model, hf_config, tokenizer)``: an eval-mode float32 ``LlamaForCausalLM`` with the GGUF's tensors,
    and the file's tokenizer."""
    import numpy as np
    import torch
    import transformers

    from jaxassoc.models.gguf import read_gguf

    hf_config, tensors, tokenizer = read_gguf(path)
    config = transformers.LlamaConfig(**{k: v for k, v in hf_config.items() if k != "model_type"})
    model = transformers.LlamaForCausalLM(config)
    state = {k: torch.from_numpy(np.array(v)) for k, v in tensors.items()}
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert not unexpected and set(missing) <= {"lm_head.weight"}, (missing, unexpected)
    if missing:  # tied head
        model.lm_head.weight = model.model.embed_tokens.weight
    return model.float().eval(), hf_config, tokenizer


def torch_padded_batches(sequences, batch_size, pad_id):
    """``(rows, ids, mask)`` for length-sorted, right-padded torch batches; ``rows`` are input indices.
    The reference side pads each batch to its own longest sequence (no length buckets)."""
    import torch

    order = sorted(range(len(sequences)), key=lambda i: len(sequences[i]))
    for start in range(0, len(order), batch_size):
        rows = order[start : start + batch_size]
        length = max(len(sequences[i]) for i in rows)
        ids = torch.full((len(rows), length), pad_id, dtype=torch.long)
        mask = torch.zeros((len(rows), length), dtype=torch.long)
        for row, i in enumerate(rows):
            ids[row, : len(sequences[i])] = torch.tensor(sequences[i])
            mask[row, : len(sequences[i])] = 1
        yield rows, ids, mask
