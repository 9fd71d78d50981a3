"""Static embeddings: loaders against files written here byte by byte, case handling, OOV policy."""

import struct

import numpy as np
import pytest

from jaxassoc.embeddings.static import (
    StaticEmbeddings,
    load_embedded_glove,
    load_glove_text,
    load_word2vec_binary,
)
from jaxassoc.errors import DataError, InputError

WORDS = ["the", "Paris", "paris", "new york", "café"]
MATRIX = np.arange(15, dtype=np.float32).reshape(5, 3) / 7


def test_glove_text_roundtrip_with_spaces_in_words(tmp_path):
    path = tmp_path / "g.txt"
    path.write_text(
        "".join(f"{w} {' '.join(repr(float(x)) for x in row)}\n" for w, row in zip(WORDS, MATRIX)),
        encoding="utf-8",
    )
    emb = load_glove_text(path, lowercase=False)
    assert list(emb.words) == WORDS
    np.testing.assert_array_equal(emb.matrix, MATRIX)
    assert emb.lookup(["new york"]).vectors.tolist() == [MATRIX[3].tolist()]


def test_word2vec_binary_roundtrip(tmp_path):
    words = ["the", "Paris", "paris", "New_York", "café"]  # the format forbids spaces in words
    path = tmp_path / "w.bin"
    with path.open("wb") as f:
        f.write(b"5 3\n")
        for w, row in zip(words, MATRIX):
            f.write(w.encode() + b" " + struct.pack("<3f", *row) + b"\n")
    emb = load_word2vec_binary(path)
    assert list(emb.words) == words and not emb.lowercase
    np.testing.assert_array_equal(emb.matrix, MATRIX)
    assert list(load_word2vec_binary(path, limit=2).words) == words[:2]


def test_truncated_word2vec_file_is_a_data_error(tmp_path):
    path = tmp_path / "w.bin"
    path.write_bytes(b"2 3\nthe " + struct.pack("<3f", 1, 2, 3))
    with pytest.raises(DataError, match="ends after 1 of the 2 words its header announces"):
        load_word2vec_binary(path)


def test_case_handling():
    cased = StaticEmbeddings(WORDS, MATRIX, lowercase=False)
    assert cased.lookup(["Paris"]).vectors.tolist() == [MATRIX[1].tolist()]
    assert cased.lookup(["paris"]).vectors.tolist() == [MATRIX[2].tolist()]
    lower = StaticEmbeddings(WORDS, MATRIX, lowercase=True)
    # the first spelling in the file wins; queries are lower-cased
    assert lower.lookup(["PARIS"]).vectors.tolist() == [MATRIX[1].tolist()]
    assert "CAFÉ" in lower and "CAFÉ" not in cased


def test_oov_is_reported_in_query_order():
    emb = StaticEmbeddings(WORDS, MATRIX, lowercase=True)
    words = ["the", "a", "paris", "café", "new york", "the"]
    out = emb.lookup(words, max_oov_share=0.2)
    assert out.kept_words == ["the", "paris", "café", "new york", "the"]
    assert out.lost_words == ["a"]
    np.testing.assert_array_equal(out.vectors, MATRIX[[0, 1, 4, 3, 0]])


def test_oov_share_above_threshold_names_the_set_and_words():
    emb = StaticEmbeddings(WORDS, MATRIX, lowercase=True)
    with pytest.raises(InputError, match=r"'Pleasant': 2 of 4 words .*\['zz', 'yy'\]"):
        emb.lookup(["the", "zz", "paris", "yy"], name="Pleasant")
    with pytest.raises(InputError, match="no word of it"):
        emb.lookup(["zz", "yy"], name="Pleasant", max_oov_share=1.0)
    with pytest.raises(InputError, match=r"1 of 2 words.*\['zz'\]"):
        emb.lookup(["the", "zz"], oov="error")
    with pytest.raises(InputError, match="empty"):
        emb.lookup([], name="Pleasant")


def test_embedded_glove_matches_its_files():
    import pandas as pd

    from jaxassoc.resources import glove_files

    emb = load_embedded_glove()
    matrix_path, index_path = glove_files()
    words = pd.read_parquet(index_path)["index"].tolist()
    assert emb.matrix.shape == (400_000, 50) and emb.lowercase
    raw = np.load(matrix_path, mmap_mode="r")
    for w in ("the", "flower", "tarantula", "short-term"):
        np.testing.assert_array_equal(emb.lookup([w.upper()]).vectors[0], raw[words.index(w)])


# --- malformed files are refused by name (file, line), never misread --------------------------------


def _glove(tmp_path, content: bytes):
    path = tmp_path / "g.txt"
    path.write_bytes(content)
    return path


def test_glove_row_with_an_extra_number_is_refused_naming_file_and_line(tmp_path):
    path = _glove(tmp_path, b"the 1 2 3\nbusiness -0.36044 4 5 6\nflower 7 8 9\n")
    with pytest.raises(DataError, match=r"g\.txt, line 2: 5 fields where a word and 3 numbers"):
        load_glove_text(path)
    with pytest.raises(DataError, match=r"g\.txt, line 2: 3 fields"):
        load_glove_text(_glove(tmp_path, b"the 1 2 3\nbusiness 4 5\n"))


