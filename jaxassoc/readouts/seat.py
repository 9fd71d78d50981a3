"""SEAT's sentences (May et al. 2019; docs/methods.md §8): a WEAT suite's words slotted into bleached
templates (:mod:`jaxassoc.data.seat`), each filled sentence one member of its set, and the check that the
encoder can read every word.

- :func:`check_encodable`: InputError naming the test, set and word when a word tokenises to the
  encoder's unknown token (run before any forward pass).
- :func:`seat_suite`: the sentence version of a WEAT suite (same ids, names and set labels).

The tests on the sentences' vectors: :mod:`jaxassoc.suites.seat`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from jaxassoc.data.seat import SeatTemplates
from jaxassoc.data.weat import WeatSuite
from jaxassoc.errors import InputError


def named_sets(test) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """A test's four sets as (name, words): X, Y, A, B."""
    return (
        (test.x_name, test.targets_x),
        (test.y_name, test.targets_y),
        (test.a_name, test.attributes_a),
        (test.b_name, test.attributes_b),
    )


def check_encodable(tests: Sequence[Any], tokenizer: Any) -> None:
    """InputError for the first word (test, set, word) that the tokenizer turns into its unknown token, in
    whole or in part: the encoder would see ``[UNK]`` instead of the word. A tokenizer without an unknown
    token (byte-level BPE) represents every word."""
    unk = getattr(tokenizer, "unk_token_id", None)
    if unk is None:
        return
    for test in tests:
        for name, words in named_sets(test):
            for word in words:
                if unk in tokenizer(word, add_special_tokens=False)["input_ids"]:
                    raise InputError(
                        f"test {test.id}: word set {name!r}: the encoder cannot represent {word!r} (it tokenises "
                        f"to the unknown token {tokenizer.unk_token!r}); remove the word or use a model whose "
                        f"vocabulary covers it"
                    )


def seat_suite(suite: WeatSuite, templates: SeatTemplates) -> WeatSuite:
    """The suite with every word replaced by its filled templates (:meth:`SeatTemplates.sentences`), in
    word order: a set of n words of one form with k templates holds n·k sentences."""

    def fill(words: Sequence[str]) -> tuple[str, ...]:
        return tuple(s for w in words for s in templates.sentences(w))

    tests = tuple(
        dataclasses.replace(
            t,
            targets_x=fill(t.targets_x),
            targets_y=fill(t.targets_y),
            attributes_a=fill(t.attributes_a),
            attributes_b=fill(t.attributes_b),
        )
        for t in suite.tests
    )
    return WeatSuite(suite.name, tests, suite.source)
