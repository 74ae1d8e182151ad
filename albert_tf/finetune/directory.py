"""The fine-tuned model directory: its file names and its `finetune.json`, in one place.

`albert-tf finetune` writes the directory (`finetune.trainer`), `convert --keras-hub-preset`
writes one from a keras-hub classifier, and `predict`, `serving` and every exporter
(`albert_tf.export.hf`, `albert_tf.export.keras_hub`, `albert_tf.export.onnx.classifier`) read one:

- `albert_config.json` (`albert_tf.config.CONFIG_FILE`) and a TF2 checkpoint of `encoder` and
  `task_head` (or, fine-tuned from a TF-Hub encoder, the encoder SavedModel in `hub_encoder/`);
- `spm.model` (`albert_tf.config.SP_MODEL_FILE`), the tokenizer;
- `finetune.json`: the task, its labels, `max_seq_length`, `do_lower_case`, the encoder's kind
  ("checkpoint" or "hub"), the dtype, every setting (`FinetuneSettings.record`) and the run's
  history;
- `serving/`: the strings-in serving SavedModel (`finetune.serving`);
- beside them, what `export --finetuned` writes (`onnx/`, `hf/`, `keras_hub/`, `tflite/`, named by
  `albert_tf.export.writers.FINETUNED_WRITERS`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from albert_tf.errors import CheckpointError

METADATA_FILE = "finetune.json"
HUB_ENCODER_DIR = "hub_encoder"
SERVING_DIR = "serving"


def read_metadata(path: str | os.PathLike) -> dict[str, Any]:
    """`finetune.json` of the fine-tuned model directory `path`.

    Raises CheckpointError (one line) when `path` has none or it is not JSON.
    """
    path = Path(path)
    meta_file = path / METADATA_FILE
    if not meta_file.is_file():
        raise CheckpointError(f"{path} is not a fine-tuned model directory (no {METADATA_FILE})")
    try:
        return json.loads(meta_file.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CheckpointError(f"{meta_file} is corrupt: {e}") from None


def write_metadata(directory: str | os.PathLike, metadata: dict[str, Any]) -> None:
    """Writes `metadata` as `directory/finetune.json` (indented JSON)."""
    text = json.dumps(metadata, indent=2) + "\n"
    (Path(directory) / METADATA_FILE).write_text(text, encoding="utf-8")
