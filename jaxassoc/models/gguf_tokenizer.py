"""The tokenizer a GGUF file describes, built with the ``tokenizers`` library (no torch).

A GGUF carries no ``tokenizer.json``: its metadata holds the vocabulary (``tokenizer.ggml.tokens``),
the BPE merges or token scores, token types (3 = control, 4 = user-defined), special ids and the
BOS/EOS policy. We rebuild llama.cpp's byte-level BPE (``tokenizer.ggml.model == "gpt2"``: SmolLM,
Llama 3) and SentencePiece BPE (``"llama"``: Llama 1/2, Mistral) tokenizers from them.

The pre-tokenizer follows llama.cpp's ``llama-vocab.cpp`` for ``tokenizer.ggml.pre``. For ``smollm``
llama.cpp first isolates every digit (``\\p{N}``) and then applies the GPT-2 split, which is also what
SmolLM2's own ``tokenizer.json`` does (``Digits(individual_digits=True)`` + ``ByteLevel``).
transformers' GGUF tokenizer omits the digit split for ``smollm``; since SmolLM2's vocabulary holds
no multi-digit token and no merge with a digit, the two differ only where a run of two or more
blanks precedes a digit (``"a  1"``: ours ``a|ĠĠ|1`` like llama.cpp, transformers ``a|Ġ|Ġ|1``).
"""

from __future__ import annotations

from typing import Any

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, processors

from jaxassoc.errors import ModelError

_GPT2_SPLIT = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
_LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

# tokenizer.ggml.pre -> the regex splits llama.cpp applies in order (llama-vocab.cpp).
PRE_TOKENIZER_SPLITS: dict[str, tuple[str, ...]] = {
    "default": (_GPT2_SPLIT,),
    "gpt2": (_GPT2_SPLIT,),
    "smollm": (r"\p{N}", _GPT2_SPLIT),
    "llama-bpe": (_LLAMA3_SPLIT,),
    "llama3": (_LLAMA3_SPLIT,),
}

CONTROL, USER_DEFINED = 3, 4


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character map (Radford et al. 2019, ``encoder.py``)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars = list(printable)
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return dict(zip(printable, map(chr, chars)))


def tokenizer_from_metadata(metadata: dict[str, Any], *, source: str = "GGUF file"):
    """A ``PreTrainedTokenizerFast`` from a GGUF file's ``tokenizer.*`` metadata.

    ``tokenizer.ggml.model``: ``gpt2`` (byte-level BPE) or ``llama`` (SentencePiece BPE with byte
    fallback). Special tokens: every control token is a special token (kept whole, skipped by
    ``decode(skip_special_tokens=True)``), every user-defined token an added token. BOS/EOS are
    prepended/appended when ``tokenizer.ggml.add_bos_token``/``add_eos_token`` say so; absent means no
    for ``gpt2`` and, as in llama.cpp and transformers, BOS yes for ``llama``.
    """
    from transformers import PreTrainedTokenizerFast

    kind = metadata.get("tokenizer.ggml.model")
    builders = {"gpt2": _byte_level_bpe, "llama": _sentencepiece_bpe}
    if kind not in builders:
        raise ModelError(
            f"{source}: tokenizer model {kind!r} is not supported; jaxassoc builds {sorted(builders)} "
            "tokenizers (tokenizer.ggml.model) from GGUF metadata"
        )
    tokens = list(metadata.get("tokenizer.ggml.tokens") or ())
    if not tokens:
        raise ModelError(f"{source}: the metadata holds no vocabulary (tokenizer.ggml.tokens); the file is incomplete")
    types = list(metadata.get("tokenizer.ggml.token_type", [1] * len(tokens)))
    tok, vocab, specials_ok = builders[kind](metadata, tokens, source)
    tok.add_special_tokens(
        [
            AddedToken(t, special=True, normalized=False)
            for t, ty in zip(tokens, types)
            if ty == CONTROL and specials_ok(t)
        ]
    )
    tok.add_tokens(
        [AddedToken(t, special=False, normalized=False) for t, ty in zip(tokens, types) if ty == USER_DEFINED]
    )

    def special(name: str) -> str | None:
        index = metadata.get(f"tokenizer.ggml.{name}_token_id")
        if index is None:
            return None
        if not 0 <= index < len(tokens):
            raise ModelError(f"{source}: tokenizer.ggml.{name}_token_id = {index} is outside the vocabulary")
        return tokens[index]

    bos, eos = special("bos"), special("eos")
    add_bos = bool(metadata.get("tokenizer.ggml.add_bos_token", kind == "llama"))
    add_eos = bool(metadata.get("tokenizer.ggml.add_eos_token", False))
    for flag, token, name in ((add_bos, bos, "bos"), (add_eos, eos, "eos")):
        if flag and token is None:
            raise ModelError(f"{source}: add_{name}_token is set but tokenizer.ggml.{name}_token_id is missing")
    single = ([f"{bos}:0"] if add_bos else []) + ["$A:0"] + ([f"{eos}:0"] if add_eos else [])
    pair = single + ([f"{bos}:1"] if add_bos else []) + ["$B:1"] + ([f"{eos}:1"] if add_eos else [])
    used = {t for t, flag in ((bos, add_bos), (eos, add_eos)) if flag}
    tok.post_processor = processors.TemplateProcessing(
        single=single, pair=pair, special_tokens=[(t, vocab[t]) for t in sorted(used)]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=bos,
        eos_token=eos,
        unk_token=special("unknown"),
        pad_token=special("padding"),
        add_bos_token=add_bos,
        add_eos_token=add_eos,
        chat_template=metadata.get("tokenizer.chat_template"),
        clean_up_tokenization_spaces=False,
    )


