"""Every tokenizer we ship gives the original ALBERT ids on generated text (hypothesis).

The original tokenization (google-research/albert `tokenization.py`: `preprocess_text`, then
SentencePiece, then the re-split of pieces ending in a digit and ",") is transcribed in
`_original_ids` and held to the fixture's 166 reference strings. The generated text mixes words
in any case, digit groups with commas ("$5,000,"), quotes (``, '', "), parentheses, ">>>",
accents, Greek, CJK, emoji and odd whitespace, and any other character now and then; NUL and
lone surrogates are left out (ONNX Runtime's strings cannot hold them;
tests/tokenizer/test_tokenizer_properties.py feeds them to the Python and in-graph tokenizers).

Each tokenizer in TOKENIZERS is built once per module: a factory takes pytest's `request` (for
other fixtures) and the SentencePiece model and returns `(encode, limit, excused)`,
`encode(texts)` giving each text's ids without [CLS]/[SEP], `limit` how many ids it can give
(None: all) and `excused(text)` whether the tokenizer is documented to differ on that text (None:
on none). A test fails on the first other string whose ids differ. Only keras-hub's preset has
excuses: the digit-comma re-split and the word-final capital sigma its SentencePiece normalizer
cannot express (export/keras_hub_tokenizer.py, docs/guides/converting.md). Each tokenizer sees ALBERT_TF_TOKENIZER_STRINGS
generated strings in batches of 4 (default 200); by hand:

    ALBERT_TF_TOKENIZER_STRINGS=10000 python -m pytest tests/tokenizer/test_tokenizer_agreement.py
"""

from __future__ import annotations

import json
import os
import string
import unicodedata
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from albert_tf.preprocess.tokenizer import AlbertTokenizer

BATCH = 4
STRINGS = int(os.environ.get("ALBERT_TF_TOKENIZER_STRINGS", "200"))

Encode = Callable[[list[str]], list[list[int]]]
Factory = Callable[..., tuple[Encode, int | None, Callable[[str], bool] | None]]


def _original_ids(sp, text: str, lower: bool = True) -> list[int]:
    """The original's `preprocess_text(text, lower=lower)` then `encode_ids(sp, text)`, with
    the `sentencepiece` processor `sp`. Its re-split meant to drop a "▁" the re-encoding
    adds, but compares `str` with `bytes` under Python 3, so it never does."""
    text = " ".join(text.strip().split())
    text = unicodedata.normalize("NFKD", text)
    text = "".join(c for c in text if not unicodedata.combining(c))
    if lower:
        text = text.lower()
    pieces = []
    for piece in sp.encode_as_pieces(text):
        if len(piece) > 1 and piece[-1] == "," and piece[-2].isdigit():
            pieces += sp.encode_as_pieces(piece[:-1].replace("\u2581", "")) + [piece[-1]]
        else:
            pieces.append(piece)
    return [sp.piece_to_id(piece) for piece in pieces]


def _python(request, sp_model: Path):
    tokenizer = AlbertTokenizer(sp_model)
    return (lambda texts: [tokenizer.encode(t) for t in texts]), None, None


def _preprocess_saved_model(request, sp_model: Path):
    """preprocess/ as `export` writes it, loaded as a user loads it; its `.tokenize`."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the SavedModel's ops)

    from albert_tf.preprocess.preprocess_model import save_preprocess_model

    path = request.getfixturevalue("tmp_path_factory").mktemp("agreement") / "preprocess"
    model = tf.saved_model.load(str(save_preprocess_model(sp_model, path)))
    return (lambda texts: model.tokenize(tf.constant(texts)).to_list()), None, None


def _onnx_text_encoder(file: str) -> Callable:
    def factory(request, sp_model: Path):
        """`export --onnx`'s raw-string encoder: the ids it packs between [CLS] and [SEP]."""
        from albert_tf.export.onnx.writer import run, session

        export = request.getfixturevalue("sp_onnx")
        sess = session(export["bundle"].onnx / file)

        def encode(texts: list[str]) -> list[list[int]]:
            got = run(sess, {"text": np.array(texts, dtype=object)})
            rows = []
            for ids, mask in zip(got["input_word_ids"], got["input_mask"], strict=True):
                ids = ids[: mask.sum()].tolist()
                assert ids[0] == 2 and ids[-1] == 3  # [CLS], [SEP] of the fixture model
                rows.append(ids[1:-1])
            return rows

        return encode, export["seq_length"] - 2, None

    return factory


def _hf_tokenizer(request, sp_model: Path):
    """`export --hf`'s folder through `AutoTokenizer.from_pretrained(..., trust_remote_code=True)`
    (its exact tokenizer; the plain tokenizer.json's differences are pinned in
    tests/export/test_export_hf.py)."""
    pytest.importorskip("transformers")
    from albert_tf.export.hf_tokenizer import hf_tokenizer

    tokenizer = hf_tokenizer(request.getfixturevalue("sp_onnx")["bundle"].hf, True)
    return (lambda texts: tokenizer(texts, add_special_tokens=False)["input_ids"]), None, None


