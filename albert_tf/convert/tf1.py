"""Original TF1 checkpoints -> our model: defined in `albert_tf.tf1` (training reads TF1
checkpoints, so the table stands below training), importable from here as before."""

from albert_tf.tf1 import (
    IGNORED,
    PREFIXES,
    convert_tf1_checkpoint,
    load_tf1_checkpoint,
    read_tf1_checkpoint,
    resolve_checkpoint_prefix,
    target_name,
)

__all__ = [
    "IGNORED",
    "PREFIXES",
    "convert_tf1_checkpoint",
    "load_tf1_checkpoint",
    "read_tf1_checkpoint",
    "resolve_checkpoint_prefix",
    "target_name",
]
