"""The distillation loop: teacher outputs once (cached), then the student step by step.

The output directory is the run: `run/` holds the training checkpoints (student, head,
optimizer, step; the newest two), `distill_run.json` (the settings a resume must share) and
`run_log.json` (`albert_tf.run_record`: each process's steps, dtype and hardware, and every
setting that changed between them, at its step, also when `distill_run.json` was edited),
`logs/` the TensorBoard summaries, `teacher_cache/` the teacher's outputs (unless
`--teacher-cache` puts them elsewhere). Stopped by SIGTERM or Ctrl-C, the run saves a checkpoint
at the step it reached and returns `preempted`; the same command resumes it, drawing the same
batches and masks it would have drawn. Batches: epoch e visits the texts in
`default_rng([seed, e]).permutation(N)` order; step s masks with `default_rng([seed, s])`.

When training ends the model is written beside them (`albert_tf.distill.output`), and
`distill.json` last: a directory with `distill.json` is a finished run.
"""

from __future__ import annotations

import json
import math
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import tensorflow as tf
import tf_keras as keras

from albert_tf.distill import losses
from albert_tf.distill.cache import fill_cache
from albert_tf.distill.data import pad_batch, read_unlabeled, token_ids
from albert_tf.distill.masking import mask_tokens
from albert_tf.distill.output import write_result
from albert_tf.distill.settings import (
    CACHE_DIR,
    HISTORY_FILE,
    LOGS_DIR,
    RESULT_FILE,
    RESUME_KEYS,
    RUN_DIR,
    RUN_FILE,
    DistillSettings,
)
from albert_tf.distill.student import Student, build_student
from albert_tf.distill.teachers import SENTENCE, TASK, load_teacher, teacher_kind
from albert_tf.dtypes import keras_policy, resolve_dtype
from albert_tf.errors import ConfigError, DataError, OutputError
from albert_tf.optimizer import build_optimizer
from albert_tf.pretraining.preemption import StopSignals
from albert_tf.progress import bar as progress_bar
from albert_tf.run_record import RunLog


@dataclass
class DistillResult:
    """How a run ended: the step reached, the signal that stopped it (None: it finished), its
    record (`distill.json`, None while unfinished)."""

    output_dir: Path
    step: int
    preempted: str | None = None
    record: dict | None = field(default=None)


def _check_inputs(settings: DistillSettings) -> Path:
    """The output directory, checked before anything is loaded (one-line errors)."""
    output = Path(settings.output_dir)
    teacher_kind(settings.teacher)
    if settings.eval_path is not None and not Path(settings.eval_path).exists():
        raise DataError(f"--eval {settings.eval_path} does not exist")
    if settings.mlm_weight < 0 or settings.temperature <= 0 or settings.batch_size < 1:
        raise ConfigError("--mlm-weight must be >= 0, --temperature and --batch-size > 0")
    if (output / RESULT_FILE).is_file():
        if not settings.overwrite:
            raise OutputError(f"{output} holds a finished run (pass --overwrite to redo it)")
        shutil.rmtree(output)
    elif output.exists() and not (output / RUN_DIR / RUN_FILE).is_file() and any(output.iterdir()):
        if not settings.overwrite:
            raise OutputError(f"output {output} already exists (pass --overwrite to replace it)")
        shutil.rmtree(output)
    return output


def _check_resume(run_dir: Path, settings: DistillSettings, write: bool = True) -> None:
    """Checks that a run already there was started with the same RESUME_KEYS (ConfigError
    naming the ones that differ), or, with `write`, writes the settings of the run to come."""
    wanted = {key: settings.record()[key] for key in RESUME_KEYS}
    run_file = run_dir / RUN_FILE
    if run_file.is_file():
        found = json.loads(run_file.read_text(encoding="utf-8"))
        differs = [k for k in RESUME_KEYS if found.get(k) != wanted[k]]
        if differs:
            raise ConfigError(
                f"{run_dir.parent} holds a run started with other {', '.join(differs)} "
                "(pass --overwrite to start again)"
            )
        return
    if not write:
        return
    run_dir.mkdir(parents=True, exist_ok=True)
    run_file.write_text(json.dumps(wanted, indent=2) + "\n", encoding="utf-8")


