"""Fine-tuning loop: AdamW or LAMB with warmup, evaluation each epoch, best checkpoint kept.

The output directory (written atomically) is a checkpoint directory of the brief with the task
head: `albert_config.json`, a TF2 checkpoint whose root has `encoder` and `task_head`, `spm.model`,
`finetune.json` (every setting of the run as `FinetuneSettings.record` writes it, with what the
task learned from the training file; per-epoch metrics, best epoch, what the features left
out), TensorBoard logs under `logs/`, a copy of the TF-Hub encoder under `hub_encoder/` when fine-tuned from one, and the
serving SavedModel under `serving/`.
"""

from __future__ import annotations

import functools
import math
import os
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import tensorflow as tf
import tf_keras as keras

from albert_tf.dtypes import keras_policy, resolve_dtype
from albert_tf.errors import ConfigError, DataError
from albert_tf.finetune import summary
from albert_tf.finetune.defaults import SIZED, size_defaults
from albert_tf.finetune.directory import FinetuneRecord, write_finetuned
from albert_tf.finetune.features import check_max_seq_length
from albert_tf.finetune.inference import batched_outputs
from albert_tf.finetune.models import TaskModel, build_head, reinit_pooler
from albert_tf.finetune.predict import FinetunedModel
from albert_tf.finetune.seeds import finetune_restarts, finetune_seeds
from albert_tf.finetune.serving import export_serving_model
from albert_tf.finetune.settings import FinetuneSettings
from albert_tf.finetune.sources import Source, load_source
from albert_tf.finetune.tasks import Task, TaskData, get_task
from albert_tf.io_utils import atomic_dir
from albert_tf.optimizer import build_optimizer
from albert_tf.preprocess.tokenizer import AlbertTokenizer
from albert_tf.progress import bar as progress_bar
from albert_tf.run_record import hardware


def _encoder_limits(source: Source) -> tuple[int | None, int | None]:
    """(vocab_size, max_position_embeddings) of the encoder, from its config or variables."""
    if source.config is not None:
        return source.config.vocab_size, source.config.max_position_embeddings
    vocab = positions = None
    for variable in source.encoder.variables:
        if "word_embeddings" in variable.name:
            vocab = int(variable.shape[0])
        elif "position_embedding" in variable.name:
            positions = int(variable.shape[0])
    return vocab, positions


def _hidden_size(source: Source) -> int | None:
    """The encoder's hidden size, from its config or its pooler's kernel [H, H]."""
    if source.config is not None:
        return source.config.hidden_size
    for variable in source.encoder.variables:
        if "pooler" in variable.name and len(variable.shape) == 2:
            return int(variable.shape[0])
    return None


def _shown(value: float | bool) -> str:
    return ("no", "yes")[value] if isinstance(value, bool) else f"{value:g}"


def _sized_defaults(settings: FinetuneSettings, source: Source) -> tuple[dict, str | None]:
    """The size-dependent settings left unset, filled in for `source`'s size, and the line
    that says so (None when every one was given)."""
    hidden = _hidden_size(source)
    row = size_defaults(hidden)
    filled = {name: getattr(row, name) for name in SIZED if getattr(settings, name) is None}
    if not filled:
        return filled, None
    shown = ", ".join(f"{name.replace('_', ' ')} {_shown(value)}" for name, value in filled.items())
    return filled, f"defaults for hidden size {hidden}, {row.name}: {shown}"


def make_tokenizer(source: Source, do_lower_case: bool) -> AlbertTokenizer:
    """The SentencePiece tokenizer of `source`; ConfigError if none is known or it does not fit."""
    if source.sp_model_path is None:
        raise ConfigError("no SentencePiece model came with --init; pass --sp-model FILE")
    tokenizer = AlbertTokenizer(source.sp_model_path, do_lower_case=do_lower_case)
    vocab, _ = _encoder_limits(source)
    if vocab is not None and tokenizer.vocab_size > vocab:
        raise ConfigError(
            f"SentencePiece model {source.sp_model_path} has {tokenizer.vocab_size} pieces but the "
            f"encoder's vocabulary has {vocab}"
        )
    return tokenizer


