"""Hugging Face transformers' ALBERT, both directions: the format's one home.

The weight-name table (`TABLE`, `BLOCK_TABLE`: read forwards by `target_of`, backwards by
`source_of`), the config map (`config_from_hf` in, `hf_config` out), the activation names
(`HF_ACTIVATIONS` in, `HF_ACTIVATION_NAMES` out), the group rule and what cannot travel
(`check_hf_exportable`). `albert_tf.export.hf` writes folders with them; the benchmarks build their
transformers peer from `hf_config`.

Reading: HF ALBERT (`config.json` + `model.safetensors`) -> our model, without torch.

Handles the `AlbertModel` (keys with or without the `albert.` prefix), `AlbertForMaskedLM`
(`predictions.*`, no pooler) and `AlbertForPreTraining` (`predictions.*`,
`sop_classifier.classifier.*`) layouts. HF blocks live at
`albert_layer_groups.G.albert_layers.I`, like our `group_G/inner_group_I`; HF linear weights
are [out, in] and are transposed into our [in, out] kernels.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np
from safetensors import SafetensorError
from safetensors.numpy import load_file

from albert_tf.checkpoint import CheckpointDir
from albert_tf.config import AlbertConfig
from albert_tf.errors import CheckpointError, ConfigError, ExportError
from albert_tf.weights import (
    assign_checked,
    build_model,
    variables_by_name,
    whole_block_groups,
)

WEIGHTS_FILE = "model.safetensors"
CONFIG_FILE = "config.json"
SP_MODEL_FILE = "spiece.model"  # HF's name for the SentencePiece model

# HF `hidden_act` -> ours. HF "gelu" is the exact erf GELU; "gelu_new" is ALBERT's tanh GELU.
HF_ACTIVATIONS = {
    "gelu": "gelu_exact",
    "gelu_python": "gelu_exact",
    "gelu_new": "gelu",
    "gelu_pytorch_tanh": "gelu",
    "relu": "relu",
    "swish": "swish",
    "silu": "swish",
}
# Every config field has the same name in an HF `config.json`; `hidden_act` is mapped above.
HF_CONFIG_KEYS = tuple(f.name for f in dataclasses.fields(AlbertConfig) if f.name != "hidden_act")

_BLOCK = "encoder/transformer/group_{0}/inner_group_{1}/"
# (HF key pattern after removing `albert.`, our name, transpose).
TABLE = (
    (
        r"embeddings\.(word|position|token_type)_embeddings\.weight",
        "encoder/embeddings/{}_embeddings",
        False,
    ),
    (r"embeddings\.LayerNorm\.weight", "encoder/embeddings/LayerNorm/gamma", False),
    (r"embeddings\.LayerNorm\.bias", "encoder/embeddings/LayerNorm/beta", False),
    (
        r"encoder\.embedding_hidden_mapping_in\.weight",
        "encoder/embedding_hidden_mapping_in/kernel",
        True,
    ),
    (
        r"encoder\.embedding_hidden_mapping_in\.bias",
        "encoder/embedding_hidden_mapping_in/bias",
        False,
    ),
    (r"pooler\.weight", "encoder/pooler/dense/kernel", True),
    (r"pooler\.bias", "encoder/pooler/dense/bias", False),
    (r"predictions\.dense\.weight", "cls/predictions/transform/dense/kernel", True),
    (r"predictions\.dense\.bias", "cls/predictions/transform/dense/bias", False),
    (r"predictions\.LayerNorm\.weight", "cls/predictions/transform/LayerNorm/gamma", False),
    (r"predictions\.LayerNorm\.bias", "cls/predictions/transform/LayerNorm/beta", False),
    (r"predictions\.bias", "cls/predictions/output_bias", False),
    (r"sop_classifier\.classifier\.weight", "cls/seq_relationship/output_weights", False),
    (r"sop_classifier\.classifier\.bias", "cls/seq_relationship/output_bias", False),
)
_LAYER = r"encoder\.albert_layer_groups\.(\d+)\.albert_layers\.(\d+)\."
BLOCK_TABLE = (
    (r"attention\.(query|key|value)\.weight", "attention_1/self/{}/kernel", True),
    (r"attention\.(query|key|value)\.bias", "attention_1/self/{}/bias", False),
    (r"attention\.dense\.weight", "attention_1/output/dense/kernel", True),
    (r"attention\.dense\.bias", "attention_1/output/dense/bias", False),
    (r"attention\.LayerNorm\.weight", "LayerNorm/gamma", False),
    (r"attention\.LayerNorm\.bias", "LayerNorm/beta", False),
    (r"ffn\.weight", "ffn_1/intermediate/dense/kernel", True),
    (r"ffn\.bias", "ffn_1/intermediate/dense/bias", False),
    (r"ffn_output\.weight", "ffn_1/intermediate/output/dense/kernel", True),
    (r"ffn_output\.bias", "ffn_1/intermediate/output/dense/bias", False),
    (r"full_layer_layer_norm\.weight", "LayerNorm_1/gamma", False),
    (r"full_layer_layer_norm\.bias", "LayerNorm_1/beta", False),
)
# Buffers and tied copies: the position-id buffer, and the MLM decoder (tied to the word
# embeddings and to `predictions.bias`; checked equal before being ignored).
IGNORED = re.compile(r"embeddings\.position_ids$|^predictions\.decoder\.(weight|bias)$")
# Fine-tuned task heads (AlbertForSequenceClassification, ...ForTokenClassification,
# ...ForMultipleChoice: `classifier`; ...ForQuestionAnswering: `qa_outputs`): a checkpoint
# directory has no place for them, so only the encoder is converted.
TASK_HEAD = re.compile(r"^(classifier|qa_outputs)\.(weight|bias)$")


def target_of(key: str) -> tuple[str, bool] | None:
    """(our variable name, transpose?) for an HF key without `albert.`; None if unknown."""
    for pattern, name, transpose in TABLE:
        match = re.fullmatch(pattern, key)
        if match:
            return name.format(*match.groups()), transpose
    layer = re.match(_LAYER, key)
    if layer:
        rest = key[layer.end() :]
        for pattern, name, transpose in BLOCK_TABLE:
            match = re.fullmatch(pattern, rest)
            if match:
                return _BLOCK.format(*layer.groups()) + name.format(*match.groups()), transpose
    return None


def _fill(pattern: str, groups: tuple[str, ...]) -> str:
    """The key a TABLE pattern matches when its groups are `groups` (patterns hold only
    escaped dots and alternation groups)."""
    values = iter(groups)
    return re.sub(r"\([^)]*\)", lambda _: next(values), pattern).replace("\\.", ".")


def source_of(name: str) -> tuple[str, bool]:
    """(HF key without `albert.`, transpose?) of our variable `name`: TABLE and BLOCK_TABLE read
    backwards, checked against `target_of`. CheckpointError for a variable HF has no key for."""
    block = re.fullmatch(r"encoder/transformer/group_(\d+)/inner_group_(\d+)/(.+)", name)
    rows = BLOCK_TABLE if block else TABLE
    rest = block.group(3) if block else name
    for pattern, template, transpose in rows:
        match = re.fullmatch(re.escape(template).replace(r"\{\}", "([a-z_]+)"), rest)
        if match:
            key = _fill(pattern, match.groups())
            if block:
                key = _fill(_LAYER, block.groups()[:2]) + key
            if target_of(key) == (name, transpose):
                return key, transpose
    raise CheckpointError(f"variable {name} has no Hugging Face ALBERT name")


def config_from_hf(values: dict) -> AlbertConfig:
    """Our config from an HF `config.json` dict; ConfigError for what we cannot represent."""
    act = values.get("hidden_act", "gelu_new")
    if act not in HF_ACTIVATIONS:
        raise ConfigError(f"HF hidden_act {act!r} is not supported ({', '.join(HF_ACTIVATIONS)})")
    if values.get("layer_norm_eps", 1e-12) != 1e-12:
        raise ConfigError(f"layer_norm_eps {values['layer_norm_eps']} is not ALBERT's 1e-12")
    if values.get("position_embedding_type", "absolute") != "absolute":
        raise ConfigError("only absolute position embeddings are supported")
    config = AlbertConfig.from_dict(
        {k: values[k] for k in HF_CONFIG_KEYS if k in values} | {"hidden_act": HF_ACTIVATIONS[act]}
    )
    layers, groups = config.num_hidden_layers, config.num_hidden_groups
    # HF computes a layer's group as int(i / (L / G)); the original as int(i / L * G).
    if any(int(i / (layers / groups)) != config.group_of_layer(i) for i in range(layers)):
        raise ConfigError(
            f"HF and the original assign layers to groups differently for {layers} "
            f"layers in {groups} groups; this model cannot be reproduced"
        )
    return config


def read_hf_dir(path: str | os.PathLike) -> tuple[AlbertConfig, dict[str, np.ndarray]]:
    """The config and tensors (keys without `albert.`) of an HF ALBERT directory."""
    path = Path(path)
    if not (path / CONFIG_FILE).is_file():
        raise CheckpointError(f"{path} has no {CONFIG_FILE}")
    if not (path / WEIGHTS_FILE).is_file():
        raise CheckpointError(f"{path} has no {WEIGHTS_FILE} (only safetensors weights are read)")
    try:
        values = json.loads((path / CONFIG_FILE).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise ConfigError(f"cannot read {path / CONFIG_FILE}: {e}") from None
    if values.get("model_type", "albert") != "albert":
        raise ConfigError(f"{path} holds a {values['model_type']!r} model, not ALBERT")
    try:
        tensors = load_file(str(path / WEIGHTS_FILE))
    except (SafetensorError, OSError) as e:
        raise CheckpointError(
            f"checkpoint file {path / WEIGHTS_FILE} is corrupt or unreadable: {e}"
        ) from None
    return config_from_hf(values), {k.removeprefix("albert."): v for k, v in tensors.items()}


def _check_tied(tensors: dict[str, np.ndarray]) -> None:
    for tied, owner in (
        ("predictions.decoder.weight", "embeddings.word_embeddings.weight"),
        ("predictions.decoder.bias", "predictions.bias"),
    ):
        if (
            tied in tensors
            and owner in tensors
            and not np.array_equal(tensors[tied], tensors[owner])
        ):
            raise CheckpointError(f"{tied} differs from {owner}: untied decoders are not supported")


def load_hf_checkpoint(path: str | os.PathLike) -> CheckpointDir:
    """Builds our encoder (and the heads present) filled from an HF ALBERT directory.

    A fine-tuned task head (`classifier.*`, `qa_outputs.*`) is left out, with a warning. An
    `AlbertForMaskedLM` has no pooler: ours keeps its random initialization (a warning is
    printed), so `pooled_output` is meaningless until fine-tuned.
    """
    config, tensors = read_hf_dir(path)
    _check_tied(tensors)
    heads = sorted(key for key in tensors if TASK_HEAD.match(key))
    if heads:
        print(
            f"warning: {path} holds a fine-tuned task head ({', '.join(heads)}); only its "
            "encoder is converted",
            file=sys.stderr,
        )
    values = {}
    for key, array in tensors.items():
        if IGNORED.search(key) or TASK_HEAD.match(key):
            continue
        target = target_of(key)
        if target is None:
            raise CheckpointError(f"{path}: unexpected variable {key}")
        name, transpose = target
        values[name] = (key, array.T if transpose else array)
    model = build_model(
        config,
        with_mlm=any(k.startswith("predictions.") for k in tensors),
        with_sop=any(k.startswith("sop_classifier.") for k in tensors),
    )
    targets = variables_by_name(model)
    if not any(name.startswith("encoder/pooler/") for name in values):
        print(
            f"warning: {path} has no pooler; pooled_output is randomly initialized", file=sys.stderr
        )
        targets = {k: v for k, v in targets.items() if not k.startswith("encoder/pooler/")}
    assign_checked(targets, values, source=str(path))
    return model


def convert_hf_checkpoint(
    path: str | os.PathLike,
    output_dir: str | os.PathLike,
    *,
    sp_model: str | os.PathLike | None = None,
    overwrite: bool = False,
) -> Path:
    """`albert-tf convert --hf-checkpoint`: writes our checkpoint directory (atomic). The
    SentencePiece model is `sp_model`, else the directory's `spiece.model` if present."""
    model = load_hf_checkpoint(path)
    if sp_model is None and (Path(path) / SP_MODEL_FILE).is_file():
        sp_model = Path(path) / SP_MODEL_FILE
    return model.save(output_dir, sp_model=sp_model, overwrite=overwrite)


