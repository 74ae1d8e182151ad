"""What a finished distillation run writes beside its `run/` directory.

- Sentence-encoder teacher: a checkpoint directory (`albert_config.json`, a TF2 checkpoint of
  `encoder`, `mlm` and `sop` where the student has them, `spm.model`): what `pretrain` writes,
  so `finetune --init`, `evaluate` and `export` take it.
- Fine-tuned teacher: a fine-tuned directory (`finetune.json` with the teacher's task, labels and
  feature settings, a checkpoint of `encoder` and `task_head`, `spm.model`, `serving/`), which
  `predict`, `export --finetuned` and the serving paths take as they are.

Then `distill.json`: the settings (the last segment's), what ran (`ran`: the steps taken, the
dtype of each step range, the hardware, every setting changed mid-run and the step it changed
at), the teacher, the texts, the training curve and, with --eval, the student beside the
teacher.
"""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import tensorflow as tf

from albert_tf.checkpoint import write_checkpoint
from albert_tf.config import CONFIG_FILE, SP_MODEL_FILE, SP_VOCAB_FILE
from albert_tf.distill import losses
from albert_tf.distill.cache import fill_cache
from albert_tf.distill.data import pad_batch, read_unlabeled, token_ids
from albert_tf.distill.settings import CACHE_DIR, HISTORY_FILE, RESULT_FILE, RUN_DIR
from albert_tf.distill.student import Student
from albert_tf.distill.teachers import SENTENCE
from albert_tf.finetune.directory import FinetuneRecord, write_finetuned
from albert_tf.finetune.predict import load_finetuned, predict_file
from albert_tf.finetune.serving import export_serving_model

# A student this far below its teacher's score on --eval (2 points of accuracy) gets a warning.
TRAILS = 0.02


def _common_files(output: Path, student: Student) -> None:
    """The config and the tokenizer of a checkpoint directory (a sentence-encoder teacher's)."""
    student.config.to_json_file(output / CONFIG_FILE)
    shutil.copyfile(student.sp_model_path, output / SP_MODEL_FILE)
    _copy_vocab(output, student)


def _copy_vocab(output: Path, student: Student) -> None:
    """The SentencePiece vocabulary beside the model, when the student's has one."""
    vocab = student.sp_model_path.with_suffix(".vocab")
    if vocab.is_file():
        shutil.copyfile(vocab, output / SP_VOCAB_FILE)


def _sentence_eval(settings, output: Path, student: Student, teacher) -> dict:
    """Mean cosine and embedding loss of the student's projection against the teacher on the
    --eval texts (teacher outputs cached beside the training ones)."""
    texts = read_unlabeled([settings.eval_path], settings.text_column)
    cache = Path(settings.teacher_cache or output / CACHE_DIR)
    cache = cache.with_name(cache.name + "_eval")
    batch = settings.teacher_batch_size
    targets = fill_cache(
        cache, teacher.identity(), texts, lambda c: teacher.embed(c, batch), progress=False
    )
    rows = token_ids(student.tokenizer, texts, settings.max_seq_length)
    projected = []
    for begin in range(0, len(rows), settings.eval_batch_size):
        inputs = pad_batch(rows[begin : begin + settings.eval_batch_size])
        pooled = student.encoder(inputs, training=False)["pooled_output"]
        projected.append(tf.cast(student.head(pooled), tf.float32).numpy())
    values = np.concatenate(projected)
    return {
        "texts": len(texts),
        "cosine": float(losses.cosine(values, targets)),
        "distill_loss": float(losses.embedding_loss(values, targets)),
    }