def _format_loss(loss: float | None) -> str:
    return "n/a (no steps)" if loss is None else f"{loss:.4f}"


def _load_data(
    settings: FinetuneSettings, task: Task, tokenizer: AlbertTokenizer, log: Callable[[str], None]
) -> tuple[TaskData, TaskData | None]:
    """The training data (read once; it completes the task settings) and the evaluation data."""
    train = task.load(settings.train, tokenizer, training=True, configure=True)
    for what, count in train.skipped.items():
        log(f"{settings.train}: {count} {what}")
    if task.name == "classify":
        for line in summary.rare_label_warnings([e.label for e in train.examples], settings.train):
            log(line)
    if settings.eval is None:
        return train, None
    evaluation = task.load(settings.eval, tokenizer, training=False)
    for what, count in evaluation.skipped.items():
        log(f"{settings.eval}: {count} {what}")
    return train, evaluation


class _Loop:
    """The model, optimizer, dataset and traced step of one run."""

    def __init__(self, model: TaskModel, train: TaskData, run: FinetuneSettings, dtype: str):
        self.model, self.task = model, model.task
        inputs, labels = self.task.training_rows(train)
        num_rows = len(next(iter(inputs.values())))
        self.steps_per_epoch = math.ceil(num_rows / run.batch_size)
        self.total_steps = self.steps_per_epoch * run.epochs
        if run.train_steps is not None:
            self.total_steps = min(self.total_steps, run.train_steps)
        warmup = int(run.warmup_proportion * self.total_steps)
        optimizer = build_optimizer(
            run.learning_rate,
            max(self.total_steps, 1),
            warmup,
            name=run.optimizer,
            weight_decay=run.weight_decay,
        )
        self.scaled = dtype == "float16"
        if self.scaled:
            optimizer = keras.mixed_precision.LossScaleOptimizer(optimizer)
        self.optimizer = optimizer
        self.dataset = (
            tf.data.Dataset.from_tensor_slices((inputs, labels))
            .shuffle(num_rows, seed=run.seed, reshuffle_each_iteration=True)
            .batch(run.batch_size)
            .map(self.task.trim_batch)
        )
        # One trace for every batch: lengths vary after trimming, so the signature leaves them open.
        self.step = tf.function(self._step, input_signature=list(self.dataset.element_spec))

    def _step(self, inputs, targets):
        with tf.GradientTape() as tape:
            loss = self.task.loss(self.model(inputs, training=True), targets)
            scaled = self.optimizer.get_scaled_loss(loss) if self.scaled else loss
        variables = self.model.trainable_variables
        gradients = tape.gradient(scaled, variables)
        if self.scaled:
            gradients = self.optimizer.get_unscaled_gradients(gradients)
        self.optimizer.apply_gradients(zip(gradients, variables, strict=True))
        return loss


def _evaluate(model: TaskModel, evaluation: TaskData, batch_size: int) -> dict[str, float]:
    outputs = batched_outputs(model, evaluation.inputs, batch_size)
    return model.task.evaluate(model.task.decode(outputs, evaluation), evaluation)