# === Ours -> transformers (`export --hf`, the benchmarks' transformers peer) ===

# Our `hidden_act` -> the transformers name of the same function: our (and the original's)
# "gelu" is the tanh form, transformers' "gelu_new"; transformers' "gelu" is the erf form.
HF_ACTIVATION_NAMES = {
    "gelu": "gelu_new",
    "gelu_new": "gelu_new",
    "gelu_exact": "gelu",
    "gelu_python": "gelu",
    "relu": "relu",
    "swish": "silu",
}

# Fine-tuning task -> (transformers class, HF name of the head's dense layer).
TASK_CLASSES = {
    "classify": ("AlbertForSequenceClassification", "classifier"),
    "regress": ("AlbertForSequenceClassification", "classifier"),
    "tag": ("AlbertForTokenClassification", "classifier"),
    "squad": ("AlbertForQuestionAnswering", "qa_outputs"),
    "multiple-choice": ("AlbertForMultipleChoice", "classifier"),
}

# transformers' defaults for the pretraining special tokens when there is no SentencePiece
# model to read them from (ALBERT's: <pad> 0, [CLS] 2, [SEP] 3).
_DEFAULT_TOKEN_IDS = {"pad_token_id": 0, "bos_token_id": 2, "eos_token_id": 3}
_NONE_SHARING_BLOCK = re.compile(r"encoder/transformer/group_\d+/layer_(\d+)/")


