"""keras-hub ALBERT presets <-> our model: the one name table, the config mapping, what cannot
travel, and the reader (`albert-tf convert --keras-hub-preset`).

A preset is the directory keras-hub's `save_to_preset` writes (Google's published ALBERT presets
use it): `config.json` (an `AlbertBackbone`), `model.weights.h5`, `tokenizer.json` with
`assets/tokenizer/vocabulary.spm`, `metadata.json`, and for task models `task.json`,
`task.weights.h5` and `preprocessor.json`. keras-hub reads and writes it (the `keras-hub` extra);
both directions go through keras-hub itself, so the file layout is always the one it loads.

keras-hub's ALBERT computes ours (tanh GELU, post-LayerNorm blocks with epsilon 1e-12, pooler =
dense(tanh) on the first token, classifier = dropout 0.1 then dense on the pooled output) except:
- `AlbertBackbone` applies group g to layers [g*L/G, (g+1)*L/G), so it needs L % G == 0, and
  only the tanh GELU; sharing attention only or the FFN only has no counterpart (refused);
- it always projects the embeddings E -> H: where E == H we have no projection and write the
  identity (x·I + 0 is x exactly);
- one dropout rate (ours: hidden and attention apart; inference is unaffected);
- `AlbertMaskedLM`'s head normalizes with LayerNorm epsilon 1e-5, ALBERT's with 1e-12
  (`MLM_EPSILON_NOTE`);
- no sentence-order head.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.errors import CheckpointError, ConfigError, ExportError, InstallError
from albert_tf.finetune.directory import FinetuneRecord, write_finetuned
from albert_tf.finetune.models import TaskHead
from albert_tf.finetune.settings import FinetuneSettings
from albert_tf.io_utils import atomic_dir
from albert_tf.weights import assign_checked, build_model, variables_by_name, whole_block_groups

# keras-hub's preset files (keras_hub/src/utils/preset_utils.py).
PRESET_CONFIG_FILE = "config.json"
PRESET_TASK_FILE = "task.json"
PRESET_SP_MODEL = "assets/tokenizer/vocabulary.spm"
# Beside them we write report.json, and the SentencePiece model our tokenizer reads (the preset's
# own vocabulary.spm carries a normalizer that does our lowercasing and accent stripping).
REPORT_FILE = "report.json"
ORIGINAL_SP_MODEL = "assets/albert_tf/spm.model"

BACKBONE = "AlbertBackbone"
MASKED_LM = "AlbertMaskedLM"
CLASSIFIER = "AlbertTextClassifier"
# Activations keras-hub's AlbertBackbone computes: it hard-codes the tanh GELU.
KERAS_HUB_ACTIVATIONS = ("gelu", "gelu_new")
KERAS_HUB_INITIALIZER_RANGE = 0.02  # albert_kernel_initializer's stddev
MLM_EPSILON_NOTE = (
    "keras-hub's AlbertMaskedLM normalizes its MLM transform with LayerNorm epsilon 1e-5, "
    "ALBERT with 1e-12: set masked_lm.masked_lm_head._intermediate_layer_norm.epsilon = 1e-12 "
    "after loading for ALBERT's exact MLM logits"
)

# === The name table: our variable name <-> keras-hub variable path ===
# Every pair is a plain reshape (keras-hub splits attention kernels by head: query [H, H] is
# [H, N, D], the output projection [H, H] is [N, D, H]); nothing is transposed, so a round trip
# is bit-identical.

TABLE = (
    ("encoder/embeddings/word_embeddings", "token_embedding/embeddings"),
    ("encoder/embeddings/position_embeddings", "position_embedding/embeddings"),
    ("encoder/embeddings/token_type_embeddings", "segment_embedding/embeddings"),
    ("encoder/embeddings/LayerNorm/gamma", "embeddings_layer_norm/gamma"),
    ("encoder/embeddings/LayerNorm/beta", "embeddings_layer_norm/beta"),
    ("encoder/embedding_hidden_mapping_in/kernel", "embedding_projection/kernel"),
    ("encoder/embedding_hidden_mapping_in/bias", "embedding_projection/bias"),
    ("encoder/pooler/dense/kernel", "pooled_dense/kernel"),
    ("encoder/pooler/dense/bias", "pooled_dense/bias"),
)
BLOCK_TABLE = tuple(
    (f"attention_1/self/{part}/{kind}", f"self_attention_layer/{part}/{kind}")
    for part in ("query", "key", "value")
    for kind in ("kernel", "bias")
) + (
    ("attention_1/output/dense/kernel", "self_attention_layer/attention_output/kernel"),
    ("attention_1/output/dense/bias", "self_attention_layer/attention_output/bias"),
    ("LayerNorm/gamma", "self_attention_layer_norm/gamma"),
    ("LayerNorm/beta", "self_attention_layer_norm/beta"),
    ("ffn_1/intermediate/dense/kernel", "feedforward_intermediate_dense/kernel"),
    ("ffn_1/intermediate/dense/bias", "feedforward_intermediate_dense/bias"),
    ("ffn_1/intermediate/output/dense/kernel", "feedforward_output_dense/kernel"),
    ("ffn_1/intermediate/output/dense/bias", "feedforward_output_dense/bias"),
    ("LayerNorm_1/gamma", "feedforward_layer_norm/gamma"),
    ("LayerNorm_1/beta", "feedforward_layer_norm/beta"),
)
MLM_TABLE = (
    ("cls/predictions/transform/dense/kernel", "mlm_head/intermediate_dense/kernel"),
    ("cls/predictions/transform/dense/bias", "mlm_head/intermediate_dense/bias"),
    ("cls/predictions/transform/LayerNorm/gamma", "mlm_head/intermediate_layer_norm/gamma"),
    ("cls/predictions/transform/LayerNorm/beta", "mlm_head/intermediate_layer_norm/beta"),
    ("cls/predictions/output_bias", "mlm_head/output_bias"),
)
# Our fine-tuned classifier's `TaskHead` dense layer <-> AlbertTextClassifier's.
CLASSIFIER_TABLE = (
    ("task_head/dense/kernel", "logits/kernel"),
    ("task_head/dense/bias", "logits/bias"),
)
_PROJECTION = (
    "encoder/embedding_hidden_mapping_in/kernel",
    "encoder/embedding_hidden_mapping_in/bias",
)


def name_pairs(config: AlbertConfig, head: str | None = None) -> Iterator[tuple[str, str]]:
    """(our variable name, keras-hub variable path) of every variable of `config`'s model.

    `head`: None, "mlm" (our `cls/predictions`) or "classifier" (a fine-tuned `task_head`).
    With `shared_params="none"` layer l's own blocks (`group_G/layer_l/inner_group_I`) are
    keras-hub's group l. Where E == H we have no embedding projection: it is left out here.
    """
    for ours, theirs in TABLE:
        if ours not in _PROJECTION or config.embedding_size != config.hidden_size:
            yield ours, theirs
    for group in range(whole_block_groups(config)):
        if config.shared_params == "none":
            scope = f"group_{config.group_of_layer(group)}/layer_{group}"
        else:
            scope = f"group_{group}"
        for inner in range(config.inner_group_num):
            for ours, theirs in BLOCK_TABLE:
                yield (
                    f"encoder/transformer/{scope}/inner_group_{inner}/{ours}",
                    f"group_{group}_inner_layer_{inner}/{theirs}",
                )
    if head is not None:
        yield from MLM_TABLE if head == "mlm" else CLASSIFIER_TABLE


# === Configs ===


def check_travels(config: AlbertConfig) -> list[str]:
    """The notes an export of `config` to keras-hub prints (what keras-hub does differently
    without changing the model's inference outputs).

    Raises ExportError (one line) for a model keras-hub cannot compute: attention-only or
    FFN-only sharing, an activation other than the tanh GELU, or layers it would assign to
    other groups than ours.
    """
    if config.shared_params in ("attention", "ffn"):
        raise ExportError(
            f"shared_params={config.shared_params!r}: keras-hub shares whole blocks or nothing, "
            "not the attention or the FFN alone; this model cannot travel to keras-hub"
        )
    if config.hidden_act not in KERAS_HUB_ACTIVATIONS:
        raise ExportError(
            f"hidden_act {config.hidden_act!r}: keras-hub's AlbertBackbone computes only the "
            "tanh GELU (ALBERT's 'gelu'); this model cannot travel to keras-hub"
        )
    layers, groups = config.num_hidden_layers, whole_block_groups(config)
    per_group = layers // groups
    ours = [config.group_of_layer(i) for i in range(layers)]
    if config.shared_params == "none":
        ours = list(range(layers))
    if layers % groups or ours != [i // per_group for i in range(layers)]:
        raise ExportError(
            f"{layers} layers in {groups} groups: keras-hub's AlbertBackbone needs the layers "
            "to divide evenly among the groups; this model cannot travel to keras-hub"
        )
    notes = []
    if config.hidden_dropout_prob != config.attention_probs_dropout_prob:
        notes.append(
            f"keras-hub has one dropout rate: the preset trains with {config.hidden_dropout_prob} "
            f"on attention probabilities too (ours {config.attention_probs_dropout_prob}); "
            "inference is the same"
        )
    return notes


def backbone_config(config: AlbertConfig) -> dict[str, Any]:
    """keras-hub `AlbertBackbone` arguments for `config` (check `check_travels` first)."""
    return dict(
        vocabulary_size=config.vocab_size,
        num_layers=config.num_hidden_layers,
        num_heads=config.num_attention_heads,
        embedding_dim=config.embedding_size,
        hidden_dim=config.hidden_size,
        intermediate_dim=config.intermediate_size,
        num_groups=whole_block_groups(config),
        num_inner_repetitions=config.inner_group_num,
        dropout=config.hidden_dropout_prob,
        max_sequence_length=config.max_position_embeddings,
        num_segments=config.type_vocab_size,
    )


def config_from_backbone(values: dict[str, Any]) -> AlbertConfig:
    """Our config from an `AlbertBackbone` config (the `config` of a preset's config.json)."""
    try:
        return AlbertConfig(
            vocab_size=values["vocabulary_size"],
            embedding_size=values["embedding_dim"],
            hidden_size=values["hidden_dim"],
            num_hidden_layers=values["num_layers"],
            num_hidden_groups=values.get("num_groups", 1),
            num_attention_heads=values["num_heads"],
            intermediate_size=values["intermediate_dim"],
            inner_group_num=values.get("num_inner_repetitions", 1),
            hidden_act="gelu",
            hidden_dropout_prob=values.get("dropout", 0.0),
            attention_probs_dropout_prob=values.get("dropout", 0.0),
            max_position_embeddings=values.get("max_sequence_length", 512),
            type_vocab_size=values.get("num_segments", 2),
            initializer_range=KERAS_HUB_INITIALIZER_RANGE,
        )
    except KeyError as e:
        raise ConfigError(f"AlbertBackbone config has no {e.args[0]!r}") from None


# === keras-hub itself ===


def import_keras_hub() -> Any:
    """keras_hub, on Keras 3's TensorFlow backend unless Keras was already imported (then on
    its backend). Raises InstallError naming the extra when keras-hub is missing."""
    if "keras" not in sys.modules:
        os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    try:
        import keras_hub
    except ImportError as error:
        raise InstallError(
            f"keras-hub presets need the keras-hub extra ({error.name} is missing): "
            'pip install -e ".[keras-hub]"'
        ) from None
    return keras_hub


def weights_by_path(model: Any) -> dict[str, Any]:
    """A Keras 3 model's variables keyed by path (`group_0_inner_layer_0/.../kernel`)."""
    return {v.path: v for v in model.weights}


# === Reading a preset ===


@dataclass
class KerasHubPreset:
    """What a keras-hub ALBERT preset holds, in our terms (arrays keyed by our names)."""

    config: AlbertConfig
    task: str  # BACKBONE, MASKED_LM or CLASSIFIER
    arrays: dict[str, np.ndarray]  # our variable name -> value, in keras-hub's shape
    sp_model: Path | None  # the SentencePiece model our tokenizer should read
    sequence_length: int | None  # the task preprocessor's, when it has one
    report: dict[str, Any]  # our report.json when we wrote the preset, else {}


def _json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CheckpointError(f"cannot read {path}: {e}") from None


def _class_name(values: dict[str, Any]) -> str:
    return values.get("registered_name", values.get("class_name", "")).split(">")[-1]


def read_keras_hub_preset(path: str | os.PathLike) -> KerasHubPreset:
    """Loads a keras-hub ALBERT preset directory with keras-hub and maps it to our names.

    The task is the one task.json names when keras-hub's AlbertMaskedLM or AlbertTextClassifier
    (their heads come along), else the backbone alone. Raises CheckpointError (not a preset,
    another model, untranslatable weights) or ConfigError.
    """
    path = Path(path)
    if not (path / PRESET_CONFIG_FILE).is_file():
        raise CheckpointError(f"{path} is not a keras-hub preset (no {PRESET_CONFIG_FILE})")
    backbone = _json(path / PRESET_CONFIG_FILE)
    if _class_name(backbone) != BACKBONE:
        raise CheckpointError(
            f"{path} holds a keras-hub {_class_name(backbone) or 'unknown'} model, not "
            f"an {BACKBONE}"
        )
    config = config_from_backbone(backbone.get("config", {}))
    task = BACKBONE
    if (path / PRESET_TASK_FILE).is_file():
        name = _class_name(_json(path / PRESET_TASK_FILE))
        task = name if name in (MASKED_LM, CLASSIFIER) else BACKBONE
    keras_hub = import_keras_hub()
    try:
        model = getattr(keras_hub.models, task).from_preset(str(path))
    except (OSError, ValueError) as e:
        raise CheckpointError(f"keras-hub cannot load {path}: {e}") from None
    import keras

    weights = {k: keras.ops.convert_to_numpy(v) for k, v in weights_by_path(model).items()}
    head = {MASKED_LM: "mlm", CLASSIFIER: "classifier"}.get(task)
    arrays = _our_arrays(config, head, weights, path)
    report = _json(path / REPORT_FILE) if (path / REPORT_FILE).is_file() else {}
    sp_model = path / ORIGINAL_SP_MODEL
    if not sp_model.is_file():
        sp_model = path / PRESET_SP_MODEL if (path / PRESET_SP_MODEL).is_file() else None
    preprocessor = getattr(model, "preprocessor", None)
    return KerasHubPreset(
        config,
        task,
        arrays,
        sp_model,
        getattr(preprocessor, "sequence_length", None),
        report,
    )


def _our_arrays(
    config: AlbertConfig, head: str | None, weights: dict[str, np.ndarray], path: Path
) -> dict[str, np.ndarray]:
    """keras-hub arrays by path -> ours by name (shapes left to the assignment's check)."""
    pairs = dict(name_pairs(config, head))
    used = set(pairs.values())
    if config.embedding_size == config.hidden_size:
        kernel, bias = weights["embedding_projection/kernel"], weights["embedding_projection/bias"]
        if not (np.array_equal(kernel, np.eye(len(kernel))) and not bias.any()):
            raise CheckpointError(
                f"{path}: embedding_dim == hidden_dim but the embedding projection is not the "
                "identity; albert-tf's model has no projection there"
            )
        used |= {"embedding_projection/kernel", "embedding_projection/bias"}
    unknown = sorted(set(weights) - used)
    if unknown:
        raise CheckpointError(f"{path}: variables with no place in the model: {', '.join(unknown)}")
    missing = sorted(theirs for theirs in pairs.values() if theirs not in weights)
    if missing:
        raise CheckpointError(f"{path}: missing variable(s) {', '.join(missing)}")
    return {ours: weights[theirs] for ours, theirs in pairs.items()}


# === Writing our checkpoint directory ===


def convert_keras_hub_preset(
    path: str | os.PathLike,
    output_dir: str | os.PathLike,
    *,
    sp_model: str | os.PathLike | None = None,
    overwrite: bool = False,
) -> Path:
    """`albert-tf convert --keras-hub-preset`: writes our checkpoint directory (atomic).

    A backbone or `AlbertMaskedLM` preset becomes a checkpoint directory (encoder, and the MLM
    head); an `AlbertTextClassifier` preset a fine-tuned classify model directory as `finetune`
    writes one (`predict` reads it; no serving/), with the labels and settings our export
    recorded in report.json, else labels "0".."N-1" at the preprocessor's sequence length. The
    SentencePiece model is `sp_model`, else the one our export stored, else the preset's
    `vocabulary.spm`.
    """
    preset = read_keras_hub_preset(path)
    sp_model = Path(sp_model) if sp_model is not None else preset.sp_model
    model = build_model(preset.config, with_mlm=preset.task == MASKED_LM, with_sop=False)
    targets = variables_by_name(model)
    encoder_arrays = {k: v for k, v in preset.arrays.items() if not k.startswith("task_head/")}
    assign_checked(
        targets,
        {
            name: (name, _reshaped(array, targets.get(name)))
            for name, array in encoder_arrays.items()
        },
        source=str(path),
    )
    if preset.task != CLASSIFIER:
        return model.save(output_dir, sp_model=sp_model, overwrite=overwrite)
    return _write_classifier(
        preset, model.encoder, sp_model, Path(path), Path(output_dir), overwrite
    )


def _reshaped(array: np.ndarray, variable: Any) -> np.ndarray:
    """`array` in the variable's shape when it only splits or joins axes (attention heads)."""
    if variable is None or array.size != variable.shape.num_elements():
        return array
    return array.reshape(variable.shape)


def _write_classifier(
    preset: KerasHubPreset,
    encoder: Any,
    sp_model: Path | None,
    path: Path,
    output_dir: Path,
    overwrite: bool,
) -> Path:
    """A fine-tuned classify model directory from a classifier preset (see the caller)."""
    if sp_model is None:
        raise CheckpointError(f"{path} has no tokenizer: give --sp-model")
    kernel = preset.arrays["task_head/dense/kernel"]
    head = TaskHead(kernel.shape[1], initializer_range=preset.config.initializer_range)
    head({"pooled_output": tf.zeros([1, preset.config.hidden_size])})
    head.set_output_weights(kernel, preset.arrays["task_head/dense/bias"])
    report = preset.report
    recorded = report.get("finetune_settings")
    tokenizer = report.get("tokenizer") or {}
    if recorded is not None:
        settings = FinetuneSettings.from_record(recorded)
    else:
        settings = FinetuneSettings(
            task="classify",
            train=f"(converted from the keras-hub preset {path})",
            init=str(path),
            output=str(output_dir),
            labels=tuple(str(i) for i in range(kernel.shape[1])),
            max_seq_length=preset.sequence_length or preset.config.max_position_embeddings,
            do_lower_case=tokenizer.get("do_lower_case", True),
        )
    record = FinetuneRecord(settings=settings, converted_from=f"keras-hub preset {path}")
    with atomic_dir(output_dir, overwrite=overwrite) as tmp:
        write_finetuned(
            tmp,
            record,
            sp_model,
            config=preset.config,
            checkpoint={"encoder": encoder, "task_head": head},
        )
    return output_dir
