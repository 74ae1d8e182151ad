"""GraphTokenizer: the in-graph tokenizer equals the Python reference."""

from __future__ import annotations

import json
import random

import pytest
import tensorflow as tf

from albert_tf.errors import TokenizerError
from albert_tf.preprocess.graph_tokenizer import GraphTokenizer
from albert_tf.preprocess.normalize import preprocess_text
from albert_tf.preprocess.tokenizer import AlbertTokenizer


@pytest.fixture(scope="module")
def sp_model_path(fixtures_dir):
    return fixtures_dir / "tokenizer" / "spm.model"


@pytest.fixture(scope="module")
def cases(fixtures_dir):
    path = fixtures_dir / "tokenizer" / "reference_tokenization.json"
    return json.loads(path.read_text())["cases"]


@pytest.fixture(scope="module")
def graph_tok(sp_model_path):
    return GraphTokenizer(sp_model_path)


@pytest.fixture(scope="module")
def py_tok(sp_model_path):
    return AlbertTokenizer(sp_model_path)


def _fuzz_strings(n: int, seed: int = 0) -> list[str]:
    """Random strings over scripts, digits, commas, odd whitespace, accents, compatibility
    characters and case pairs (Unicode <= 13, which Python and TF's ICU agree on)."""
    code_points = [
        *range(0x20, 0x7F), *range(0xA0, 0x250), *range(0x300, 0x400), *range(0x600, 0x700),
        *range(0x900, 0x980), *range(0xE00, 0xE60), *range(0x13A0, 0x13F6), *range(0x1E00, 0x1F00),
        *range(0x2000, 0x2070), *range(0x2460, 0x2500), *range(0xAC00, 0xAC40),
        *range(0xFF00, 0xFF60), *range(0x10400, 0x10450), *range(0x1F600, 0x1F650),
        0x9, 0xA, 0xB, 0x1C, 0x85, 0x1680, 0x3000, 0x130, 0x3A3, 0x1369, 0x660, 0x6F1, 0xFB01,
    ]  # fmt: skip
    alphabet = [chr(c) for c in code_points] + list(" ,,,0123456789") * 8
    rng = random.Random(seed)
    return ["".join(rng.choices(alphabet, k=rng.randint(0, 40))) for _ in range(n)]


def test_all_reference_strings(graph_tok, cases):
    got = graph_tok.tokenize(tf.constant([c["text"] for c in cases]))
    assert got.dtype == tf.int32
    assert got.shape.rank == 2
    assert got.to_list() == [c["ids"] for c in cases]


def test_normalize_equals_preprocess_text(graph_tok, cases):
    texts = [c["text"] for c in cases] + _fuzz_strings(400)
    got = [t.decode("utf-8") for t in graph_tok.normalize(tf.constant(texts)).numpy()]
    assert got == [preprocess_text(t) for t in texts]


def test_invalid_utf8_replaced_as_python_does(graph_tok):
    texts = [b"a\xed\xa0\x80b", b"a\xc0\xafb", b"a\xf4\x90\x80\x80b", b"\xe2\x82a", b"\x80\x80x"]
    got = [t.decode("utf-8") for t in graph_tok.normalize(tf.constant(texts)).numpy()]
    assert got == [preprocess_text(t) for t in texts]
    assert got[0] == "a\ufffd\ufffd\ufffdb"


def test_cased(sp_model_path, cases):
    cased = GraphTokenizer(sp_model_path, do_lower_case=False)
    texts = [c["text"] for c in cases] + _fuzz_strings(100, seed=2)
    got = [t.decode("utf-8") for t in cased.normalize(tf.constant(texts)).numpy()]
    assert got == [preprocess_text(t, lower=False) for t in texts]
    cased_py = AlbertTokenizer(sp_model_path, do_lower_case=False)
    assert cased.tokenize(tf.constant(texts)).to_list() == [cased_py.encode(t) for t in texts]