def check_hf_exportable(config: AlbertConfig) -> None:
    """ExportError (one line) unless transformers' ALBERT computes what `config` describes."""
    if config.shared_params in ("attention", "ffn"):
        raise ExportError(
            f"shared_params={config.shared_params!r} cannot travel to Hugging Face: transformers' "
            "ALBERT shares whole blocks or nothing"
        )
    if config.hidden_act not in HF_ACTIVATION_NAMES:
        raise ExportError(f"hidden_act {config.hidden_act!r} has no Hugging Face equivalent")
    layers, groups = config.num_hidden_layers, whole_block_groups(config)
    ours = [config.group_of_layer(i) if config.shared_params == "all" else i for i in range(layers)]
    theirs = [int(i / (layers / groups)) for i in range(layers)]
    if ours != theirs:
        layer = next(i for i in range(layers) if ours[i] != theirs[i])
        raise ExportError(
            f"{layers} layers in {groups} groups cannot travel to Hugging Face: layer {layer} "
            f"uses group {ours[layer]} here and would use group {theirs[layer]} in transformers"
        )


def hf_config(
    config: AlbertConfig,
    architecture: str,
    special_ids: dict[str, int] | None = None,
    **task: Any,
) -> dict[str, Any]:
    """The `config.json` of an HF ALBERT: every `AlbertConfig` key, `architectures`,
    `model_type`; `special_ids` (`pad_token_id`, `bos_token_id`, `eos_token_id`) default to
    ALBERT's; `task` adds or replaces keys (`id2label`, `label2id`, `problem_type`)."""
    values: dict[str, Any] = {
        "architectures": [architecture],
        "model_type": "albert",
        **{
            field: getattr(config, field)
            for field in (
                "vocab_size",
                "embedding_size",
                "hidden_size",
                "num_hidden_layers",
                "num_attention_heads",
                "intermediate_size",
                "inner_group_num",
                "hidden_dropout_prob",
                "attention_probs_dropout_prob",
                "max_position_embeddings",
                "type_vocab_size",
                "initializer_range",
            )
        },
        "num_hidden_groups": whole_block_groups(config),
        "hidden_act": HF_ACTIVATION_NAMES[config.hidden_act],
        "layer_norm_eps": 1e-12,
        "classifier_dropout_prob": 0.1,
        "position_embedding_type": "absolute",  # transformers 4.x reads it
        **(special_ids or _DEFAULT_TOKEN_IDS),
        "tie_word_embeddings": True,
        "id2label": {"0": "LABEL_0", "1": "LABEL_1"},
        "label2id": {"LABEL_0": 0, "LABEL_1": 1},
        "problem_type": None,
        "dtype": "float32",
        "chunk_size_feed_forward": 0,
        "is_encoder_decoder": False,
        "output_attentions": False,
        "output_hidden_states": False,
        "return_dict": True,
    }
    return values | task


def hf_name(name: str) -> str:
    """Our variable name as the `shared_params="all"` layout names it: with sharing "none",
    layer L's block (`group_G/layer_L/inner_group_I`) is HF's group L."""
    return _NONE_SHARING_BLOCK.sub(r"encoder/transformer/group_\1/", name)
