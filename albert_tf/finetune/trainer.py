"""Fine-tuning loop: AdamW or LAMB with warmup, evaluation each epoch, best checkpoint kept.

The output directory (written atomically) is a checkpoint directory of the brief with the task
head: `albert_config.json`, a TF2 checkpoint whose root has `encoder` and `task_head`, `spm.model`,
`finetune.json` (task settings, labels, per-epoch metrics, best epoch), TensorBoard logs under
`logs/`, a copy of the TF-Hub encoder under `hub_encoder/` when fine-tuned from one, and the
serving SavedModel under `serving/`.
"""

from __future__ import annotations

import dataclasses
import json
import math
import shutil
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import tensorflow as tf
import tf_keras as keras
from tqdm import tqdm

from albert_tf.dtypes import keras_policy, resolve_dtype
from albert_tf.errors import ConfigError, DataError
from albert_tf.finetune import tasks
from albert_tf.finetune.features import check_max_seq_length
from albert_tf.finetune.models import TaskHead, TaskModel, num_head_outputs, task_loss
from albert_tf.finetune.optimization import build_optimizer
from albert_tf.finetune.predict import HUB_ENCODER_DIR, METADATA_FILE
from albert_tf.finetune.sources import Source, load_source
from albert_tf.io_utils import atomic_dir
from albert_tf.layers.fused import fused_cpu_inference
from preprocess.tokenizer import AlbertTokenizer

SERVING_DIR = "serving"


@dataclass
class FinetuneResult:
    """What `finetune` wrote (its metadata) and the in-memory model with the best weights."""

    metadata: dict
    model: TaskModel
    tokenizer: AlbertTokenizer
    settings: tasks.TaskSettings


@dataclass
class TrainSettings:
    """Optimization settings of one fine-tuning run."""

    epochs: int = 3
    batch_size: int = 32
    eval_batch_size: int = 64
    learning_rate: float = 2e-5
    warmup_proportion: float = 0.1
    optimizer: str = "adamw"
    weight_decay: float = 0.01
    seed: int = 12345
    dtype: str = "auto"
    max_steps: int | None = None  # stop early (tests, smoke runs)


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


def batched_outputs(
    model: TaskModel, inputs: dict[str, np.ndarray], batch_size: int
) -> dict[str, np.ndarray]:
    """Runs `model` (inference mode) over `inputs` in batches; concatenated numpy outputs.

    The last batch is padded to `batch_size` so one traced function serves every batch. The
    function is traced with oneDNN's fused CPU kernels where they are available.
    """
    call = getattr(model, "_inference_function", None)
    if call is None:
        call = model._inference_function = tf.function(lambda x: model(x, training=False))
    pieces: dict[str, list[np.ndarray]] = {}
    count = len(next(iter(inputs.values())))
    with fused_cpu_inference():
        for begin in range(0, count, batch_size):
            batch = {k: v[begin : begin + batch_size] for k, v in inputs.items()}
            size = len(batch["input_word_ids"])
            if size < batch_size and count > batch_size:
                pad = [(0, batch_size - size)] + [(0, 0)] * (batch["input_word_ids"].ndim - 1)
                batch = {k: np.pad(v, pad) for k, v in batch.items()}
            for name, value in call(batch).items():
                pieces.setdefault(name, []).append(value.numpy()[:size])
    return {name: np.concatenate(values) for name, values in pieces.items()}


def _trim_to_longest(task: str, inputs: dict, targets):
    """Cuts a batch's padding to its longest sequence (training cost follows real lengths)."""
    length = tf.reduce_max(tf.reduce_sum(inputs["input_mask"], axis=-1))
    inputs = {k: v[..., :length] for k, v in inputs.items()}  # [B, L] or [B, C, L]
    if task == "tag":
        targets = targets[:, :length]  # [B, L]
    return inputs, targets


def _is_better(value: float, best: float | None) -> bool:
    return best is None or (not math.isnan(value) and value > best)


