"""`export --hf`: a model -> a Hugging Face transformers folder (`hf/`), without torch.

The folder holds `config.json` (every key of transformers' `AlbertConfig`, so nothing falls
back to its xxlarge defaults), `model.safetensors` (float32, written with `safetensors.numpy`)
and, with a SentencePiece model, the tokenizer (`albert_tf.export.hf_tokenizer`). Weight names come from
the one table `albert_tf.convert.hf` reads HF folders with, read backwards (`source_of`).

- A pretraining checkpoint becomes an `AlbertForPreTraining` (MLM and SOP heads present), an
  `AlbertForMaskedLM` (MLM head only; its pooler is written too, which that class reports as
  unexpected) or an `AlbertModel`; the MLM decoder is not written, as transformers ties it to
  the word embeddings and `predictions.bias`. Every class loads the folder with no missing
  weights; a class without one of its heads reports that head as unexpected, as usual.
- A fine-tuned model becomes the transformers class of its task (`TASK_CLASSES`), its head
  under `classifier.*` or `qa_outputs.*`; tagging and SQuAD models leave out the pooler, which
  they never read and their transformers classes do not have.

What transformers cannot compute is refused before anything is written
(`check_hf_exportable`): attention-only or FFN-only sharing, a layer-to-group assignment that
transformers' `int(i / (L / G))` does not reproduce, an activation it has no name for. Sharing
nothing travels as one group per layer.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import save_file

from albert_tf.config import CONFIG_FILE as OUR_CONFIG_FILE
from albert_tf.config import AlbertConfig
from albert_tf.convert.hf import (
    CONFIG_FILE,
    TASK_CLASSES,
    WEIGHTS_FILE,
    check_hf_exportable,
    hf_config,
    hf_name,
    source_of,
)
from albert_tf.errors import ExportError
from albert_tf.export.hf_tokenizer import require_tokenizers, write_tokenizer
from albert_tf.export.writers import FINETUNED_WRITERS, ExportSource, write_one, writers_named
from albert_tf.finetune.directory import read_record
from albert_tf.finetune.predict import load_finetuned
from albert_tf.preprocess.tokenizer import AlbertTokenizer, as_tokenizer
from albert_tf.weights import variables_by_name


def hf_tensors(variables: dict[str, Any]) -> dict[str, np.ndarray]:
    """HF tensors (float32, HF layout and names, `albert.` before the encoder's) of our
    variables by name (`albert_tf.weights.variables_by_name`: the MLM head's table is
    the word embeddings, which transformers ties its decoder to)."""
    tensors = {}
    for name, variable in variables.items():
        key, transpose = source_of(hf_name(name))
        if name.startswith("encoder/"):
            key = f"albert.{key}"
        array = np.asarray(variable.numpy(), np.float32)
        tensors[key] = np.ascontiguousarray(array.T if transpose else array)
    return tensors


def write_hf_dir(
    target: str | os.PathLike,
    config_values: dict[str, Any],
    tensors: dict[str, np.ndarray],
    tokenizer: AlbertTokenizer | None,
    do_lower_case: bool,
) -> Path:
    """Writes `config.json`, `model.safetensors` and (with `tokenizer`) the tokenizer files
    into the existing empty directory `target`."""
    target = Path(target)
    (target / CONFIG_FILE).write_text(json.dumps(config_values, indent=2) + "\n", encoding="utf-8")
    # transformers reads safetensors whose metadata names the framework ("pt").
    save_file(tensors, str(target / WEIGHTS_FILE), metadata={"format": "pt"})
    if tokenizer is not None:
        write_tokenizer(target, tokenizer, do_lower_case, config_values["max_position_embeddings"])
    return target


def special_token_ids(tokenizer: AlbertTokenizer | None) -> dict[str, int] | None:
    """`pad_token_id`, `bos_token_id` ([CLS]), `eos_token_id` ([SEP]) of a tokenizer; None
    without one."""
    if tokenizer is None:
        return None
    return {
        "pad_token_id": tokenizer.pad_id,
        "bos_token_id": tokenizer.cls_id,
        "eos_token_id": tokenizer.sep_id,
    }


def export_checkpoint_hf(
    checkpoint: Any,
    target: str | os.PathLike,
    sp_model: str | os.PathLike | AlbertTokenizer | None,
    do_lower_case: bool = True,
) -> str:
    """Writes `checkpoint` (an `albert_tf.checkpoint.CheckpointDir`) into the empty directory
    `target`, with the tokenizer of `sp_model` (a path or the loaded tokenizer) if given;
    returns the transformers class it is (`architectures`). Call `check_hf_exportable` first."""
    if checkpoint.mlm_head is not None and checkpoint.sop_head is not None:
        architecture = "AlbertForPreTraining"
    elif checkpoint.mlm_head is not None:
        architecture = "AlbertForMaskedLM"
    else:
        architecture = "AlbertModel"
    variables = variables_by_name(checkpoint)
    tokenizer = None if sp_model is None else as_tokenizer(sp_model, do_lower_case)
    values = hf_config(checkpoint.config, architecture, special_token_ids(tokenizer))
    write_hf_dir(target, values, hf_tensors(variables), tokenizer, do_lower_case)
    return architecture


def check_hf(source: ExportSource) -> None:
    """The `hf` writer's check (`albert_tf.export.writers`): `check_hf_exportable`, and the `tokenizers`
    package when there is a tokenizer to write."""
    check_hf_exportable(source.config)
    if source.tokenizer is not None:
        require_tokenizers()


def write_hf(source: ExportSource, target: Path) -> dict[str, Any]:
    """The `hf` writer (`albert_tf.export.writers`): `export_checkpoint_hf` into `target`; returns
    {"architecture": the transformers class}."""
    architecture = export_checkpoint_hf(
        source.checkpoint, target, source.tokenizer, source.do_lower_case
    )
    return {"architecture": architecture}


def _task_fields(settings: Any) -> dict[str, Any]:
    """The `config.json` keys of a fine-tuned task: its labels and `problem_type`."""
    if settings.task == "regress":
        return {
            "id2label": {"0": "LABEL_0"},
            "label2id": {"LABEL_0": 0},
            "problem_type": "regression",
        }
    if settings.task in ("classify", "tag"):
        labels = list(settings.labels)
        fields = {
            "id2label": {str(i): label for i, label in enumerate(labels)},
            "label2id": {label: i for i, label in enumerate(labels)},
        }
        if settings.task == "classify":
            fields["problem_type"] = "single_label_classification"
        return fields
    return {}


def _not_in_hf(settings: Any, dtype: str) -> str | None:
    """One line saying what our fine-tuned model computes and the HF model does not; None when
    they compute the same."""
    notes = []
    if settings.max_windows > 1:
        pooled = "averages" if settings.task == "tag" else f"{settings.window_pooling}-pools"
        notes.append(
            f"reads one window of {settings.max_seq_length} tokens (albert-tf {pooled} the "
            f"logits of up to {settings.max_windows} windows of a long text)"
        )
    if settings.task == "squad":
        notes.append(
            "leaves padding positions' logits as computed (albert-tf sets them to -10000) and "
            "has no doc-stride windows or answer extraction (albert-tf predict does both)"
        )
    if dtype != "float32":
        notes.append(f"computes in float32 (fine-tuned in {dtype})")
    return "the Hugging Face model " + "; ".join(notes) if notes else None


# transformers' AlbertForQuestionAnswering is BERT's start/end head.
SQUAD_HEAD_REFUSAL = (
    "{} has ALBERT's SQuAD 2.0 head, which transformers' AlbertForQuestionAnswering does not "
    "have: --hf exports SQuAD models fine-tuned with --squad-head bert"
)


def check_finetuned_hf(finetuned_dir: str | os.PathLike) -> None:
    """ExportError (one line) for a fine-tuned directory that cannot travel: fine-tuned from a
    TF-Hub encoder (whose weights are not ours to name), a SQuAD model with ALBERT's SQuAD 2.0
    head (transformers has BERT's only), or refused by `check_hf_exportable`.
    Reads only `finetune.json` and the config; CheckpointError if the directory is not one."""
    finetuned_dir = Path(finetuned_dir)
    record = read_record(finetuned_dir)
    if record.from_hub:
        raise ExportError(
            f"{finetuned_dir} fine-tuned a TF-Hub encoder: --hf exports models fine-tuned from "
            "an albert-tf checkpoint"
        )
    if record.settings.task == "squad" and record.settings.squad_head == "albert":
        raise ExportError(SQUAD_HEAD_REFUSAL.format(finetuned_dir))
    check_hf_exportable(AlbertConfig.from_json_file(finetuned_dir / OUR_CONFIG_FILE))


def check_hf_finetuned(source: ExportSource) -> None:
    """The fine-tuned `hf` writer's check (`albert_tf.export.writers`): `check_finetuned_hf`."""
    check_finetuned_hf(source.finetuned_dir)


def export_finetuned_hf(finetuned_dir: str | os.PathLike) -> tuple[Path, str, str | None]:
    """Writes `finetuned_dir/hf/` (replaced atomically) with the transformers class of the
    task (`TASK_CLASSES`) and the model's tokenizer. Returns (the folder, the class, one line
    saying what the HF model does not compute that ours does, or None).

    Raises CheckpointError (not a fine-tuned model directory) and ExportError (see
    `check_finetuned_hf`) before anything is written.
    """
    check_finetuned_hf(finetuned_dir)
    finetuned_dir = Path(finetuned_dir)
    source = ExportSource(finetuned_dir=finetuned_dir, finetuned=load_finetuned(finetuned_dir))
    (writer,) = writers_named(FINETUNED_WRITERS, ["hf"])
    written = write_one(writer, source, finetuned_dir / writer.directory)
    return finetuned_dir / writer.directory, written["architecture"], written["note"]


def write_hf_finetuned(source: ExportSource, target: Path) -> dict[str, Any]:
    """The fine-tuned `hf` writer (`albert_tf.export.writers`): the folder of `export_finetuned_hf` into
    `target`; returns {"architecture": the transformers class, "note": `_not_in_hf`'s line}."""
    finetuned = source.finetuned
    encoder = finetuned.model.encoder
    settings = finetuned.task.settings
    architecture, head_name = TASK_CLASSES[settings.task]
    variables = {v.name.removesuffix(":0"): v for v in encoder.variables}
    if finetuned.task.reads == "sequence_output":
        # The token-level classes have no pooler, and these tasks never read it.
        variables = {k: v for k, v in variables.items() if not k.startswith("encoder/pooler/")}
    tensors = hf_tensors(variables)
    kernel, bias = finetuned.model.task_head.output_weights()
    tensors[f"{head_name}.weight"] = np.ascontiguousarray(kernel.T)
    tensors[f"{head_name}.bias"] = bias
    tokenizer = finetuned.tokenizer  # the fine-tuned model's own, loaded once
    values = hf_config(
        encoder.config, architecture, special_token_ids(tokenizer), **_task_fields(settings)
    )
    write_hf_dir(target, values, tensors, tokenizer, finetuned.record.settings.do_lower_case)
    note = _not_in_hf(settings, finetuned.record.dtype)
    return {"architecture": architecture, "note": note}


def describe_hf(path: Path, report: dict[str, Any]) -> list[str]:
    """The `hf` writers' lines for `albert-tf export`: the class, and what it does not compute."""
    lines = [f"wrote {path}: {report['architecture']}"]
    if report.get("note"):
        lines.append(f"  {report['note']}")
    return lines
