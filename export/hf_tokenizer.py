"""The tokenizer of an `export --hf` folder: `tokenizer.json` and `tokenizer_config.json`.

transformers' own `AlbertTokenizer` built from an ALBERT `spiece.model` differs from the
original tokenization on ordinary text: it rewrites "``" and "''" as '"' (the original ALBERT
does not), strips accents by Unicode category instead of combining class, lowercases without
Final_Sigma, makes the user-defined pieces ("(", ")") added tokens that split the text around
them, and splits words before SentencePiece. `tokenizer_json` writes the pipeline that
`AutoTokenizer.from_pretrained` then loads as it is (`tokenizer_class` "TokenizersBackend"):

1. normalizer, `albert_tf.preprocess.normalize.preprocess_text`: whitespace runs (Python's `str.split`
   set) -> " ", trimmed; NFKD; characters of non-zero combining class removed; `str.lower`
   with its Final_Sigma rule (when lowercasing). The tables come from this Python's
   `unicodedata`, and characters the `tokenizers` library's own NFKD or lowercase tables treat
   otherwise are mapped first as Python maps them (tested on every code point);
2. normalizer, SentencePiece's: the model's precompiled character map, extra spaces removed,
   "▁" before the text and for every space;
3. model: Unigram with the model's pieces and scores, the whole text one piece of input as in
   SentencePiece (no pre-tokenizer); user-defined pieces get the score SentencePiece gives
   them; unknown characters in a row become one `<unk>`;
4. post-processor: `[CLS] A [SEP]` and `[CLS] A [SEP] B [SEP]`, type ids 0 then 1.

Where it differs from the original (no tokenizer.json can do better on the first two):

- the digit-comma re-split. The original re-encodes a piece that ends in a digit and a comma
  on its own and adds a "▁" the text does not have ("x1," -> "▁", "x", "▁1", ","). A
  tokenizers pipeline outputs pieces that spell its normalized text, and its normalizers are
  fixed rewrites that cannot know which pieces the Viterbi search will choose, so there it
  gives SentencePiece's first segmentation ("▁", "x", "1,"). 4 of the 166 fixture strings;
  texts whose first segmentation has no such piece are not affected;
- pieces of one repeated string with equal total scores ("0" + "00" or "00" + "0"): the
  `sentencepiece` package tells them apart by float32 rounding of its running score, the
  `tokenizers` library sums in float64 (1 fixture string; 1 of 10,000 generated strings);
- Final_Sigma with more than FINAL_SIGMA_IGNORABLE case-ignorable characters between the
  cased letter and "Σ" ("Α'.:'Σ"), and the 55 uppercase letters this Python's Unicode tables do
  not have (added to Unicode after version 14, Python 3.11's) but the `tokenizers` library
  lowercases: `str.lower` leaves them as they are;
- literal special tokens in the text ("[MASK]", "[CLS]", "<pad>") are those tokens, as
  transformers' fill-mask pipeline needs, and so is text that normalizes to one ("＜pad＞"):
  the Unigram model has no piece types to keep SentencePiece's control pieces out of the text;
  the original tokenizes them as text.

`AutoTokenizer.from_pretrained(folder, trust_remote_code=True)` loads the folder's
`tokenization_albert_tf.py` instead (`albert_tf.export.hf_remote_tokenizer`): the original algorithm
itself, equal to the original's ids (still with the last difference).
"""

from __future__ import annotations

import base64
import functools
import json
import os
import shutil
import unicodedata
from pathlib import Path
from typing import Any

from sentencepiece import sentencepiece_model_pb2

from albert_tf.convert.hf import SP_MODEL_FILE
from albert_tf.errors import InstallError
from albert_tf.preprocess.normalize import code_points, re2_class_body
from albert_tf.preprocess.tokenizer import (
    CLS,
    MASK,
    PAD,
    SEP,
    UNK,
    WORD_START,
    AlbertTokenizer,
    as_tokenizer,
)

TOKENIZER_FILE = "tokenizer.json"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
# The exact tokenizer for `trust_remote_code=True`: export/hf_remote_tokenizer.py, copied.
REMOTE_CODE_FILE = "tokenization_albert_tf.py"
REMOTE_CODE_CLASS = "tokenization_albert_tf.AlbertOriginalTokenizer"

_NORMAL, _UNKNOWN, _CONTROL, _USER_DEFINED = 1, 2, 3, 4
# Final_Sigma looks back over at most this many case-ignorable characters ("Α.Σ", "Α'.Σ").
FINAL_SIGMA_IGNORABLE = 3


def _strip_accents(c: str) -> str:
    return "".join(d for d in unicodedata.normalize("NFKD", c) if not unicodedata.combining(d))


def _regex(pattern: str) -> dict[str, Any]:
    return {"Regex": pattern}


def _replace(pattern: dict[str, Any] | str, content: str) -> dict[str, Any]:
    pattern = pattern if isinstance(pattern, dict) else {"String": pattern}
    return {"type": "Replace", "pattern": pattern, "content": content}