def _byte_level_bpe(metadata: dict[str, Any], tokens: list[str], source: str):
    """GPT-2 style byte-level BPE with the pre-tokenizer llama.cpp uses for ``tokenizer.ggml.pre``."""
    pre = metadata.get("tokenizer.ggml.pre", "default")
    if pre not in PRE_TOKENIZER_SPLITS:
        raise ModelError(f"{source}: pre-tokenizer {pre!r} is not supported; known: {sorted(PRE_TOKENIZER_SPLITS)}")
    spelling = bytes_to_unicode()
    alphabet = set(spelling.values())
    # A byte-level vocabulary spells every token in GPT-2's byte alphabet; respell any that is not.
    vocab = {
        (t if set(t) <= alphabet else "".join(spelling[b] for b in t.encode("utf-8"))): i for i, t in enumerate(tokens)
    }
    merges = [tuple(m.split(" ", 1)) for m in metadata.get("tokenizer.ggml.merges", [])]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Split(Regex(split), behavior="isolated") for split in PRE_TOKENIZER_SPLITS[pre]]
        + [pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]
    )
    tok.decoder = decoders.ByteLevel()
    # Control tokens spelled outside the byte alphabet are llama.cpp mislabels (as in transformers).
    return tok, vocab, lambda t: set(t) <= alphabet


def _sentencepiece_bpe(metadata: dict[str, Any], tokens: list[str], source: str):
    """SentencePiece BPE (Llama 1/2, Mistral): ``▁`` for spaces, byte fallback to ``<0xNN>`` tokens.

    Files carry no merges, only token scores; SentencePiece merges the adjacent pair whose merged
    piece scores highest, which is BPE with every split of a token ranked by that token's score
    (the ordering of transformers' ``generate_merges``). The ``▁`` prefix goes before the first
    word only when ``tokenizer.ggml.add_space_prefix`` (default true) says so.
    """
    vocab = {t: i for i, t in enumerate(tokens)}
    merges = [tuple(m.split(" ", 1)) for m in metadata.get("tokenizer.ggml.merges", [])]
    if not merges:
        scores = metadata.get("tokenizer.ggml.scores")
        if scores is None or len(scores) != len(tokens):
            raise ModelError(f"{source}: a 'llama' tokenizer needs tokenizer.ggml.scores (one per token) or merges")
        merges = merges_from_scores(vocab, dict(zip(tokens, scores)))
    unk = metadata.get("tokenizer.ggml.unknown_token_id")
    tok = Tokenizer(
        models.BPE(
            vocab=vocab,
            merges=merges,
            fuse_unk=True,
            byte_fallback=True,
            unk_token=tokens[unk] if unk is not None else None,
        )
    )
    prefix = bool(metadata.get("tokenizer.ggml.add_space_prefix", True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(
        replacement="▁", prepend_scheme="first" if prefix else "never", split=False
    )
    steps = [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()]
    tok.decoder = decoders.Sequence(steps + ([decoders.Strip(content=" ", left=1)] if prefix else []))
    return tok, vocab, lambda t: True


def merges_from_scores(vocab: dict[str, int], scores: dict[str, float]) -> list[tuple[str, str]]:
    """Every split ``(l, r)`` of a token into two vocabulary pieces, best merged-token score first.

    Ties: longer left piece first, then longer right piece (as transformers' ``generate_merges``);
    splits of one token keep the order of the pieces' ids.
    """
    merges = []
    for piece, score in scores.items():
        local = [
            (piece[:i], piece[i:], score) for i in range(1, len(piece)) if piece[:i] in vocab and piece[i:] in vocab
        ]
        merges += sorted(local, key=lambda m: (vocab[m[0]], vocab[m[1]]))
    merges.sort(key=lambda m: (m[2], len(m[0]), len(m[1])), reverse=True)
    return [(left, right) for left, right, _ in merges]