def _train(
    loop: _Loop,
    evaluation: TaskData | None,
    run: FinetuneSettings,
    checkpoint_dir: Path,
    log: Callable[[str], None],
    progress: bool = True,
) -> tuple[list[dict], float | None, int]:
    """Trains epoch by epoch, keeping the best epoch's checkpoint (the last without evaluation
    data); returns (history, best metric value, best epoch) with the best weights restored."""
    checkpoint = tf.train.Checkpoint(encoder=loop.model.encoder, task_head=loop.model.task_head)
    manager = tf.train.CheckpointManager(checkpoint, str(checkpoint_dir), max_to_keep=1)
    writer = tf.summary.create_file_writer(str(checkpoint_dir / "logs"))
    metric_name = loop.task.best_metric
    history, best, best_epoch, step = [], None, None, 0
    for epoch in range(1, run.epochs + 1):
        losses = []
        bar = progress_bar(
            loop.dataset,
            total=loop.steps_per_epoch,
            desc=f"epoch {epoch}/{run.epochs}",
            leave=False,
            enabled=progress,
        )
        for inputs, targets in bar:
            if step >= loop.total_steps:
                break
            loss = float(loop.step(inputs, targets))
            losses.append(loss)
            step += 1
            bar.set_postfix(loss=f"{loss:.4f}")
            with writer.as_default(step=step):
                tf.summary.scalar("train/loss", loss)
        train_loss = float(np.mean(losses)) if losses else None
        record = {"epoch": epoch, "steps": step, "train_loss": train_loss}
        line = f"epoch {epoch}: loss {_format_loss(train_loss)}"
        if evaluation is not None:
            scores = record["eval"] = _evaluate(loop.model, evaluation, run.eval_batch_size)
            with writer.as_default(step=step):
                for name, value in scores.items():
                    tf.summary.scalar(f"eval/{name}", value)
            line += "; eval " + ", ".join(f"{k} {v:.4f}" for k, v in scores.items())
            # the first epoch is always kept, so that a checkpoint exists
            if summary.improves(scores[metric_name], best, first=best_epoch is None):
                best, best_epoch = scores[metric_name], epoch
                manager.save(checkpoint_number=epoch)
        else:
            best_epoch = epoch
            manager.save(checkpoint_number=epoch)
        log(line)
        history.append(record)
        if step >= loop.total_steps:
            break
    writer.close()
    checkpoint.read(manager.latest_checkpoint).expect_partial()
    return history, best, best_epoch


def finetune(
    settings: FinetuneSettings, log: Callable[[str], None] = print, progress: bool = True
) -> FinetunedModel:
    """Fine-tunes `settings.init` on `settings.train`; writes `settings.output` and
    returns what `predict.load_finetuned` would read from it, with the best weights in memory.
    The learning rate, epochs and warmup left None come from the encoder's size
    (`finetune.defaults`). The last lines logged are `summary.summary_lines`; `progress`
    False hides the progress bars. `settings.seeds` > 1 runs `seeds.finetune_seeds`; otherwise,
    with --eval, a run that does not beat its floor starts again (`seeds.finetune_restarts`).

    Raises ConfigError/CheckpointError/DataError (one line each) for bad settings, sources and
    data, before any training starts.
    """
    for flag, path in (("--train", settings.train), ("--eval", settings.eval)):
        if path is not None and not os.path.exists(path):
            raise DataError(f"{flag} {path} does not exist")
    if settings.seeds > 1:
        return finetune_seeds(settings, _finetune_once, log, progress)
    if settings.restarts > 0 and settings.eval is not None and settings.train_steps != 0:
        return finetune_restarts(settings, _finetune_once, log, progress)
    return _finetune_once(settings, log, progress)


def _finetune_once(
    settings: FinetuneSettings,
    log: Callable[[str], None],
    progress: bool,
    closing: Callable[[str], None] | None = None,
    shown_output: str | None = None,
) -> FinetunedModel:
    """One run of `finetune` (one seed). Its closing lines ("wrote ..." and the summary) go to
    `closing` (default: `log`) and name `shown_output` (default: `settings.output`)."""
    started = time.monotonic()
    task = get_task(settings)
    dtype = resolve_dtype(settings.dtype)
    keras.utils.set_random_seed(settings.seed)
    with (
        atomic_dir(settings.output, overwrite=settings.overwrite) as tmp,
        keras_policy(dtype),
    ):
        source = load_source(settings.init, config=settings.config, sp_model=settings.sp_model)
        sized, note = _sized_defaults(settings, source)
        settings = settings.replace(**sized)
        task.settings = task.settings.replace(**sized)
        tokenizer = make_tokenizer(source, settings.do_lower_case)
        _, positions = _encoder_limits(source)
        if positions is not None:
            check_max_seq_length(task.settings.max_seq_length, positions)
        train, evaluation = _load_data(settings, task, tokenizer, log)

        initializer_range = source.config.initializer_range if source.config else 0.02
        model = TaskModel(source.encoder, build_head(task, initializer_range), task)
        model({k: v[:1] for k, v in train.inputs.items()}, training=False)
        if settings.reinit_pooler:
            reinit_pooler(source.encoder, initializer_range)
        if note:
            log(note)
        history, best, best_epoch = _train(
            _Loop(model, train, settings, dtype), evaluation, settings, tmp, log, progress
        )
        best_scores = next((r.get("eval") for r in history if r["epoch"] == best_epoch), None)
        task.after_training(best_scores)
        baseline = summary.floor(task, train.examples, evaluation)
        bow = summary.bag_of_words(task, train.examples, evaluation)
        record = _record(task, settings, source, dtype, (history, best, best_epoch), baseline)
        record.bag_of_words = None if bow is None else {"what": bow.what, "value": bow.value}
        record.skipped = {"train": train.skipped, "eval": evaluation.skipped if evaluation else {}}
        _write_directory(tmp, source, tokenizer, record, model if settings.export_serving else None)
    counts = None
    if task.name == "classify":
        counts = summary.label_counts([e.label for e in train.examples])
    lines = _closing_lines(settings, record, (baseline, bow), counts, shown_output, started)
    for line in lines:
        (closing or log)(line)
    return FinetunedModel(model, tokenizer, task, record)