def _onig_class(chars: Any) -> str:
    """An Oniguruma character class body (`\\x{A}-\\x{B}`: the syntax RE2 shares)."""
    return re2_class_body(chars)


def require_tokenizers() -> Any:
    """The `tokenizers` package (its normalizers tell which characters to map as Python
    does); InstallError naming the extra when it is missing."""
    try:
        import tokenizers
        import tokenizers.normalizers
    except ImportError:
        raise InstallError(
            'export --hf of a tokenizer needs the tokenizers package: pip install -e ".[hf]"'
        ) from None
    return tokenizers


@functools.cache
def _python_tables() -> dict[str, Any]:
    """This Python's whitespace, combining-mark, Final_Sigma sets, and the characters whose
    NFKD-then-strip or `str.lower` the `tokenizers` library computes otherwise."""
    normalizers = require_tokenizers().normalizers
    chars = list(code_points())
    # Both act per character (NFKD's canonical reordering only moves marks of non-zero class,
    # which are then removed), so one call on all characters but NUL, each after a NUL (which
    # both leave alone), does them all.
    others = chars[1:]
    joined = "\0" + "\0".join(others)
    nfkd = normalizers.NFKD().normalize_str(joined).split("\0")[1:]
    lowercase = normalizers.Lowercase().normalize_str(joined).split("\0")[1:]
    strip_fix = {}
    lower_fix = {}
    for c, theirs, lowered in zip(others, nfkd, lowercase, strict=True):
        stripped = _strip_accents(c)
        if "".join(d for d in theirs if not unicodedata.combining(d)) != stripped:
            strip_fix[c] = stripped
        # Characters Python leaves alone but `tokenizers` lowercases (assigned after this
        # Python's Unicode version) cannot be kept from its Lowercase (see the module docstring).
        if c.lower() != c and lowered != c.lower():
            lower_fix[c] = c.lower()
    # Final_Sigma as str.lower applies it: "Σ" becomes "ς" after a cased letter (with any
    # case-ignorable characters between) and not before one; Python tells which characters
    # are cased and case-ignorable by what it makes of "Σ" beside them.
    cased = [c for c in chars if (c + "Σ").lower().endswith("ς")]
    cased_set = set(cased)
    ignorable = [c for c in chars if c not in cased_set and ("A" + c + "Σ").lower().endswith("ς")]
    return dict(
        space=_onig_class(c for c in chars if c.isspace()),
        combining=_onig_class(c for c in chars if unicodedata.combining(c)),
        strip_fix=strip_fix,
        lower_fix=lower_fix,
        cased=_onig_class(cased),
        ignorable=_onig_class(ignorable),
    )


def _preprocess_normalizers(do_lower_case: bool) -> list[dict[str, Any]]:
    """Step 1 of the module docstring: `preprocess_text` as `tokenizers` normalizers."""
    t = _python_tables()
    steps = [
        _replace(_regex(f"[{t['space']}]+"), " "),
        _replace(_regex(r"\A | \z"), ""),
        *(_replace(c, s) for c, s in t["strip_fix"].items()),
        {"type": "NFKD"},
        _replace(_regex(f"[{t['combining']}]"), ""),
    ]
    if do_lower_case:
        # Oniguruma's look-behind takes alternatives of fixed lengths, not repetition: up to
        # FINAL_SIGMA_IGNORABLE case-ignorable characters between the cased letter and "Σ".
        cased, ignorable = f"[{t['cased']}]", f"[{t['ignorable']}]"
        behind = "|".join(cased + ignorable * n for n in range(FINAL_SIGMA_IGNORABLE + 1))
        final_sigma = f"(?<={behind})Σ(?!{ignorable}*{cased})"
        steps += [
            _replace(_regex(final_sigma), "ς"),
            *(_replace(c, s) for c, s in t["lower_fix"].items()),
            {"type": "Lowercase"},
        ]
    return steps


def _sentencepiece_normalizers(proto: Any) -> list[dict[str, Any]]:
    """Step 2: the SentencePiece model's own normalization."""
    spec = proto.normalizer_spec
    steps = []
    if spec.precompiled_charsmap:
        steps.append(
            {
                "type": "Precompiled",
                "precompiled_charsmap": base64.b64encode(spec.precompiled_charsmap).decode(),
            }
        )
    if spec.remove_extra_whitespaces:
        steps += [_replace(_regex(" {2,}"), " "), _replace(_regex(r"\A | \z"), "")]
    if spec.add_dummy_prefix:
        steps.append({"type": "Prepend", "prepend": WORD_START})
    if spec.escape_whitespaces:
        steps.append(_replace(" ", WORD_START))
    return steps


