"""The pretraining record format, in one place: what the writers write and the reader parses.

A prepared directory holds `data-NNNNN-of-NNNNN.tfrecord` shards (`shard_name`) of
`tf.train.Example`s and `metadata.json` (`METADATA_FILE`, format `FORMAT`), which says among
other things whether the records are masked and which sentence task their labels belong to.

Masked records hold the original ALBERT's seven features (`MASKED_FEATURES`); unmasked ones
(`create-pretraining-data --no-mask`, for dynamic masking in the input pipeline) hold `input_ids`
before masking and `token_boundary` instead of the `masked_lm_*` features
(`UNMASKED_FEATURES`). The local writer, the Beam pipeline, the training reader and the
experiments import this module; TensorFlow is imported only by the parse functions, so the
writers never load it.
"""

from __future__ import annotations

from typing import Any

# The sentence task (create-pretraining-data --sentence-task, recorded in metadata.json): ALBERT's
# sentence order, BERT's next sentence, or none (one segment, MLM alone).
SENTENCE_TASKS = ("sop", "nsp", "none")

METADATA_FILE = "metadata.json"
FORMAT = "albert-tf-pretraining-data/1"

# Feature name -> (dtype, length kind), in the order the writers write them: "seq" features have
# max_seq_length values, "pred" ones max_predictions_per_seq, "one" a single value.
MASKED_FEATURES = {
    "input_ids": ("int64", "seq"),
    "input_mask": ("int64", "seq"),
    "segment_ids": ("int64", "seq"),
    "masked_lm_positions": ("int64", "pred"),
    "masked_lm_ids": ("int64", "pred"),
    "masked_lm_weights": ("float", "pred"),
    "next_sentence_labels": ("int64", "one"),
}
UNMASKED_FEATURES = {
    "input_ids": ("int64", "seq"),
    "input_mask": ("int64", "seq"),
    "segment_ids": ("int64", "seq"),
    "token_boundary": ("int64", "seq"),  # 1 where a piece begins a word (the original's feature)
    "next_sentence_labels": ("int64", "one"),
}


def shard_name(index: int, num_shards: int) -> str:
    """File name of shard `index` (0-based) of `num_shards`."""
    return f"data-{index:05d}-of-{num_shards:05d}.tfrecord"


def features(masked: bool = True) -> dict[str, tuple[str, str]]:
    """The features of masked or unmasked records: name -> (dtype, length kind), in order."""
    return MASKED_FEATURES if masked else UNMASKED_FEATURES


def feature_lengths(
    max_seq_length: int, max_predictions_per_seq: int, masked: bool = True
) -> dict[str, tuple[str, int]]:
    """The features of every record, in order: name -> (dtype, fixed length)."""
    length = {"seq": max_seq_length, "pred": max_predictions_per_seq, "one": 1}
    return {name: (dtype, length[kind]) for name, (dtype, kind) in features(masked).items()}


def feature_spec(
    max_seq_length: int, max_predictions_per_seq: int, masked: bool = True
) -> dict[str, Any]:
    """`tf.io.FixedLenFeature`s of the records, for `tf.io.parse_example`."""
    import tensorflow as tf

    dtypes = {"int64": tf.int64, "float": tf.float32}
    return {
        name: tf.io.FixedLenFeature([length], dtypes[dtype])
        for name, (dtype, length) in feature_lengths(
            max_seq_length, max_predictions_per_seq, masked
        ).items()
    }


def parse_examples(
    serialized: Any, max_seq_length: int, max_predictions_per_seq: int, masked: bool = True
) -> dict[str, Any]:
    """Parses a [B] string tensor of records: int64 features [B, length], float32
    `masked_lm_weights` [B, max_predictions_per_seq] (`feature_lengths` gives each length)."""
    import tensorflow as tf

    spec = feature_spec(max_seq_length, max_predictions_per_seq, masked)
    return tf.io.parse_example(serialized, spec)


def parse_unmasked(serialized: Any, max_seq_length: int) -> dict[str, Any]:
    """Parses one unmasked (`--no-mask`) record: int64 [S] features, `next_sentence_labels` [1]."""
    import tensorflow as tf

    return tf.io.parse_single_example(serialized, feature_spec(max_seq_length, 0, masked=False))