def _record(
    task: Task,
    settings: FinetuneSettings,
    source: Source,
    dtype: str,
    trained: tuple[list[dict], float | None, int | None],
    baseline: summary.Floor | None,
) -> FinetuneRecord:
    """The run's finetune.json record: the task and its settings, the encoder's kind, the dtype,
    the steps taken and the hardware, the best epoch (`trained`: history, best value, best
    epoch) beside the floor."""
    history, best, best_epoch = trained
    evaluated = settings.eval is not None
    return FinetuneRecord(
        settings=task.settings,
        encoder=source.kind,
        dtype=dtype,
        steps=history[-1]["steps"] if history else 0,
        hardware=hardware(),
        best_metric=task.best_metric if evaluated else None,
        best_value=best,
        best_epoch=best_epoch,
        floor=None if baseline is None else {"what": baseline.what, "value": baseline.value},
        learned=summary.beats(best, baseline) if evaluated else None,
        history=history,
    )


def _write_directory(
    tmp: Path,
    source: Source,
    tokenizer: AlbertTokenizer,
    record: FinetuneRecord,
    serving_model: TaskModel | None,
) -> None:
    """Beside the checkpoint in `tmp` (`write_finetuned`): the config, the tokenizer, the TF-Hub
    encoder it was fine-tuned from, finetune.json and, with `serving_model`, the serving
    SavedModel."""
    serving = None
    if serving_model is not None:
        serving = functools.partial(export_serving_model, serving_model, tokenizer)
    write_finetuned(
        tmp,
        record,
        tokenizer.sp_model_path,
        config=source.config,
        hub_encoder=source.hub_path,
        serving=serving,
    )


def _closing_lines(
    settings: FinetuneSettings,
    record: FinetuneRecord,
    floors: tuple[summary.Floor | None, summary.Floor | None],
    counts: dict[str, int] | None,
    shown_output: str | None,
    started: float,
) -> list[str]:
    """ "wrote DIR (best epoch ...)" and the summary (`summary.summary_lines`); `floors`: the
    majority-class (or mean) floor and the bag-of-words one."""
    baseline, bow = floors
    shown_output = shown_output or settings.output
    best, best_epoch = record.best_value, record.best_epoch
    best_text = f", {record.best_metric} {best:.4f}" if best is not None else ""
    lines = [f"wrote {shown_output} (best epoch {best_epoch}{best_text})"]
    return lines + summary.summary_lines(
        metric=record.best_metric,
        best=best,
        best_epoch=best_epoch,
        epochs=settings.epochs,
        baseline=baseline,
        counts=counts,
        train_path=settings.train,
        seconds=time.monotonic() - started,
        logs=os.path.join(shown_output, "logs"),
        learning_rate=settings.learning_rate,
        dtype=record.dtype,
        bow=bow,
    )
