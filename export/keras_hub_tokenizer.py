"""The keras-hub preset's tokenizer: our SentencePiece model with a normalizer that also does
ALBERT's `preprocess_text` (whitespace, NFKD accent stripping, lowercasing).

keras-hub's `AlbertTokenizer` is SentencePiece alone: it neither lowercases nor strips accents,
and an uncased model then gets ids it was never trained on. SentencePiece applies its
normalizer (a compiled character map, longest match first) before segmenting, so
`albert_sp_model_proto` compiles one map F with F(s) = the model's own normalization of
`preprocess_text(s)` for every code point s and for every sequence where the model's own map,
or canonical composition, reads several code points at once (Hangul jamo, for instance), and
puts it in place of the model's normalizer.

Two things a character map cannot do, so keras-hub's ids differ from ours (`DIFFERENCES`):
- the original's re-split of pieces ending in a digit and a comma ("1," -> "1", ","):
  SentencePiece's segmentation of text containing such a piece is kept as is;
- `str.lower`'s Final_Sigma rule (a capital sigma ending a word becomes "ς"): a map sees one
  code point, not its neighbours, and gives "σ".
"""

from __future__ import annotations

import os
import unicodedata
from collections.abc import Callable
from typing import Any

import numpy as np
import sentencepiece as spm
from sentencepiece import sentencepiece_model_pb2

from albert_tf.convert.keras_hub import import_keras_hub
from albert_tf.preprocess.normalize import code_points, preprocess_text
from albert_tf.preprocess.tokenizer import is_digit_comma_piece

NORMALIZER_NAME = "albert_tf_preprocess_text"
DIFFERENCES = (
    "a SentencePiece piece ending in a digit and a comma (text such as '1,000' or '$5,000,'): "
    "ALBERT re-splits it ('▁1,' -> '▁1', ','), keras-hub's tokenizer keeps the piece",
    "a capital sigma ending a word in a lowercased model: ALBERT lowercases it to 'ς' "
    "(Final_Sigma), keras-hub's tokenizer to 'σ'",
)
_WHITESPACE = frozenset(c for c in map(chr, range(0x3001)) if c.isspace())


def _ours(text: str, lower: bool) -> str:
    """`preprocess_text` on a piece of text, whitespace mapped to " " rather than collapsed
    (SentencePiece collapses runs of spaces and trims them itself)."""
    text = "".join(" " if c in _WHITESPACE else c for c in text)
    text = unicodedata.normalize("NFKD", text)
    text = "".join(c for c in text if not unicodedata.combining(c))
    return text.lower() if lower else text


def model_normalizer(model_proto: bytes) -> Any:
    """The character map of the serialized SentencePiece model `model_proto` alone, as a
    `sentencepiece.SentencePieceNormalizer`: no dummy prefix, whitespace neither escaped to "▁"
    nor collapsed, so that `normalize(s)` is the map's image of `s`.

    The three flags are given, not left to their defaults: sentencepiece 0.2.2 defaults them to
    off, 0.2.3 takes them from the model (ALBERT's models turn all three on), and then every
    code point seems remapped ("a" -> "▁a") and the control character "\x00" becomes an empty
    key that the map compiler refuses.
    """
    return spm.SentencePieceNormalizer(
        model_proto=model_proto,
        add_dummy_prefix=False,
        escape_whitespaces=False,
        remove_extra_whitespaces=False,
    )


def albert_normalizer_rules(model_proto: bytes, lower: bool) -> list[tuple[str, str]]:
    """(source, replacement) rules of the combined normalizer (see the module docstring) for
    the serialized SentencePiece model `model_proto`."""
    own = model_normalizer(model_proto)
    normalize: Callable[[str], str] = own.normalize
    rules = {}
    for c in code_points():
        mapped = normalize(_ours(c, lower))
        if mapped != c:
            rules[c] = mapped
    # Sequences read at once: the model's own multi-code-point rules, and the canonical
    # decompositions that keep several code points after accent stripping (Hangul syllables).
    sequences = {source for source, _ in own.decompile() if len(source) > 1}
    for c in code_points():
        kept = "".join(d for d in unicodedata.normalize("NFD", c) if not unicodedata.combining(d))
        if len(kept) > 1:
            sequences.add(kept)
    for source in sequences:
        mapped = normalize(_ours(source, lower))
        if mapped != "".join(rules.get(c, c) for c in source):
            rules[source] = mapped
    return sorted(rules.items())


def albert_sp_model_proto(model_proto: bytes, lower: bool) -> bytes:
    """The serialized SentencePiece model `model_proto` with the combined normalizer: pieces,
    scores and ids unchanged."""
    model = sentencepiece_model_pb2.ModelProto()
    model.ParseFromString(model_proto)
    compiled = sentencepiece_model_pb2.NormalizerSpec()
    compiled.ParseFromString(
        spm.SentencePieceNormalizer(
            norm_map=albert_normalizer_rules(model_proto, lower)
        ).serialized_normalizer_spec()
    )
    spec = model.normalizer_spec
    spec.name = NORMALIZER_NAME
    spec.precompiled_charsmap = compiled.precompiled_charsmap
    spec.ClearField("normalization_rule_tsv")
    return model.SerializeToString()


def differs_from_albert(sp: Any, text: str, lower: bool) -> bool:
    """Whether keras-hub's ids for `text` differ from ALBERT's for one of `DIFFERENCES`: the
    SentencePiece processor `sp` (of the original model) segments the normalized text into a
    digit-comma piece, or lowercasing meets a word-final capital sigma."""
    normalized = preprocess_text(text, lower=lower)
    if any(is_digit_comma_piece(p) for p in sp.encode(normalized, out_type=str)):
        return True
    if not lower:
        return False
    per_char = "".join(c.lower() for c in preprocess_text(text, lower=False))
    return per_char != normalized


def preset_tokenizer(preset_dir: str | os.PathLike) -> Callable[[str], list[int]]:
    """text -> ids of the keras-hub `AlbertTokenizer` loaded from `preset_dir` with
    `from_preset`, as a keras-hub user gets them (no [CLS]/[SEP])."""
    tokenizer = import_keras_hub().models.AlbertTokenizer.from_preset(str(preset_dir))

    def encode(text: str) -> list[int]:
        return [int(i) for i in np.asarray(tokenizer(text)).tolist()]

    return encode