class _Loop:
    """The student's traced step, its optimizer and checkpoint."""

    def __init__(self, student: Student, settings: DistillSettings, kind: str, total: int):
        self.student, self.settings, self.kind = student, settings, kind
        warmup = settings.warmup_steps
        warmup = int(0.06 * total) if warmup is None else warmup
        self.optimizer = build_optimizer(
            settings.learning_rate,
            max(total, 1),
            min(warmup, max(total - 1, 0)),
            name=settings.optimizer,
            weight_decay=settings.weight_decay,
        )
        parts = [student.encoder, student.head]
        if settings.mlm_weight > 0:
            parts.append(student.mlm_head)
        unique = {id(v): v for part in parts for v in part.trainable_variables}
        self.variables = list(unique.values())
        self.step = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")
        objects = {"encoder": student.encoder, "head": student.head, "step": self.step}
        objects |= {"mlm": student.mlm_head} if student.mlm_head is not None else {}
        objects |= {"sop": student.sop_head} if student.sop_head is not None else {}
        self.checkpoint = tf.train.Checkpoint(optimizer=self.optimizer, **objects)
        ids = tf.TensorSpec([None, None], tf.int32)
        spec = [ids, ids, ids, ids, tf.TensorSpec([None, None], tf.float32)]
        spec += [tf.TensorSpec([None, None], tf.float32), tf.TensorSpec([None], tf.int32)]
        self.train_step = tf.function(self._step, input_signature=spec)

    def _losses(self, ids, mask, positions, labels, weights, targets, gold) -> dict[str, tf.Tensor]:
        """The step's losses; `gold` int32 [B]: each text's label index, -1 where it has none."""
        student, settings = self.student, self.settings
        inputs = dict(input_word_ids=ids, input_mask=mask, input_type_ids=tf.zeros_like(ids))
        outputs = student.encoder(inputs, training=True)
        if self.kind == SENTENCE:
            projected = tf.cast(student.head(outputs["pooled_output"]), tf.float32)
            main = losses.embedding_loss(projected, targets)
            out = {"distill_loss": main, "cosine": losses.cosine(projected, targets)}
        else:
            logits = student.head(outputs, training=True)
            main = losses.soft_target_loss(logits, targets, settings.temperature)
            main += losses.label_loss(logits, gold)
            agree = tf.equal(tf.argmax(logits, -1), tf.argmax(targets, -1))
            out = {"distill_loss": main, "agreement": tf.reduce_mean(tf.cast(agree, tf.float32))}
        out["loss"] = main
        if settings.mlm_weight > 0:
            mlm_logits = student.mlm_head(outputs["sequence_output"], positions)
            mlm, accuracy = losses.mlm_loss(mlm_logits, labels, weights)
            out |= {"mlm_loss": mlm, "mlm_accuracy": accuracy}
            out["loss"] = main + settings.mlm_weight * mlm
        return out

    def _step(self, ids, mask, positions, labels, weights, targets, gold):
        with tf.GradientTape() as tape:
            out = self._losses(ids, mask, positions, labels, weights, targets, gold)
        gradients = tape.gradient(out["loss"], self.variables)
        self.optimizer.apply_gradients(zip(gradients, self.variables, strict=True))
        self.step.assign_add(1)
        return out


def _batch(step, rows, targets, gold, settings, tokenizer, steps_per_epoch):
    """The inputs of training step `step`: ids, mask, MLM positions/labels/weights, targets,
    label indices (`gold`: -1 for a text without a label)."""
    epoch, index = divmod(step, steps_per_epoch)
    order = np.random.default_rng([settings.seed, epoch]).permutation(len(rows))
    chosen = order[index * settings.batch_size : (index + 1) * settings.batch_size]
    batch = pad_batch([rows[i] for i in chosen])
    ids, mask = batch["input_word_ids"], batch["input_mask"]
    if settings.mlm_weight > 0:
        rng = np.random.default_rng([settings.seed, 1 << 20, step])
        ids, positions, labels, weights = mask_tokens(
            ids, mask.sum(1), rng, mask_id=tokenizer.mask_id,
            vocab_size=tokenizer.vocab_size, probability=settings.mlm_probability,
        )  # fmt: skip
    else:
        positions = labels = np.zeros([len(ids), 1], np.int32)
        weights = np.zeros([len(ids), 1], np.float32)
    return ids, mask, positions, labels, weights, targets[chosen], gold[chosen]


def _teacher_outputs(settings: DistillSettings, output: Path, teacher, texts, log, progress):
    """The teacher's outputs on `texts`, float32 [N, W], from its cache (filled where missing)."""
    cache = Path(settings.teacher_cache) if settings.teacher_cache else output / CACHE_DIR
    batch = settings.teacher_batch_size
    targets = fill_cache(
        cache, teacher.identity(), texts, lambda chunk: teacher.embed(chunk, batch),
        log=log, progress=progress,
    )  # fmt: skip
    return targets


def _teacher_files(settings: DistillSettings, teacher, texts: list[str], gold):
    """A fine-tuned teacher's own files: its labeled --train texts join `texts` with their label
    indices in `gold` (unless --no-teacher-data), and its --eval file is the run's when --eval is
    not given. Returns the texts, the label indices, the settings and what the run's first line
    says of the labeled texts ("" for none)."""
    said = ""
    if settings.teacher_data:
        path, labeled, labels = teacher.labeled_texts()
        if labeled:
            said = f" ({len(labeled)} labeled, the teacher's {path})"
            texts = texts + labeled
            gold = np.concatenate([gold, np.array(labels, np.int32)])
    if settings.eval_path is None and teacher.eval_file is not None:
        settings = settings.replace(eval_path=str(teacher.eval_file))
    return texts, gold, settings, said


