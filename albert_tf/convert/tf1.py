"""Original TF1 checkpoints -> our model: the encoder's table is defined in `albert_tf.tf1`
(training reads TF1 checkpoints, so it stands below training) and importable from here as
before. A run_squad_v2.py checkpoint's head (ALBERT's SQuAD 2.0 head) has its table here:
`convert_tf1_squad` writes such a checkpoint as a fine-tuned squad model directory."""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.errors import CheckpointError
from albert_tf.finetune.directory import FinetuneRecord, write_finetuned
from albert_tf.finetune.features import INPUT_NAMES
from albert_tf.finetune.models import TaskModel, build_head
from albert_tf.finetune.serving import export_serving_model
from albert_tf.finetune.settings import FinetuneSettings
from albert_tf.finetune.tasks import get_task
from albert_tf.io_utils import atomic_dir
from albert_tf.preprocess.tokenizer import AlbertTokenizer
from albert_tf.tf1 import (
    IGNORED,
    PREFIXES,
    convert_tf1_checkpoint,
    load_tf1_checkpoint,
    read_tf1_checkpoint,
    resolve_checkpoint_prefix,
    target_name,
)
from albert_tf.weights import assign_checked, build_model, variables_by_name

__all__ = [
    "IGNORED",
    "PREFIXES",
    "SQUAD_V2_HEAD",
    "convert_tf1_checkpoint",
    "convert_tf1_squad",
    "has_squad_v2_head",
    "load_tf1_checkpoint",
    "read_tf1_checkpoint",
    "resolve_checkpoint_prefix",
    "target_name",
]

# run_squad_v2.py's head variables -> the attribute path of each in
# `finetune.tasks.squad.heads.SquadV2Head`.
SQUAD_V2_HEAD = {
    "start_logits/dense/kernel": "start_logits.kernel",
    "start_logits/dense/bias": "start_logits.bias",
    "end_logits/dense_0/kernel": "end_logits.dense_0.kernel",
    "end_logits/dense_0/bias": "end_logits.dense_0.bias",
    "end_logits/LayerNorm/gamma": "end_logits.layer_norm.gamma",
    "end_logits/LayerNorm/beta": "end_logits.layer_norm.beta",
    "end_logits/dense_1/kernel": "end_logits.dense_1.kernel",
    "end_logits/dense_1/bias": "end_logits.dense_1.bias",
    "answer_class/dense_0/kernel": "answer_class.dense_0.kernel",
    "answer_class/dense_0/bias": "answer_class.dense_0.bias",
    "answer_class/dense_1/kernel": "answer_class.dense_1.kernel",
}
# run_squad_v2.py's feature and decoding defaults, for what a checkpoint does not record.
RUN_SQUAD_V2_SETTINGS = {
    "max_seq_length": 384,
    "doc_stride": 128,
    "max_query_length": 64,
    "n_best_size": 20,
    "max_answer_length": 30,
    "start_n_top": 5,
    "end_n_top": 5,
}


def _squad_model(tensors: dict, config: AlbertConfig, settings: Any, source: str) -> Any:
    """The task model of a run_squad_v2.py checkpoint's `tensors`, every variable filled."""
    head_values = {n: (n, tensors.pop(n)) for n in list(tensors) if n in SQUAD_V2_HEAD}
    unmapped = sorted(n for n in tensors if target_name(n) is None)
    if unmapped:
        raise CheckpointError(f"{source}: unexpected variable(s): {', '.join(unmapped)}")
    encoder = build_model(config, with_mlm=False, with_sop=False)
    values = {target_name(n): (n, array) for n, array in tensors.items()}
    assign_checked(variables_by_name(encoder), values, source=source)
    task = get_task(settings)
    model = TaskModel(encoder.encoder, build_head(task, config.initializer_range), task)
    model({name: tf.zeros(task.input_shape(), tf.int32) for name in INPUT_NAMES}, training=False)
    head = {
        name: functools.reduce(getattr, path.split("."), model.task_head)
        for name, path in SQUAD_V2_HEAD.items()
    }
    assign_checked(head, head_values, source=source)
    return model


def has_squad_v2_head(checkpoint: str | os.PathLike) -> bool:
    """Whether the TF1 checkpoint holds ALBERT's SQuAD 2.0 head (a run_squad_v2.py checkpoint).
    CheckpointError if there is no checkpoint at `checkpoint`."""
    names = {name for name, _ in tf.train.list_variables(resolve_checkpoint_prefix(checkpoint))}
    return bool(names & set(SQUAD_V2_HEAD))


def convert_tf1_squad(
    checkpoint: str | os.PathLike,
    config_path: str | os.PathLike,
    output_dir: str | os.PathLike,
    *,
    sp_model: str | os.PathLike,
    settings: Mapping[str, Any] | None = None,
    overwrite: bool = False,
) -> Path:
    """A checkpoint of google-research/albert's run_squad_v2.py (the encoder and ALBERT's SQuAD
    2.0 head, `SQUAD_V2_HEAD`) -> a fine-tuned squad model directory, as `finetune` writes one
    (`predict` and `export --finetuned` read it; `serving/` included).

    `settings`: `FinetuneSettings` fields of the run the checkpoint came from (sequence length,
    doc stride, beam sizes, `null_score_diff_threshold` picked on dev); the rest are
    run_squad_v2.py's defaults (`RUN_SQUAD_V2_SETTINGS`). Without a threshold, evaluating the
    model picks one on the evaluated file, as run_squad_v2.py does. Raises CheckpointError for a
    variable unknown, missing or of the wrong shape.
    """
    source = str(checkpoint)
    run = FinetuneSettings(
        task="squad",
        train=f"(converted from the TF1 checkpoint {source})",
        init=source,
        output=str(output_dir),
        squad_head="albert",
        version_2_with_negative=True,
        **{**RUN_SQUAD_V2_SETTINGS, **(settings or {})},
    )
    config = AlbertConfig.from_json_file(config_path)
    model = _squad_model(read_tf1_checkpoint(checkpoint), config, run, source)
    tokenizer = AlbertTokenizer(sp_model, do_lower_case=run.do_lower_case)
    record = FinetuneRecord(settings=run, converted_from=f"run_squad_v2.py checkpoint {source}")
    serving = None
    if run.export_serving:
        serving = functools.partial(export_serving_model, model, tokenizer)
    with atomic_dir(output_dir, overwrite=overwrite) as tmp:
        write_finetuned(
            tmp,
            record,
            sp_model,
            config=config,
            checkpoint={"encoder": model.encoder, "task_head": model.task_head},
            serving=serving,
        )
    return Path(output_dir)
