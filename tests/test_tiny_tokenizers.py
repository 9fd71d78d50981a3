"""The tiny tokenizers every tiny checkpoint uses are the same in every process (issue 38: the WordPiece
trainer's vocabulary followed hash order, and a CrowS-Pairs test failed on some fresh clones)."""

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import family_specs
import pytest

TESTS = Path(__file__).parent

BUILD = """
import hashlib, json, sys
sys.path.insert(0, {tests!r})
import family_specs
print(json.dumps({{kind: hashlib.sha256(family_specs.tiny_tokenizer(kind).backend_tokenizer.to_str().encode())
                  .hexdigest() for kind in family_specs.TOKENIZERS}}))
"""


def _built_in_a_fresh_interpreter(hash_seed: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    out = subprocess.run(
        [sys.executable, "-c", BUILD.format(tests=str(TESTS))], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.process
def test_every_tiny_tokenizer_is_identical_in_interpreters_with_other_hash_seeds():
    # Rust's hash maps (tokenizers) are seeded per process and Python's by PYTHONHASHSEED: two fresh
    # interpreters with different seeds differ in both, and in this one too.
    here = {
        kind: hashlib.sha256(family_specs.tiny_tokenizer(kind).backend_tokenizer.to_str().encode()).hexdigest()
        for kind in family_specs.TOKENIZERS
    }
    assert _built_in_a_fresh_interpreter("1") == here
    assert _built_in_a_fresh_interpreter("2") == here


def test_the_wordpiece_vocabulary_is_specials_characters_continuations_then_words_by_count():
    vocab = family_specs.wordpiece_vocab(["b a b.", "A c"], ["[PAD]", "[UNK]"], vocab_size=12)
    assert list(vocab) == ["[PAD]", "[UNK]", ".", "a", "b", "c", "##.", "##a", "##b", "##c", "[unused0]", "[unused1]"]
    vocab = family_specs.wordpiece_vocab(["cat dog dog bird bird"], ["[UNK]"], vocab_size=22)
    assert list(vocab)[-3:] == ["bird", "dog", "cat"]  # by count, ties by spelling
    assert len(family_specs.wordpiece_vocab(["cat dog dog bird bird"], ["[UNK]"], vocab_size=22)) == 22
    with pytest.raises(ValueError, match="cannot hold"):
        family_specs.wordpiece_vocab(["cat"], ["[UNK]"], vocab_size=5)