def _keras_hub_tokenizer(request, sp_model: Path):
    """`export --keras-hub`'s preset through `keras_hub.models.AlbertTokenizer.from_preset`."""
    pytest.importorskip("keras_hub")
    import sentencepiece as spm

    from albert_tf.export.keras_hub_tokenizer import differs_from_albert, preset_tokenizer

    encode = preset_tokenizer(request.getfixturevalue("sp_onnx")["bundle"].keras_hub)
    sp = spm.SentencePieceProcessor(model_file=str(sp_model))
    return (
        (lambda texts: [encode(t) for t in texts]),
        None,
        (lambda text: differs_from_albert(sp, text, lower=True)),
    )


TOKENIZERS: dict[str, Factory] = {
    "python": _python,
    "preprocess_saved_model": _preprocess_saved_model,
    "onnx_text_encoder": _onnx_text_encoder("text_encoder.onnx"),
    "onnx_text_encoder_int8": _onnx_text_encoder("text_encoder_int8.onnx"),
    "hf_tokenizer": _hf_tokenizer,
    "keras_hub_preset": _keras_hub_tokenizer,
}


@pytest.fixture(scope="module")
def sp_model(fixtures_dir) -> Path:
    return fixtures_dir / "tokenizer" / "spm.model"


@pytest.fixture(scope="module")
def original(sp_model) -> Callable[[str], list[int]]:
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=str(sp_model))
    return lambda text: _original_ids(sp, text)


# The Python reference is quick; the others build a SavedModel or need the session's exports.
@pytest.fixture(
    scope="module",
    params=[
        pytest.param(name, marks=[] if name == "python" else pytest.mark.slow)
        for name in TOKENIZERS
    ],
)
def tokenizer(request, sp_model) -> tuple:
    return (request.param, *TOKENIZERS[request.param](request, sp_model))


def test_transcription_gives_the_reference_ids(fixtures_dir, original):
    reference = json.loads((fixtures_dir / "tokenizer" / "reference_tokenization.json").read_text())
    cases = reference["cases"]
    assert len(cases) == 166
    assert [original(case["text"]) for case in cases] == [case["ids"] for case in cases]


_WORDS = [
    "the", "value", "of", "a", "thread", "said", "hello", "world", "it's", "don't", "O'Neil",
    "naïve", "café", "résumé", "Ångström", "Straße", "e\u0301te\u0301", "ﬁne", "x²", "①",
    "ΣΑΣ", "Ὀδυσσεύς", "λόγος", "ΟΔΟΣ", "中文", "日本語", "한국어", "Москва",
    "😀", "👍🏽", "🇺🇸", "🧑‍💻",
]  # fmt: skip
_PUNCTUATION = ["``", "''", '"', "(", ")", ">>>", "...", "--", ",", ".", "'", "-", "?", "!", ";"]
_SPACES = [" ", " ", " ", "  ", "", "\t", "\n", "\r\n", "\u00a0", "\u2003", "\u3000", "\u200b"]


def _cased(word: str, case: str) -> str:
    return getattr(word, case)() if case else word


_any_case = st.sampled_from(["", "lower", "upper", "title", "swapcase"])
_words = st.builds(
    _cased,
    st.one_of(st.sampled_from(_WORDS), st.text(string.ascii_letters, min_size=1, max_size=10)),
    _any_case,
)
_digit_groups = st.builds(
    lambda sign, groups, tail: sign + ",".join(groups) + tail,
    st.sampled_from(["", "", "$", "€", "#", "("]),
    st.lists(st.from_regex(r"[0-9]{1,3}", fullmatch=True), min_size=1, max_size=4),
    st.sampled_from(["", ",", ",", ".", ",,", "%", ")", "),"]),
)
_other = st.text(
    st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), min_size=1, max_size=3
)
_token = st.one_of(_words, _words, _digit_groups, st.sampled_from(_PUNCTUATION), _other)
texts = st.lists(st.tuples(_token, st.sampled_from(_SPACES)), max_size=10).map(
    lambda parts: "".join(token + space for token, space in parts)
)


@settings(max_examples=max(1, STRINGS // BATCH))
@given(batch=st.lists(texts, min_size=BATCH, max_size=BATCH))
def test_every_tokenizer_gives_the_original_ids(tokenizer, original, batch):
    name, encode, limit, excused = tokenizer
    got = encode(batch)
    assert len(got) == len(batch)
    for text, ids in zip(batch, got, strict=True):
        if excused is not None and excused(text):
            continue
        want = original(text)[:limit]
        assert ids == want, f"{name} on {text!r}: {ids} != the original's {want}"