def test_fuzz_equals_reference(graph_tok, py_tok):
    texts = _fuzz_strings(400, seed=1)
    assert graph_tok.tokenize(tf.constant(texts)).to_list() == [py_tok.encode(t) for t in texts]


def test_digit_comma_resplit(graph_tok):
    assert graph_tok.tokenize(tf.constant(["value 1, 2"])).to_list() == [[104, 8, 219, 12, 8, 66]]


def test_special_ids(graph_tok):
    assert (graph_tok.vocab_size, graph_tok.pad_id, graph_tok.unk_id) == (1000, 0, 1)
    assert (graph_tok.cls_id, graph_tok.sep_id, graph_tok.mask_id) == (2, 3, 4)


def test_edge_inputs(graph_tok, py_tok):
    texts = [b"", b" \t\n\xe3\x80\x80", b"a\xffb", b"\xe2\x82", "x" * 100_000]
    got = graph_tok.tokenize(tf.constant(texts))
    # Invalid UTF-8 is replaced by U+FFFD, exactly as bytes.decode(errors="replace").
    assert got[:4].to_list() == [[], [], [13, 181], []]
    assert got[:4].to_list() == [py_tok.encode(t) for t in texts[:4]]
    assert got[4].numpy().tolist() == py_tok.encode(texts[4])
    empty = graph_tok.tokenize(tf.constant([], tf.string))
    assert empty.shape[0] == 0
    assert empty.to_list() == []
    scalar = graph_tok.tokenize(tf.constant("the"))
    assert scalar.numpy().tolist() == [11]


def test_in_tf_data_and_tf_function(graph_tok, cases):
    texts = [c["text"] for c in cases[:20]]
    expected = [c["ids"] for c in cases[:20]]
    batched = tf.data.Dataset.from_tensor_slices(texts).batch(8).map(graph_tok.tokenize)
    assert [ids for batch in batched for ids in batch.to_list()] == expected
    single = tf.data.Dataset.from_tensor_slices(texts).map(graph_tok.tokenize)
    assert [ids.numpy().tolist() for ids in single] == expected
    fn = tf.function(graph_tok.tokenize, input_signature=[tf.TensorSpec([None], tf.string)])
    assert fn(tf.constant(texts)).to_list() == expected


def test_bad_model(tmp_path):
    with pytest.raises(TokenizerError, match="not found"):
        GraphTokenizer(tmp_path / "missing.model")


def test_nul_keeps_the_rest_of_the_text(graph_tok, py_tok):
    # tf.strings.lower drops everything after a NUL; found by
    # tests/tokenizer/test_tokenizer_properties.py.
    texts = ["a\x00B c", "\x00\x00ΑΣ\x00Σ", "N\x00\U0008a9e1\x06p"]
    got = [t.decode("utf-8") for t in graph_tok.normalize(tf.constant(texts)).numpy()]
    assert got == [preprocess_text(t) for t in texts]
    assert got[0] == "a\x00b c"
    assert graph_tok.tokenize(tf.constant(texts)).to_list() == [py_tok.encode(t) for t in texts]


def test_unicode_tables_follow_python(graph_tok, py_tok, sp_model_path):
    # ICU's NFKD knows U+1E056 (Unicode 15) where Python 3.11 does not; tf.strings.lower lacks
    # Unicode 14's U+2C2F and U+10570. Found by tests/tokenizer/test_tokenizer_properties.py.
    texts = ["x\U0001e056y", "\u2c2f\u0301a\U00010570", "Ab\u2c2f\U0001e056\u00c9\x00\u2c2f"]
    texts += ["a\x00\u2c2f", "\x00\U0001e056\u0301"]  # only after a NUL
    for lower in (True, False):
        tok = graph_tok if lower else GraphTokenizer(sp_model_path, do_lower_case=False)
        got = [t.decode("utf-8") for t in tok.normalize(tf.constant(texts)).numpy()]
        assert got == [preprocess_text(t, lower=lower) for t in texts]
    assert graph_tok.tokenize(tf.constant(texts)).to_list() == [py_tok.encode(t) for t in texts]
