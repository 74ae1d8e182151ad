"""Input pipeline for pretraining: the original ALBERT TFRecord features as model batches.

Shards hold `tf.train.Example`s in the format of `albert_tf.preprocess.pretraining_data.format` (int64
features except the float `masked_lm_weights`). `inspect_data` validates them against the model
config (and the `metadata.json` written beside them by create-pretraining-data) before anything
else happens, so a wrong file fails with one DataError instead of deep inside a tf.data op.
Shards written unmasked (`create-pretraining-data --no-mask`, metadata "masked": false) are
masked in the pipeline by `albert_tf.preprocess.pretraining_data.dynamic_masking`, with new masks every
epoch (RoBERTa-style).
The metadata's "sentence_task" says what `next_sentence_labels` hold: SOP labels ("sop", and
data without the key), BERT's NSP labels ("nsp"), or nothing ("none", single-segment data).

The training stream is deterministic for a given seed: files in sorted order through a seeded
shuffle buffer, reshuffled each epoch, repeated forever (with a buffer at least as large as
the data, every epoch is a permutation of all records). Resuming after `n` steps skips the first
`n * global_batch_size` examples, so a resumed run sees exactly the batches the uninterrupted
run would have seen.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import tensorflow as tf

from albert_tf.checkpoint import tf_error_reason
from albert_tf.config import AlbertConfig
from albert_tf.errors import DataError
from albert_tf.io_utils import gfile_errors, join, parent
from albert_tf.preprocess.pretraining_data.dynamic_masking import dynamically_masked
from albert_tf.preprocess.pretraining_data.format import (
    METADATA_FILE,
    SENTENCE_TASKS,
    features,
    parse_examples,
    parse_unmasked,
)

# Keys of a batch as the trainer sees it: the model's inputs plus the labels.
MODEL_INPUTS = ("input_word_ids", "input_mask", "input_type_ids", "masked_lm_positions")
LABELS = ("masked_lm_ids", "masked_lm_weights", "sentence_order_label", "example_weight")


@dataclasses.dataclass(frozen=True)
class DataSpec:
    """Validated pretraining shards: sorted file list and the per-example shapes."""

    files: tuple[str, ...]
    max_seq_length: int
    max_predictions_per_seq: int
    num_instances: int | None = None  # from the metadata JSON, when there is one
    # For unmasked shards: keyword arguments of dynamic_masking.dynamic_mask (masks are drawn
    # in the pipeline, new ones every epoch); None for masked shards.
    dynamic_masking: dict | None = None
    sentence_task: str = "sop"  # what next_sentence_labels hold (see SENTENCE_TASKS)


def list_files(patterns: str | list[str]) -> list[str]:
    """Sorted, de-duplicated files matching comma-separated globs; DataError if none match.

    Globs may be local or tf.io.gfile URLs (gs://bucket/data/*.tfrecord); a directory means
    its *.tfrecord files.
    """
    if isinstance(patterns, str):
        patterns = [p for p in patterns.split(",") if p.strip()]
    files: set[str] = set()
    for pattern in patterns:
        pattern = pattern.strip()
        with gfile_errors(DataError, f"cannot list {pattern}"):
            if tf.io.gfile.isdir(pattern):
                pattern = join(pattern, "*.tfrecord")
            files.update(f for f in tf.io.gfile.glob(pattern) if not tf.io.gfile.isdir(f))
    if not files:
        raise DataError(f"no files match {','.join(patterns)!r}")
    return sorted(files)


def _first_example(path: str) -> tf.train.Example:
    try:
        for record in tf.data.TFRecordDataset(path).take(1):
            return tf.train.Example.FromString(record.numpy())
    except (tf.errors.OpError, ValueError) as e:
        raise DataError(f"{path} is not a readable TFRecord file: {tf_error_reason(e)}") from None
    raise DataError(f"{path} holds no records")


def find_corrupt_shard(files: tuple[str, ...] | list[str]) -> tuple[str, str] | None:
    """(file, TF's reason) for the first of `files` holding a record whose length or checksum
    is wrong, or None. Reads every record: for naming the file after a read failed."""
    for path in files:
        try:
            for _ in tf.data.TFRecordDataset(path).batch(1024):
                pass
        except tf.errors.DataLossError as e:
            return path, tf_error_reason(e)
    return None


def _example_shapes(path: str, masked: bool = True) -> tuple[int, int]:
    """(max_seq_length, max_predictions_per_seq or 0 for unmasked records) of a shard."""
    found = _first_example(path).features.feature
    expected = features(masked)
    missing = [name for name in expected if name not in found]
    if missing:
        kind = "pretraining data" if masked else "unmasked (--no-mask) pretraining data"
        raise DataError(
            f"{path} is not {kind}: missing feature(s) {', '.join(missing)} "
            "(write it with `albert-tf create-pretraining-data`)"
        )
    lengths: dict[str, dict[str, int]] = {}
    for name, (dtype, kind) in expected.items():
        feature = found[name]
        values = feature.float_list.value if dtype == "float" else feature.int64_list.value
        lengths.setdefault(kind, {})[name] = len(values)
    for kind, by_name in lengths.items():
        if len(set(by_name.values())) != 1 or (kind == "one" and set(by_name.values()) != {1}):
            raise DataError(f"{path}: features have inconsistent lengths {by_name}")
    return next(iter(lengths["seq"].values())), next(iter(lengths.get("pred", {}).values()), 0)


def find_metadata(files: list[str]) -> dict | None:
    """The `metadata.json` beside the shards (the first directory of theirs that has one), or
    None. DataError if that file is not a JSON object."""
    for directory in sorted({parent(f) for f in files}):
        candidate = join(directory, METADATA_FILE)
        if not tf.io.gfile.exists(candidate):
            continue
        try:
            values = json.loads(tf.io.gfile.GFile(candidate).read())
        except (ValueError, tf.errors.OpError) as e:
            raise DataError(f"{candidate} is not readable JSON: {e}") from None
        if not isinstance(values, dict):
            raise DataError(f"{candidate} is not a JSON object")
        return values
    return None


def inspect_data(patterns: str | list[str], config: AlbertConfig) -> DataSpec:
    """Validates pretraining shards against `config`; returns their DataSpec.

    Checks: some file matches; every file's first record has all features with consistent
    lengths; all files agree; the metadata JSON (if any) agrees with the records and with
    `config.vocab_size` and names a known sentence task (none named: "sop");
    max_seq_length <= config.max_position_embeddings.
    """
    files = list_files(patterns)
    metadata = find_metadata(files) or {}
    masked = metadata.get("masked", True) is not False
    shapes = {f: _example_shapes(f, masked) for f in files}
    distinct = sorted(set(shapes.values()))
    if len(distinct) != 1:
        raise DataError(
            "shards disagree on (max_seq_length, max_predictions_per_seq): "
            + ", ".join(f"{Path(f).name}={s}" for f, s in list(shapes.items())[:4])
        )
    seq_length, predictions = distinct[0]
    dynamic_masking = None
    if not masked:
        predictions = int(metadata.get("max_predictions_per_seq", 20))
        dynamic_masking = _dynamic_masking_args(metadata, config, predictions)
    for key, value in (("max_seq_length", seq_length), ("max_predictions_per_seq", predictions)):
        if key in metadata and int(metadata[key]) != value:
            raise DataError(
                f"metadata says {key}={metadata[key]} but the records have {value} ({files[0]})"
            )
    if "vocab_size" in metadata and int(metadata["vocab_size"]) != config.vocab_size:
        raise DataError(
            f"the data was tokenized with a vocabulary of {metadata['vocab_size']} but the "
            f"config has vocab_size {config.vocab_size}"
        )
    if seq_length > config.max_position_embeddings:
        raise DataError(
            f"the data has max_seq_length {seq_length} but the config has only "
            f"{config.max_position_embeddings} position embeddings"
        )
    sentence_task = metadata.get("sentence_task", "sop")
    if sentence_task not in SENTENCE_TASKS:
        raise DataError(
            f"the data's metadata has sentence_task {sentence_task!r}; expected one of "
            + ", ".join(SENTENCE_TASKS)
        )
    num_instances = metadata.get("num_instances")
    return DataSpec(
        files=tuple(files),
        max_seq_length=seq_length,
        max_predictions_per_seq=predictions,
        num_instances=int(num_instances) if num_instances is not None else None,
        dynamic_masking=dynamic_masking,
        sentence_task=sentence_task,
    )


def _dynamic_masking_args(metadata: dict, config: AlbertConfig, predictions: int) -> dict:
    special = metadata.get("special_ids") or {}
    missing = [k for k in ("mask", "cls", "sep") if k not in special]
    if missing:
        raise DataError(f"unmasked data's metadata lacks special_ids {', '.join(missing)}")
    settings = metadata.get("settings") or {}
    return {
        "vocab_size": config.vocab_size,
        "mask_id": int(special["mask"]),
        "cls_id": int(special["cls"]),
        "sep_id": int(special["sep"]),
        "max_predictions_per_seq": predictions,
        "masked_lm_prob": float(settings.get("masked_lm_prob", 0.15)),
        "ngram": int(settings.get("ngram", 3)),
    }


def parse_batch(serialized: tf.Tensor, spec: DataSpec) -> dict[str, tf.Tensor]:
    """Parses a [B] string tensor of Examples into a model batch.

    Returns int32 [B, S] input_word_ids, input_mask, input_type_ids; int32 [B, P]
    masked_lm_positions, masked_lm_ids; float32 [B, P] masked_lm_weights; int32 [B]
    sentence_order_label; float32 [B] example_weight (all ones; zero marks eval padding).
    """
    parsed = parse_examples(serialized, spec.max_seq_length, spec.max_predictions_per_seq)
    return to_model_batch(parsed)


def to_model_batch(parsed: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
    """The masked record features of a batch (int64/float32, `format.MASKED_FEATURES`) as a
    model batch."""
    ints = {k: tf.cast(v, tf.int32) for k, v in parsed.items() if v.dtype == tf.int64}
    return {
        "input_word_ids": ints["input_ids"],
        "input_mask": ints["input_mask"],
        "input_type_ids": ints["segment_ids"],
        "masked_lm_positions": ints["masked_lm_positions"],
        "masked_lm_ids": ints["masked_lm_ids"],
        "masked_lm_weights": parsed["masked_lm_weights"],
        "sentence_order_label": tf.squeeze(ints["next_sentence_labels"], axis=1),  # [B]
        "example_weight": tf.ones_like(parsed["masked_lm_weights"][:, 0]),
    }


def _masked_examples(records: tf.data.Dataset, spec: DataSpec, seed: int) -> tf.data.Dataset:
    """Unmasked records -> examples with the seven masked features (fresh masks per element)."""
    parsed = records.map(lambda r: parse_unmasked(r, spec.max_seq_length))
    return dynamically_masked(parsed, seed=seed, **spec.dynamic_masking)


def _records(spec: DataSpec) -> tf.data.Dataset:
    return tf.data.TFRecordDataset(list(spec.files), num_parallel_reads=None)


def _shard_global_batches(
    dataset: tf.data.Dataset, replicas_per_pipeline: int, num_pipelines: int, pipeline_id: int
) -> tf.data.Dataset:
    """Keeps this input pipeline's per-replica batches of every global batch.

    `dataset` yields per-replica batches; consecutive groups of
    `num_pipelines * replicas_per_pipeline` of them form one global batch. Pipeline i keeps
    members [i * R, (i + 1) * R) of each group, in order, so the replicas of all workers together
    see exactly the global batch a single device would.
    """
    group = num_pipelines * replicas_per_pipeline
    if group == 1:
        return dataset
    start = pipeline_id * replicas_per_pipeline
    return (
        dataset.batch(group, drop_remainder=True)
        .map(
            lambda batch: tf.nest.map_structure(
                lambda t: t[start : start + replicas_per_pipeline], batch
            )
        )
        .unbatch()
    )


def train_dataset(
    spec: DataSpec,
    global_batch_size: int,
    seed: int,
    skip_steps: int = 0,
    num_replicas: int = 1,
    num_pipelines: int = 1,
    pipeline_id: int = 0,
    shuffle_buffer: int = 10_000,
) -> tf.data.Dataset:
    """An endless stream of per-replica training batches (see parse_batch for the keys).

    Deterministic for a given `seed`; `skip_steps` global batches are skipped (resume). The
    global batch is split into `num_replicas` per-replica batches (settings.check_batch_split
    checks that it divides), of which this pipeline (one of `num_pipelines`, holding
    num_replicas / num_pipelines replicas) yields its share.
    """
    per_replica = global_batch_size // num_replicas
    records = (
        _records(spec).shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True).repeat()
    )
    if spec.dynamic_masking is None:
        examples, to_batch = records, lambda s: parse_batch(s, spec)
    else:
        examples, to_batch = _masked_examples(records, spec, seed), to_model_batch
    batches = examples.skip(skip_steps * global_batch_size).batch(per_replica, drop_remainder=True)
    batches = _shard_global_batches(
        batches, num_replicas // num_pipelines, num_pipelines, pipeline_id
    )
    return batches.map(to_batch).prefetch(tf.data.AUTOTUNE)


def eval_dataset(
    spec: DataSpec,
    global_batch_size: int,
    num_replicas: int = 1,
    num_pipelines: int = 1,
    pipeline_id: int = 0,
    max_examples: int | None = None,
) -> tf.data.Dataset:
    """One pass over the eval shards in file order, as per-replica batches (the global batch
    over `num_replicas`: settings.check_batch_split checks that it divides).

    The last global batch is filled with padding examples (example_weight 0, masked_lm_weights
    0), so every replica gets a full, static-shape batch and metrics stay exact.
    """
    per_replica = global_batch_size // num_replicas
    records = _records(spec)
    if max_examples is not None:
        records = records.take(max_examples)
    if spec.dynamic_masking is None:
        parsed = records.batch(1024).map(lambda s: parse_batch(s, spec)).unbatch()
    else:  # the same masks at every evaluation: a fixed seed, restarted with each pass
        parsed = _masked_examples(records, spec, seed=0).batch(1024).map(to_model_batch).unbatch()
    padding = parsed.take(1).map(lambda ex: tf.nest.map_structure(tf.zeros_like, ex)).repeat()
    filled = parsed.concatenate(padding.take(global_batch_size - 1))
    batches = filled.batch(global_batch_size, drop_remainder=True)
    batches = batches.unbatch().batch(per_replica, drop_remainder=True)
    batches = _shard_global_batches(
        batches, num_replicas // num_pipelines, num_pipelines, pipeline_id
    )
    return batches.prefetch(tf.data.AUTOTUNE)


def synthetic_dataset(
    vocab_size: int,
    max_seq_length: int,
    max_predictions_per_seq: int,
    global_batch_size: int,
    seed: int = 0,
    num_replicas: int = 1,
    num_pipelines: int = 1,
    pipeline_id: int = 0,
) -> tf.data.Dataset:
    """An endless stream of random per-replica model batches (the keys of parse_batch).

    For checks and benchmarks that need no shards: full-length inputs, every prediction slot
    weighted, random sentence-order labels; the same seed gives the same batches.
    """
    per_replica = global_batch_size // num_replicas
    shape, predictions = [per_replica, max_seq_length], [per_replica, max_predictions_per_seq]

    def batch(index: tf.Tensor) -> dict[str, tf.Tensor]:
        seeds = tf.random.experimental.stateless_split(
            tf.stack([tf.cast(index, tf.int64), tf.constant(seed, tf.int64)]), 4
        )
        ids = tf.random.stateless_uniform(shape, seeds[0], 5, vocab_size, tf.int32)
        positions = tf.random.stateless_uniform(predictions, seeds[1], 1, max_seq_length, tf.int32)
        return {
            "input_word_ids": ids,
            "input_mask": tf.ones(shape, tf.int32),
            "input_type_ids": tf.concat(
                [
                    tf.zeros([per_replica, max_seq_length // 2], tf.int32),
                    tf.ones([per_replica, max_seq_length - max_seq_length // 2], tf.int32),
                ],
                axis=1,
            ),
            "masked_lm_positions": positions,
            "masked_lm_ids": tf.random.stateless_uniform(
                predictions, seeds[2], 5, vocab_size, tf.int32
            ),
            "masked_lm_weights": tf.ones(predictions, tf.float32),
            "sentence_order_label": tf.random.stateless_uniform(
                [per_replica], seeds[3], 0, 2, tf.int32
            ),
            "example_weight": tf.ones([per_replica], tf.float32),
        }

    replicas_here = num_replicas // num_pipelines
    first = pipeline_id * replicas_here
    # Replica r's batch of step i is batch i * num_replicas + r of one global stream.
    indices = tf.data.Dataset.range(2**62).flat_map(
        lambda step: tf.data.Dataset.range(first, first + replicas_here).map(
            lambda replica: step * num_replicas + replica
        )
    )
    return indices.map(batch).prefetch(tf.data.AUTOTUNE)
