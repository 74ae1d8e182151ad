"""Pretraining data for ALBERT: n-gram masked-LM + sentence-order-prediction TFRecords.

`create_pretraining_data` is the entry point (see `pipeline`); `documents` reads and splits the
corpus, `instances` pairs segments, `masking` draws n-gram masks, `records` encodes
`tf.train.Example`s, `format` declares the record format, and `dynamic_masking` re-draws masks in a `tf.data` pipeline.
"""

from albert_tf.preprocess.pretraining_data.format import METADATA_FILE
from albert_tf.preprocess.pretraining_data.pipeline import create_pretraining_data

__all__ = ["METADATA_FILE", "create_pretraining_data"]