def test_glove_utf8_bom_is_dropped_and_other_encodings_are_refused(tmp_path):
    emb = load_glove_text(_glove(tmp_path, "\ufeffthe 1 2 3\ncafé 4 5 6\n".encode()))
    assert list(emb.words) == ["the", "café"] and "the" in emb
    with pytest.raises(DataError, match=r"g\.txt, line 2, column 4: b'\\xe9' is not UTF-8.*Latin-1"):
        load_glove_text(_glove(tmp_path, "the 1 2 3\ncafé 4 5 6\n".encode("latin-1")))


def test_glove_non_numbers_and_non_finite_entries_name_the_line_and_word(tmp_path):
    with pytest.raises(DataError, match=r"line 2 \(word 'business'\): 'x' is not a number"):
        load_glove_text(_glove(tmp_path, b"the 1 2 3\nbusiness 4 x 6\n"))
    for bad in (b"nan", b"inf", b"-inf"):
        with pytest.raises(DataError, match=r"line 3 \(word 'flower'\): the vector has NaN or infinite"):
            load_glove_text(_glove(tmp_path, b"the 1 2 3\nbusiness 4 5 6\nflower 7 " + bad + b" 9\n"))


def test_word2vec_text_header_is_read_and_its_counts_checked(tmp_path):
    emb = load_glove_text(_glove(tmp_path, b"2 3\nthe 1 2 3\nbusiness 4 5 6\n"))
    assert list(emb.words) == ["the", "business"] and emb.dim == 3
    with pytest.raises(DataError, match=r"header \(line 1\) announces 3 words but the file has 2"):
        load_glove_text(_glove(tmp_path, b"3 3\nthe 1 2 3\nbusiness 4 5 6\n"))


def test_glove_crlf_and_blank_lines_read_as_plain_rows(tmp_path):
    emb = load_glove_text(_glove(tmp_path, b"the 1 2 3\r\n\r\nbusiness 4 5 6\r\n"))
    assert list(emb.words) == ["the", "business"]
    np.testing.assert_array_equal(emb.matrix, [[1, 2, 3], [4, 5, 6]])


def _word2vec(path, header: bytes, entries) -> None:
    with path.open("wb") as f:
        f.write(header)
        for word, row in entries:
            f.write(word + b" " + struct.pack("<3f", *row) + b"\n")


def test_word2vec_binary_refuses_non_utf8_words_extra_data_and_nan(tmp_path):
    path = tmp_path / "w.bin"
    _word2vec(path, b"2 3\n", [(b"the", (1, 2, 3)), ("café".encode("latin-1"), (4, 5, 6))])
    with pytest.raises(DataError, match=r"w\.bin, word 1: b'caf\\xe9' is not UTF-8"):
        load_word2vec_binary(path)
    _word2vec(path, b"1 3\n", [(b"the", (1, 2, 3)), (b"cafe", (4, 5, 6))])
    with pytest.raises(DataError, match=r"w\.bin has data after the 1 words its header announces"):
        load_word2vec_binary(path)
    assert list(load_word2vec_binary(path, limit=1).words) == ["the"]
    _word2vec(path, b"2 3\n", [(b"the", (1, 2, 3)), (b"cafe", (4, float("nan"), 6))])
    with pytest.raises(DataError, match=r"w\.bin, word 1 \(word 'cafe'\): the vector has NaN"):
        load_word2vec_binary(path)


def test_glove_text_case_follows_the_files_vocabulary(tmp_path):
    """A cased GloVe file (840B) keeps "Paris" and "paris" apart; an all-lower-case one (6B) lower-cases
    queries. The app loads every GloVe text file through this default."""
    cased = load_glove_text(_glove(tmp_path, b"the 1 2\nParis 3 4\nparis 5 6\n"))
    assert not cased.lowercase
    assert cased.lookup(["Paris", "paris"]).vectors.tolist() == [[3.0, 4.0], [5.0, 6.0]]
    lower = load_glove_text(_glove(tmp_path, b"the 1 2\nparis 5 6\n"))
    assert lower.lowercase
    assert lower.lookup(["Paris"]).vectors.tolist() == [[5.0, 6.0]]
    assert load_glove_text(_glove(tmp_path, b"the 1 2\nParis 3 4\n"), lowercase=True).lowercase


def test_a_word2vec_header_overstating_its_count_is_a_data_error_not_a_memory_error(tmp_path):
    path = tmp_path / "w.bin"
    path.write_bytes(b"2000000000 300\nthe " + struct.pack("<300f", *range(300)) + b"\n")  # 2.2 TiB announced
    with pytest.raises(DataError, match="ends after 1 of the 2000000000 words its header announces"):
        load_word2vec_binary(path)