def _piece_score(piece: Any) -> float:
    """The score SentencePiece's Viterbi adds for a piece: user-defined pieces
    0.1 per UTF-8 byte beyond the first (see albert_tf.export.onnx.piece_order)."""
    if piece.type == _USER_DEFINED:
        return 0.1 * (len(piece.piece.encode()) - 1)
    return piece.score if piece.type == _NORMAL else 0.0


def tokenizer_json(
    sp_model: str | os.PathLike | AlbertTokenizer, do_lower_case: bool
) -> dict[str, Any]:
    """The `tokenizer.json` (as a dict) of the pipeline in the module docstring; `sp_model` is
    a path or the loaded tokenizer."""
    sp = as_tokenizer(sp_model, do_lower_case).sp_model
    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(sp.serialized_model_proto())
    specials = [
        {
            "id": i,
            "content": p.piece,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": True,
        }
        for i, p in enumerate(proto.pieces)
        if p.type in (_UNKNOWN, _CONTROL)
    ]
    cls_id, sep_id = sp.piece_to_id(CLS), sp.piece_to_id(SEP)
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": specials,
        "normalizer": {
            "type": "Sequence",
            "normalizers": _preprocess_normalizers(do_lower_case)
            + _sentencepiece_normalizers(proto),
        },
        "pre_tokenizer": None,
        "model": {
            "type": "Unigram",
            "unk_id": sp.unk_id(),
            "vocab": [[p.piece, _piece_score(p)] for p in proto.pieces],
            "byte_fallback": False,
        },
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [
                {"SpecialToken": {"id": CLS, "type_id": 0}},
                {"Sequence": {"id": "A", "type_id": 0}},
                {"SpecialToken": {"id": SEP, "type_id": 0}},
            ],
            "pair": [
                {"SpecialToken": {"id": CLS, "type_id": 0}},
                {"Sequence": {"id": "A", "type_id": 0}},
                {"SpecialToken": {"id": SEP, "type_id": 0}},
                {"Sequence": {"id": "B", "type_id": 1}},
                {"SpecialToken": {"id": SEP, "type_id": 1}},
            ],
            "special_tokens": {
                CLS: {"id": CLS, "ids": [cls_id], "tokens": [CLS]},
                SEP: {"id": SEP, "ids": [sep_id], "tokens": [SEP]},
            },
        },
        "decoder": {
            "type": "Metaspace",
            "replacement": WORD_START,
            "prepend_scheme": "always",
            "split": True,
        },
    }


def tokenizer_config(do_lower_case: bool, model_max_length: int) -> dict[str, Any]:
    """`tokenizer_config.json`: load `tokenizer.json` as it is, with ALBERT's special tokens;
    with `trust_remote_code=True`, the exact tokenizer of `REMOTE_CODE_FILE`."""
    return {
        "tokenizer_class": "TokenizersBackend",
        "auto_map": {"AutoTokenizer": [REMOTE_CODE_CLASS, None]},
        "do_lower_case": do_lower_case,
        "model_max_length": model_max_length,
        "bos_token": CLS,
        "eos_token": SEP,
        "unk_token": UNK,
        "sep_token": SEP,
        "pad_token": PAD,
        "cls_token": CLS,
        "mask_token": MASK,
        "padding_side": "right",
        "model_input_names": ["input_ids", "token_type_ids", "attention_mask"],
    }


def write_tokenizer(
    directory: str | os.PathLike,
    sp_model: str | os.PathLike | AlbertTokenizer,
    do_lower_case: bool,
    model_max_length: int,
) -> None:
    """Writes the tokenizer files of an HF folder into `directory`: `spiece.model` (a copy of
    `sp_model`), `tokenizer.json`, `tokenizer_config.json` and `REMOTE_CODE_FILE`. A directory
    with only these loads with `hf_tokenizer` too. `sp_model` is a path or the loaded tokenizer."""
    directory = Path(directory)
    tokenizer = as_tokenizer(sp_model, do_lower_case)
    (directory / SP_MODEL_FILE).write_bytes(tokenizer.model_proto)
    shutil.copyfile(
        Path(__file__).with_name("hf_remote_tokenizer.py"), directory / REMOTE_CODE_FILE
    )
    (directory / TOKENIZER_FILE).write_text(
        json.dumps(tokenizer_json(tokenizer, do_lower_case), ensure_ascii=False) + "\n",
        encoding="utf-8",
    )
    (directory / TOKENIZER_CONFIG_FILE).write_text(
        json.dumps(tokenizer_config(do_lower_case, model_max_length), indent=2) + "\n",
        encoding="utf-8",
    )


def hf_tokenizer(folder: str | os.PathLike, trust_remote_code: bool = False) -> Any:
    """The tokenizer of an exported HF folder as a user loads it (needs the `hf` extra):
    `AutoTokenizer.from_pretrained(folder)`, the `tokenizer.json` pipeline; with
    `trust_remote_code`, the folder's exact `AlbertOriginalTokenizer`."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(folder), trust_remote_code=trust_remote_code)