def _write_finetuned(settings, output: Path, student: Student, teacher) -> None:
    """The fine-tuned directory of a task-distilled student (see the module docstring): the
    teacher's settings with the student's sequence length and tokenizer's case."""
    taught = teacher.finetuned.record.settings
    record = FinetuneRecord(
        settings=taught.replace(
            max_seq_length=settings.max_seq_length,
            do_lower_case=student.tokenizer.do_lower_case,
        ),
        encoder="checkpoint",
        dtype="float32",
        unknown={"distilled_from": str(teacher.path)},
    )
    write_finetuned(
        output,
        record,
        student.sp_model_path,
        config=student.config,
        checkpoint={"encoder": student.encoder, "task_head": student.head},
        serving=_serving_of_written,
    )


def _serving_of_written(path: Path) -> None:
    """Writes `path` (serving/) from the directory just written, loaded back as `predict`
    loads it (in float32, whatever --dtype the student trained in)."""
    finetuned = load_finetuned(path.parent)
    export_serving_model(finetuned.model, finetuned.tokenizer, path)


def _task_eval(settings, output: Path, teacher, log) -> dict:
    """The student's and the teacher's scores on the labeled --eval file (the teacher's own
    --eval file by default), logged side by side (`beside_teacher`)."""
    if settings.eval_path is None:
        return {}
    finetuned = load_finetuned(output)
    scores = {}
    for name, model in (("student", finetuned), ("teacher", teacher.finetuned)):
        _, scores[name], data = predict_file(model, settings.eval_path, settings.eval_batch_size)
    if scores["student"] is None:  # a file without labels: nothing to set side by side
        return scores
    metric = finetuned.task.best_metric
    lines = beside_teacher(
        metric, scores["student"][metric], scores["teacher"][metric], len(data.examples),
        settings,
    )  # fmt: skip
    for line in lines:
        log(line)
    return scores


def beside_teacher(metric: str, student: float, teacher: float, count: int, settings) -> list[str]:
    """The student's `metric` beside its teacher's on `count` --eval examples, with the teacher's
    standard error, and a one-line warning when the student trails by more than TRAILS."""
    spread = math.sqrt(max(teacher * (1 - teacher), 0.0) / max(count, 1))
    lines = [
        f"student {metric} {student:.4f}, teacher {teacher:.4f} (± {spread:.4f}), on "
        f"{settings.eval_path}"
    ]
    if student < teacher - TRAILS:
        lines.append(
            f"warning: the student trails its teacher by {100 * (teacher - student):.1f} points "
            f"of {metric}: try more --train-steps (now {settings.train_steps}), more in-domain "
            "--unlabeled text, or the labeled data the teacher learned from (see "
            "--no-teacher-data)"
        )
    return lines


def write_result(
    settings,
    output: Path,
    student: Student,
    teacher,
    count: int,
    log: Callable[[str], None],
    ran: dict,
) -> dict:
    """Writes the finished run's model and `distill.json` into `output`; returns the record.
    `ran` is what the run ran (`albert_tf.run_record.RunLog.summary`: steps, dtype by step
    range, hardware, settings changed mid-run), which the record keeps beside the settings."""
    if teacher.kind == SENTENCE:
        _common_files(output, student)
        objects = {"encoder": student.encoder}
        objects |= {"mlm": student.mlm_head} if student.mlm_head is not None else {}
        objects |= {"sop": student.sop_head} if student.sop_head is not None else {}
        write_checkpoint(output, **objects)
        scores = {}
        if settings.eval_path is not None:
            scores = _sentence_eval(settings, output, student, teacher)
            log(f"student against teacher on {settings.eval_path}: cosine {scores['cosine']:.4f}")
    else:
        _write_finetuned(settings, output, student, teacher)
        _copy_vocab(output, student)
        scores = _task_eval(settings, output, teacher, log)
    history_file = output / RUN_DIR / HISTORY_FILE
    history = (
        [json.loads(line) for line in history_file.read_text().splitlines()]
        if history_file.is_file()
        else []
    )
    record = {
        "settings": settings.record(),
        "ran": ran,
        "teacher": teacher.identity(),
        "texts": count,
        "student": student.init_kind,
        "history": history,
        "eval": scores,
    }
    (output / RESULT_FILE).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    log(f"wrote {output}")
    return record
