"""A BERT sentence encoder in the transformers / sentence-transformers layout, read without torch.

BERT is ALBERT with nothing shared and no factorized embeddings: one group per layer, one block
per group, E = H. So the teacher runs on `AlbertEncoder` (the same arithmetic: post-LayerNorm
blocks, epsilon 1e-12, an additive mask on padding keys) with the weights of `model.safetensors`
copied in by the name table below, and its own WordPiece tokenizer (`tensorflow_text`'s
`BertTokenizer` over the directory's `vocab.txt`).

The sentence embedding is sentence-transformers' mean pooling (the mean of the last layer over
the tokens the attention mask keeps, [CLS] and [SEP] included) followed by L2 normalization.

A directory is read when it has `config.json` with `model_type` "bert", `model.safetensors`
and `vocab.txt`; `max_seq_length` comes from `sentence_bert_config.json` where present (its
`do_lower_case`, which sentence-transformers applies before the tokenizer, is honoured too), and
lower-casing from `tokenizer_config.json` (default on).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text
from safetensors import SafetensorError
from safetensors.numpy import load_file

from albert_tf.config import AlbertConfig
from albert_tf.errors import CheckpointError, ConfigError, DataError

WEIGHTS_FILE = "model.safetensors"
CONFIG_FILE = "config.json"
VOCAB_FILE = "vocab.txt"
SENTENCE_CONFIG_FILE = "sentence_bert_config.json"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
POOLING_CONFIG_FILE = "1_Pooling/config.json"

# transformers' `hidden_act` for BERT -> ours ("gelu" there is the exact erf GELU).
ACTIVATIONS = {"gelu": "gelu_exact", "gelu_new": "gelu", "relu": "relu", "silu": "swish"}

_BLOCK = "encoder/transformer/group_{0}/inner_group_0/"
# (transformers key without `bert.`, our variable name, transpose). Linear weights there are
# [out, in]; our kernels are [in, out].
TABLE = (
    (r"embeddings\.(word|position|token_type)_embeddings\.weight", "encoder/embeddings/{}_embeddings", False),
    (r"embeddings\.LayerNorm\.(weight|gamma)", "encoder/embeddings/LayerNorm/gamma", False),
    (r"embeddings\.LayerNorm\.(bias|beta)", "encoder/embeddings/LayerNorm/beta", False),
    (r"pooler\.dense\.weight", "encoder/pooler/dense/kernel", True),
    (r"pooler\.dense\.bias", "encoder/pooler/dense/bias", False),
)  # fmt: skip
_LAYER = re.compile(r"encoder\.layer\.(\d+)\.")
BLOCK_TABLE = (
    (r"attention\.self\.(query|key|value)\.weight", "attention_1/self/{}/kernel", True),
    (r"attention\.self\.(query|key|value)\.bias", "attention_1/self/{}/bias", False),
    (r"attention\.output\.dense\.weight", "attention_1/output/dense/kernel", True),
    (r"attention\.output\.dense\.bias", "attention_1/output/dense/bias", False),
    (r"attention\.output\.LayerNorm\.(weight|gamma)", "LayerNorm/gamma", False),
    (r"attention\.output\.LayerNorm\.(bias|beta)", "LayerNorm/beta", False),
    (r"intermediate\.dense\.weight", "ffn_1/intermediate/dense/kernel", True),
    (r"intermediate\.dense\.bias", "ffn_1/intermediate/dense/bias", False),
    (r"output\.dense\.weight", "ffn_1/intermediate/output/dense/kernel", True),
    (r"output\.dense\.bias", "ffn_1/intermediate/output/dense/bias", False),
    (r"output\.LayerNorm\.(weight|gamma)", "LayerNorm_1/gamma", False),
    (r"output\.LayerNorm\.(bias|beta)", "LayerNorm_1/beta", False),
)
# Buffers and the heads of pretraining layouts (BertForMaskedLM's `cls.*`): not the encoder.
IGNORED = re.compile(r"embeddings\.position_ids$|^cls\.")


def target_of(key: str) -> tuple[str, bool] | None:
    """(our variable name, transpose?) of a transformers BERT key without `bert.`; None if the
    key is not an encoder weight."""
    for pattern, name, transpose in TABLE:
        match = re.fullmatch(pattern, key)
        if match:
            return name.format(*match.groups()), transpose
    layer = _LAYER.match(key)
    if layer:
        rest = key[layer.end() :]
        for pattern, name, transpose in BLOCK_TABLE:
            match = re.fullmatch(pattern, rest)
            if match:
                values = [g for g in match.groups() if g not in ("weight", "bias", "gamma", "beta")]
                return _BLOCK.format(layer.group(1)) + name.format(*values), transpose
    return None


def is_bert_dir(path: Path) -> bool:
    """Whether `path` holds a BERT-family `config.json` (the kind test of `load_teacher`)."""
    try:
        values = json.loads((path / CONFIG_FILE).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return False
    return isinstance(values, dict) and values.get("model_type") == "bert"


def bert_config(values: dict) -> AlbertConfig:
    """The `AlbertConfig` that computes a transformers BERT config's encoder (one group per
    layer, E = H); ConfigError for what it cannot represent."""
    act = values.get("hidden_act", "gelu")
    if act not in ACTIVATIONS:
        raise ConfigError(f"teacher hidden_act {act!r} is not supported ({', '.join(ACTIVATIONS)})")
    if values.get("position_embedding_type", "absolute") != "absolute":
        raise ConfigError("teacher: only absolute position embeddings are supported")
    if abs(values.get("layer_norm_eps", 1e-12) - 1e-12) > 1e-15:
        raise ConfigError(f"teacher layer_norm_eps {values['layer_norm_eps']} is not 1e-12")
    try:
        hidden, layers = int(values["hidden_size"]), int(values["num_hidden_layers"])
        return AlbertConfig(
            vocab_size=int(values["vocab_size"]),
            embedding_size=hidden,
            hidden_size=hidden,
            num_hidden_layers=layers,
            num_hidden_groups=layers,
            num_attention_heads=int(values["num_attention_heads"]),
            intermediate_size=int(values["intermediate_size"]),
            hidden_act=ACTIVATIONS[act],
            max_position_embeddings=int(values.get("max_position_embeddings", 512)),
            type_vocab_size=int(values.get("type_vocab_size", 2)),
        )
    except KeyError as e:
        raise ConfigError(f"teacher {CONFIG_FILE} has no {e.args[0]}") from None


@dataclass(frozen=True)
class BertFiles:
    """What a BERT teacher directory holds: its config, weights, vocabulary and settings."""

    path: Path
    config: AlbertConfig
    lower_case: bool  # lower-case and strip accents before WordPiece
    max_seq_length: int  # tokens per sentence, [CLS] and [SEP] included
    mean_pooling: bool  # False when the pooling config asks for something else


def read_bert_dir(path: str | Path) -> BertFiles:
    """The parts of a BERT teacher directory, checked: CheckpointError when the weights or the
    vocabulary are missing, ConfigError for a config it cannot compute."""
    path = Path(path)
    values = json.loads((path / CONFIG_FILE).read_text(encoding="utf-8"))
    if not (path / WEIGHTS_FILE).is_file():
        raise CheckpointError(f"teacher {path} has no {WEIGHTS_FILE} (only safetensors are read)")
    if not (path / VOCAB_FILE).is_file():
        raise CheckpointError(f"teacher {path} has no WordPiece vocabulary ({VOCAB_FILE})")
    config = bert_config(values)
    settings = _json_or_empty(path / SENTENCE_CONFIG_FILE)
    tokenizer = _json_or_empty(path / TOKENIZER_CONFIG_FILE)
    pooling = _json_or_empty(path / POOLING_CONFIG_FILE)
    max_len = int(settings.get("max_seq_length", tokenizer.get("model_max_length", 512)))
    return BertFiles(
        path=path,
        config=config,
        lower_case=bool(tokenizer.get("do_lower_case", True) or settings.get("do_lower_case")),
        max_seq_length=min(max_len, config.max_position_embeddings),
        mean_pooling=bool(pooling.get("pooling_mode_mean_tokens", True)),
    )


def _json_or_empty(path: Path) -> dict:
    if not path.is_file():
        return {}
    try:
        values = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ConfigError(f"cannot read {path}: {e}") from None
    return values if isinstance(values, dict) else {}


def bert_weights(files: BertFiles) -> dict[str, tuple[str, np.ndarray]]:
    """Our variable name -> (transformers key, array, transposed where needed) for every encoder
    weight; CheckpointError names a key that is neither an encoder weight nor ignored."""
    try:
        tensors = load_file(str(files.path / WEIGHTS_FILE))
    except (SafetensorError, OSError) as e:
        raise CheckpointError(f"teacher weights {files.path / WEIGHTS_FILE}: {e}") from None
    values: dict[str, tuple[str, np.ndarray]] = {}
    for key, array in tensors.items():
        bare = key.removeprefix("bert.")
        if IGNORED.search(bare):
            continue
        target = target_of(bare)
        if target is None:
            raise CheckpointError(f"teacher weights: {key} is not a BERT encoder weight")
        name, transpose = target
        values[name] = (key, np.ascontiguousarray(array.T) if transpose else array)
    return values


def wordpiece_ids(files: BertFiles, texts: list[str]) -> list[list[int]]:
    """WordPiece ids of each text with [CLS] first and [SEP] last, cut to `max_seq_length`
    (the cut drops word pieces before [SEP], as transformers' truncation does)."""
    tokenizer, cls, sep = _tokenizer(files)
    # transformers' text cleaning: control and format characters and U+FFFD dropped.
    strings = tf.strings.regex_replace(tf.constant(texts), r"[\t\n\r]", " ")
    strings = tf.strings.regex_replace(strings, "[\\p{C}\ufffd]", "")
    if files.lower_case:
        strings = _lower_and_strip_accents(strings)
    pieces = tokenizer.tokenize(strings).merge_dims(-2, -1)  # [B, (pieces)]
    keep = files.max_seq_length - 2
    return [[cls, *row[:keep], sep] for row in pieces.to_list()]


def _lower_and_strip_accents(strings):
    """BERT's uncased normalization as transformers does it: lower-case, NFD, drop nonspacing
    marks. (tensorflow_text's `lower_case=True` case-folds with NFKC instead, which maps
    compatibility characters such as "№" to "no" where the teacher saw [UNK].)"""
    lowered = tf.strings.lower(strings, encoding="utf-8")
    return tf.strings.regex_replace(tf_text.normalize_utf8(lowered, "NFD"), r"\p{Mn}", "")


_TOKENIZERS: dict[tuple[str, bool], tuple[object, int, int]] = {}


def _tokenizer(files: BertFiles) -> tuple[object, int, int]:
    """(tensorflow_text BertTokenizer, [CLS] id, [SEP] id), made once per directory."""
    key = (str(files.path), files.lower_case)
    if key not in _TOKENIZERS:
        vocab_file = files.path / VOCAB_FILE
        index = {t: i for i, t in enumerate(vocab_file.read_text(encoding="utf-8").splitlines())}
        for token in ("[CLS]", "[SEP]", "[UNK]"):
            if token not in index:
                raise DataError(f"teacher vocabulary {vocab_file} has no {token}")
        # Lower-casing happens before (`_lower_and_strip_accents`), as the teacher's did.
        tokenizer = tf_text.BertTokenizer(str(vocab_file), token_out_type=tf.int64)
        _TOKENIZERS[key] = (tokenizer, index["[CLS]"], index["[SEP]"])
    return _TOKENIZERS[key]
