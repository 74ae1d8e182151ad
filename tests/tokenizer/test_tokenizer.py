"""AlbertTokenizer: the plain-Python reference against the original code's ids."""

from __future__ import annotations

import json

import pytest

from albert_tf.errors import TokenizerError
from albert_tf.preprocess.tokenizer import AlbertTokenizer


@pytest.fixture(scope="module")
def sp_model_path(fixtures_dir):
    return fixtures_dir / "tokenizer" / "spm.model"


@pytest.fixture(scope="module")
def reference(fixtures_dir):
    return json.loads((fixtures_dir / "tokenizer" / "reference_tokenization.json").read_text())


@pytest.fixture(scope="module")
def tok(sp_model_path):
    return AlbertTokenizer(sp_model_path)


def test_all_reference_strings(tok, reference):
    cases = reference["cases"]
    assert len(cases) == 166
    for case in cases:
        assert tok.encode(case["text"]) == case["ids"], case["text"]
        assert tok.tokenize(case["text"]) == case["pieces"], case["text"]


def test_special_ids(tok, reference):
    special = reference["special_ids"]
    assert (tok.pad_id, tok.unk_id, tok.cls_id, tok.sep_id, tok.mask_id) == (
        special["<pad>"],
        special["<unk>"],
        special["[CLS]"],
        special["[SEP]"],
        special["[MASK]"],
    )
    assert tok.vocab_size == 1000


def test_digit_comma_resplit(tok):
    # SentencePiece alone gives "▁", "1,"; the original re-encodes "1" (-> "▁1") and adds ",".
    assert tok.sp_model.encode("1,", out_type=str) == ["▁", "1,"]
    assert tok.tokenize("1,") == ["▁", "▁1", ","]
    assert tok.tokenize("value 1, 2") == ["▁value", "▁", "▁1", ",", "▁", "2"]


def test_ids_tokens_round_trip_and_word_start(tok):
    ids = tok.encode("The value of a thread")
    pieces = tok.convert_ids_to_tokens(ids)
    assert tok.convert_tokens_to_ids(pieces) == ids
    assert [tok.is_word_start(i) for i in ids] == [p.startswith("▁") for p in pieces]
    assert tok.is_word_start(tok.encode("the")[0])
    assert not tok.is_word_start(tok.cls_id)
    assert tok.convert_tokens_to_ids(["not-a-piece"]) == [tok.unk_id]
    with pytest.raises(TokenizerError, match="outside the vocabulary"):
        tok.convert_ids_to_tokens([1000])


@pytest.mark.parametrize(
    ("text", "expected"),
    # Invalid UTF-8 becomes U+FFFD, which SentencePiece's normalizer treats as a space.
    [("", []), (" \t\n", []), ("☃", [8, 1]), (b"\xff", []), (b"a\xffb", [13, 181])],
)
def test_edge_inputs(tok, text, expected):
    assert tok.encode(text) == expected


def test_long_input(tok):
    ids = tok.encode("the " * 25000)  # 100k characters
    assert ids == tok.encode("the") * 25000


def test_missing_model(tmp_path):
    with pytest.raises(TokenizerError, match=r"not found"):
        AlbertTokenizer(tmp_path / "nope.model")


def test_corrupt_model(tmp_path):
    bad = tmp_path / "bad.model"
    bad.write_bytes(b"this is not a sentencepiece model")
    with pytest.raises(TokenizerError, match=r"corrupt or not a SentencePiece model") as info:
        AlbertTokenizer(bad)
    assert "\n" not in str(info.value)


def test_model_without_mask(tmp_path, sp_model_path):
    from sentencepiece import sentencepiece_model_pb2

    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(sp_model_path.read_bytes())
    for piece in proto.pieces:
        if piece.piece == "[MASK]":
            piece.piece = "[MSK]"
    path = tmp_path / "nomask.model"
    path.write_bytes(proto.SerializeToString())
    with pytest.raises(TokenizerError, match=r"lacks ALBERT's special piece\(s\) \[MASK\]"):
        AlbertTokenizer(path)


def test_lone_surrogates_read_as_their_bytes(tok):
    # A str from surrogateescape decoding made SentencePiece raise a pybind RuntimeError; found
    # by tests/tokenizer/test_tokenizer_properties.py.
    assert tok.encode("a\ud800b\udcff") == tok.encode(b"a\xed\xa0\x80b\xed\xb3\xbf")
    assert tok.encode("x\ud800") == tok.encode("x\ufffd\ufffd\ufffd")