def distill(
    settings: DistillSettings, log: Callable[[str], None] = print, progress: bool = True
) -> DistillResult:
    """Trains the student `settings.init` names on the teacher's outputs for `settings.unlabeled`
    and writes the result to `settings.output_dir` (see the module docstring).

    Raises AlbertError subclasses (one line each) for a teacher directory of an unknown kind, a
    missing vocabulary, empty --unlabeled, a student that cannot follow the teacher, and a run
    directory that holds another run, before any training.
    """
    output = _check_inputs(settings)
    texts = read_unlabeled(list(settings.unlabeled), settings.text_column)
    teacher = load_teacher(settings.teacher)
    gold, labeled = np.full([len(texts)], -1, np.int32), ""
    if teacher.kind == TASK:
        texts, gold, settings, labeled = _teacher_files(settings, teacher, texts, gold)
    dtype = resolve_dtype(settings.dtype)
    keras.utils.set_random_seed(settings.seed)  # a random student, its head: the same each run
    with keras_policy(dtype):
        student = build_student(settings, teacher)
    length = teacher.finetuned.record.settings.max_seq_length if teacher.kind == TASK else None
    settings = settings.resolved(teacher.kind, len(texts), student.config, length)
    _check_resume(output / RUN_DIR, settings)  # before the teacher's long pass
    targets = _teacher_outputs(settings, output, teacher, texts, log, progress)
    rows = token_ids(student.tokenizer, texts, settings.max_seq_length)
    steps_per_epoch = math.ceil(len(rows) / settings.batch_size)
    total = settings.train_steps
    with keras_policy(dtype):
        loop = _Loop(student, settings, teacher.kind, total)
    manager = tf.train.CheckpointManager(loop.checkpoint, str(output / RUN_DIR), max_to_keep=2)
    if manager.latest_checkpoint:
        loop.checkpoint.read(manager.latest_checkpoint).expect_partial()
        log(f"resumed from {manager.latest_checkpoint} at step {int(loop.step.numpy())}")
    run_log = RunLog(output / RUN_DIR)
    step = int(loop.step.numpy())
    for change in run_log.begin(step, settings.record(), dtype):
        log(f"{change['key']} changed at step {step}: {change['old']!r} -> {change['new']!r}")
    log(f"distill: {len(texts)} texts{labeled}, {total} steps of {settings.batch_size} at "
        f"learning rate {settings.learning_rate:g}, student {student.init_kind}, teacher "
        f"{teacher.kind}, {dtype}")  # fmt: skip
    data = (rows, targets, gold)
    preempted = _train(loop, manager, data, total, steps_per_epoch, output, run_log, progress)
    step = int(loop.step.numpy())
    if preempted:
        return DistillResult(output, step, preempted)
    record = write_result(settings, output, student, teacher, len(texts), log, run_log.summary())
    return DistillResult(output, step, None, record)


def _train(loop: _Loop, manager, data, total, steps_per_epoch, output, run_log: RunLog, progress):
    """Runs the steps left over `data` (token ids, teacher outputs, label indices), appending the
    logged means to `run/history.jsonl` and the steps reached at each checkpoint to `run_log`;
    returns the stop signal's name, None when the run reached `total`."""
    rows, targets, gold = data
    settings, tokenizer = loop.settings, loop.student.tokenizer
    writer = tf.summary.create_file_writer(str(output / LOGS_DIR))
    step = first = int(loop.step.numpy())
    bar = progress_bar(total=total, initial=step, unit="step", desc="distill", enabled=progress)
    sums: dict[str, float] = {}
    count = 0  # steps in `sums` (fewer than --log-every in a resumed run's first window)
    started = time.monotonic()
    with StopSignals() as signals:
        while step < total and signals.requested is None:
            batch = _batch(step, rows, targets, gold, settings, tokenizer, steps_per_epoch)
            out = loop.train_step(*[tf.constant(x) for x in batch])
            step += 1
            for key, value in out.items():
                sums[key] = sums.get(key, 0.0) + float(value)
            count += 1
            bar.update(1)
            if step % settings.log_every == 0 or step == total:
                means = {k: v / count for k, v in sums.items()}
                with writer.as_default(step=step):
                    for key, value in means.items():
                        tf.summary.scalar(f"train/{key}", value)
                bar.set_postfix(loss=f"{means['loss']:.4f}")
                entry = {"step": step, **means, "seconds": time.monotonic() - started}
                with open(output / RUN_DIR / HISTORY_FILE, "a", encoding="utf-8") as f:
                    f.write(json.dumps(entry) + "\n")
                sums, count = {}, 0
            if step % settings.save_every == 0:
                manager.save(checkpoint_number=step)
                run_log.reached(step, step - first)
        manager.save(checkpoint_number=step)
        run_log.reached(step, step - first, signals.requested or "finished")
    bar.close()
    writer.close()
    return signals.requested