def finetune(
    train_path: str,
    output_dir: str,
    init: str,
    task_settings: tasks.TaskSettings,
    train_settings: TrainSettings,
    eval_path: str | None = None,
    config: str | None = None,
    sp_model: str | None = None,
    do_lower_case: bool = True,
    overwrite: bool = False,
    export_serving: bool = True,
    log: Callable[[str], None] = print,
) -> FinetuneResult:
    """Fine-tunes `init` on `train_path`; writes `output_dir`; returns the result.

    Raises ConfigError/CheckpointError/DataError (one line each) for bad settings, sources and
    data, before any training starts.
    """
    settings, run = task_settings, train_settings
    if run.epochs < 1 or run.batch_size < 1:
        raise ConfigError("--epochs and --batch-size must be positive")
    if not 0.0 <= run.warmup_proportion <= 1.0:
        raise ConfigError(f"--warmup-proportion must be in [0, 1], got {run.warmup_proportion}")
    dtype = resolve_dtype(run.dtype)
    keras.utils.set_random_seed(run.seed)
    with atomic_dir(output_dir, overwrite=overwrite) as tmp, keras_policy(dtype):
        source = load_source(init, config=config, sp_model=sp_model)
        tokenizer = make_tokenizer(source, do_lower_case)
        _, positions = _encoder_limits(source)
        if positions is not None:
            check_max_seq_length(settings.max_seq_length, positions)
        train_examples, _ = tasks.read_examples(
            train_path, settings, training=True, require_labels=True
        )
        if not train_examples:
            raise DataError(f"training file {train_path} holds no examples")
        tasks.infer_labels(settings, train_examples, train_path)
        train = tasks.load_task_data(train_path, settings, tokenizer, training=True)
        for what, count in train.skipped.items():
            log(f"{train_path}: {count} {what}")
        evaluation = None
        if eval_path is not None:
            evaluation = tasks.load_task_data(eval_path, settings, tokenizer, training=False)
            for what, count in evaluation.skipped.items():
                log(f"{eval_path}: {count} {what}")

        labels = tasks.num_labels(settings)
        head = TaskHead(
            settings.task,
            num_head_outputs(settings.task, labels),
            initializer_range=source.config.initializer_range if source.config else 0.02,
        )
        model = TaskModel(source.encoder, head)
        model({k: v[:1] for k, v in train.inputs.items()}, training=False)

        num_rows = len(next(iter(train.inputs.values())))
        steps_per_epoch = math.ceil(num_rows / run.batch_size)
        total_steps = steps_per_epoch * run.epochs
        if run.max_steps is not None:
            total_steps = min(total_steps, run.max_steps)
        warmup = int(run.warmup_proportion * total_steps)
        optimizer = build_optimizer(
            run.optimizer, run.learning_rate, total_steps, warmup, run.weight_decay
        )
        if dtype == "float16":
            optimizer = keras.mixed_precision.LossScaleOptimizer(optimizer)

        dataset = (
            tf.data.Dataset.from_tensor_slices((train.inputs, train.labels))
            .shuffle(num_rows, seed=run.seed, reshuffle_each_iteration=True)
            .batch(run.batch_size)
            .map(lambda x, y: _trim_to_longest(settings.task, x, y))
        )

        # One trace for every batch: lengths vary after trimming, so the signature leaves them open.
        @tf.function(input_signature=list(dataset.element_spec))
        def train_step(inputs, targets):
            with tf.GradientTape() as tape:
                loss = task_loss(settings.task, model(inputs, training=True), targets)
                scaled = optimizer.get_scaled_loss(loss) if dtype == "float16" else loss
            variables = model.trainable_variables
            gradients = tape.gradient(scaled, variables)
            if dtype == "float16":
                gradients = optimizer.get_unscaled_gradients(gradients)
            optimizer.apply_gradients(zip(gradients, variables, strict=True))
            return loss

        checkpoint = tf.train.Checkpoint(encoder=model.encoder, task_head=model.task_head)
        manager = tf.train.CheckpointManager(checkpoint, str(tmp), max_to_keep=1)
        writer = tf.summary.create_file_writer(str(tmp / "logs"))
        metric_name = tasks.BEST_METRIC[settings.task]
        history, best, best_epoch, step = [], None, None, 0
        for epoch in range(1, run.epochs + 1):
            losses = []
            progress = tqdm(
                dataset, total=steps_per_epoch, desc=f"epoch {epoch}/{run.epochs}", leave=False
            )
            for inputs, targets in progress:
                if step >= total_steps:
                    break
                loss = float(train_step(inputs, targets))
                losses.append(loss)
                step += 1
                progress.set_postfix(loss=f"{loss:.4f}")
                with writer.as_default(step=step):
                    tf.summary.scalar("train/loss", loss)
            record = {
                "epoch": epoch,
                "steps": step,
                "train_loss": float(np.mean(losses)) if losses else None,
            }
            if evaluation is not None:
                outputs = batched_outputs(model, evaluation.inputs, run.eval_batch_size)
                scores = tasks.evaluate(
                    tasks.decode(outputs, evaluation, settings), evaluation, settings
                )
                record["eval"] = scores
                with writer.as_default(step=step):
                    for name, value in scores.items():
                        tf.summary.scalar(f"eval/{name}", value)
                value = scores[metric_name]
                summary = ", ".join(f"{k} {v:.4f}" for k, v in scores.items())
                log(f"epoch {epoch}: loss {record['train_loss']:.4f}; eval {summary}")
                if _is_better(value, best):
                    best, best_epoch = value, epoch
                    manager.save(checkpoint_number=epoch)
            else:
                log(f"epoch {epoch}: loss {record['train_loss']:.4f}")
                best_epoch = epoch
                manager.save(checkpoint_number=epoch)
            history.append(record)
            if step >= total_steps:
                break
        writer.close()
        checkpoint.read(manager.latest_checkpoint).expect_partial()

        if source.config is not None:
            source.config.to_json_file(tmp / "albert_config.json")
        shutil.copyfile(tokenizer.sp_model_path, tmp / "spm.model")
        if source.hub_path is not None:
            shutil.copytree(source.hub_path, tmp / HUB_ENCODER_DIR)
        metadata = {
            "task": settings.task,
            "labels": settings.labels,
            "max_seq_length": settings.max_seq_length,
            "do_lower_case": do_lower_case,
            "encoder": source.kind,
            "dtype": dtype,
            "settings": dataclasses.asdict(settings),
            "train": dataclasses.asdict(run),
            "best_metric": metric_name if evaluation is not None else None,
            "best_value": best,
            "best_epoch": best_epoch,
            "history": history,
            "skipped": {"train": train.skipped, "eval": evaluation.skipped if evaluation else {}},
        }
        (tmp / METADATA_FILE).write_text(json.dumps(metadata, indent=2) + "\n", encoding="utf-8")
        if export_serving:
            from albert_tf.finetune.serving import export_serving_model

            export_serving_model(model, tokenizer, settings, tmp / SERVING_DIR)
    log(
        f"wrote {output_dir} (best epoch {best_epoch}"
        + (f", {metric_name} {best:.4f})" if best is not None else ")")
    )
    return FinetuneResult(metadata, model, tokenizer, settings)
