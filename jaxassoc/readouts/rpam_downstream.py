"""RPAM Experiment 3 downstream: an instruct model rates each Bellezza word 1-5 (Hodel et al. 2026, §5
Experiment 3, App. F "Bellezza rating on Mistral-Instruct"); RPAM Valence is compared with those ratings by
:func:`jaxassoc.suites.rpam.bellezza_downstream`.

The paper's adapted prompt is used verbatim, with the word in ASCII double quotes; the model's chat template
wraps it when ``chat_template`` is on. Decoding is greedy for at most ``max_new_tokens`` tokens and stops
early once every row of a batch has produced a digit or an end token; the rating is the first number of the
answer when it is a whole 1-5, otherwise the answer is counted as unparsable and dropped.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import pandas as pd

from jaxassoc.errors import ConfigError
from jaxassoc.models.base import LanguageModel
from jaxassoc.models.decoding import greedy_generate
from jaxassoc.readouts.rpam_prompts import encode_prompts

RATING_PROMPT = (
    "The purpose is to determine whether one has positive or negative feelings about different words. "
    "Words can evoke various emotions. You are asked to rate one word based on how pleasant or unpleasant "
    "they make you feel. Rate the word according to this 5-point scale:\n"
    "- If the word has a very pleasant meaning for you, rate it as 5.\n"
    "- If the word has a somewhat pleasant meaning, rate it as 4.\n"
    "- If the word has no pleasant or unpleasant meaning, rate it as 3.\n"
    "- If the word has a somewhat unpleasant meaning, rate it as 2.\n"
    "- If the word has a very unpleasant meaning, rate it as 1.\n"
    'Try to use all 5 points on the rating scale. The rating of the word "{word}" is:'
)
"""App. F, "Our adapted prompt" (the PDF's typeset quotes around WORD as ASCII ``"``)."""

_DIGIT = re.compile(r"\d")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)?")


def rating_prompts(model: LanguageModel, words: Sequence[str], *, chat_template: bool) -> list[list[int]]:
    """Token ids of the rating prompt of each word, wrapped in the model's chat template when asked."""
    texts = [RATING_PROMPT.format(word=w) for w in words]
    if not chat_template:
        return encode_prompts(model, texts)
    if not getattr(model.tokenizer, "chat_template", None):
        raise ConfigError(
            f"model {model.name!r} has no chat template: set metric.chat_template=false to use the plain prompt"
        )
    chats = [
        model.tokenizer.apply_chat_template(
            [{"role": "user", "content": t}], add_generation_prompt=True, tokenize=False
        )
        for t in texts
    ]
    return encode_prompts(model, chats, add_bos=False)  # the template writes its own special tokens


def stop_tokens(tokenizer) -> np.ndarray:
    """Boolean mask over the vocabulary: tokens that decide the answer (a digit) or end it (special tokens)."""
    specials = set(tokenizer.all_special_ids)
    return np.array(
        [i in specials or bool(_DIGIT.search(tokenizer.decode([i]))) for i in range(len(tokenizer))], dtype=bool
    )


def parse_rating(answer: str) -> int | None:
    """The first number of the answer if it is a whole 1-5, else None (unparsable): "10" (one token in
    GPT-2's vocabulary) or "3.5" is not a rating of 1 or 3."""
    match = _NUMBER.search(answer)
    return int(match.group()) if match and match.group() in ("1", "2", "3", "4", "5") else None


def model_ratings(
    model: LanguageModel,
    words: Sequence[str],
    *,
    chat_template: bool = True,
    max_new_tokens: int = 4,
    batch_size: int = 32,
    progress: bool = False,
) -> pd.DataFrame:
    """The model's 1-5 rating of each word: columns word, answer (decoded), rating (NaN if unparsable)."""
    prompts = rating_prompts(model, words, chat_template=chat_template)
    new = greedy_generate(
        model,
        prompts,
        max_new_tokens=max_new_tokens,
        stop=stop_tokens(model.tokenizer),
        batch_size=batch_size,
        progress=progress,
    )
    answers = [model.tokenizer.decode(ids) for ids in new]
    ratings = [parse_rating(a) for a in answers]
    return pd.DataFrame(
        {"word": list(words), "answer": answers, "rating": pd.array(ratings, dtype="Int64").astype(float)}
    )
