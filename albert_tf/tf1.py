"""Original google-research/albert TF1 checkpoints -> our model: the TF1 format's home.

It sits beside our checkpoint code rather than in `albert_tf.convert` because fine-tuning and
pretraining start from TF1 checkpoints (`--init`), and training stands below the other formats'
converters (`albert_tf.convert` re-exports it). Our variables carry the original scopes, so the mapping is a prefix table: `bert/embeddings/*`
-> `encoder/embeddings/*`, `bert/encoder/*` -> `encoder/*`, `bert/pooler/*` ->
`encoder/pooler/*`, `cls/*` unchanged. Every checkpoint variable is used or matched by
`IGNORED` (step counter, optimizer slots); every model variable must be filled.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import tensorflow as tf

from albert_tf.checkpoint import CheckpointDir, read_checkpoint_tensors
from albert_tf.config import AlbertConfig
from albert_tf.errors import CheckpointError
from albert_tf.weights import assign_checked, build_model, variables_by_name

PREFIXES = (
    ("bert/embeddings/", "encoder/embeddings/"),
    ("bert/encoder/", "encoder/"),
    ("bert/pooler/", "encoder/pooler/"),
    ("cls/predictions/", "cls/predictions/"),
    ("cls/seq_relationship/", "cls/seq_relationship/"),
)
# The step counter and optimizer state (Adam/LAMB slots `*/adam_m`, `*/adam_v`, `*/lamb_m`, ...).
IGNORED = re.compile(r"^global_step$|^beta[12]_power$|/(adam|lamb)_[mv]$|/Momentum$")


def target_name(name: str) -> str | None:
    """Our variable name for TF1 variable `name`; None if it belongs nowhere in the model."""
    for source, target in PREFIXES:
        if name.startswith(source):
            return target + name[len(source) :]
    return None


def resolve_checkpoint_prefix(path: str | os.PathLike) -> str:
    """A checkpoint prefix from a prefix (`model.ckpt`) or a directory with a `checkpoint` file."""
    path = str(path)
    if os.path.isdir(path):
        prefix = tf.train.latest_checkpoint(path)
        if prefix is None:
            raise CheckpointError(f"no checkpoint found in directory {path}")
        return prefix
    if not os.path.exists(path + ".index"):
        raise CheckpointError(f"TF1 checkpoint {path} not found ({path}.index does not exist)")
    return path


def read_tf1_checkpoint(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """All variables of a TF1 checkpoint (optimizer slots and step excluded), by name.

    Raises CheckpointError naming the file if the index or a data file is corrupt."""
    prefix = resolve_checkpoint_prefix(path)
    return dict(read_checkpoint_tensors(prefix, include=lambda name: not IGNORED.search(name)))


def load_tf1_checkpoint(path: str | os.PathLike, config: AlbertConfig) -> CheckpointDir:
    """Builds our encoder (and the heads the checkpoint has) filled from a TF1 checkpoint.

    Raises CheckpointError for unreadable checkpoints, unknown or missing variables and shape
    mismatches (naming the variable and both shapes).
    """
    tensors = read_tf1_checkpoint(path)
    unmapped = sorted(n for n in tensors if target_name(n) is None)
    if unmapped:
        raise CheckpointError(f"{path}: unexpected variable(s): {', '.join(unmapped)}")
    model = build_model(
        config,
        with_mlm=any(n.startswith("cls/predictions/") for n in tensors),
        with_sop=any(n.startswith("cls/seq_relationship/") for n in tensors),
    )
    values = {target_name(n): (n, array) for n, array in tensors.items()}
    assign_checked(variables_by_name(model), values, source=str(path))
    return model


def convert_tf1_checkpoint(
    checkpoint: str | os.PathLike,
    config_path: str | os.PathLike,
    output_dir: str | os.PathLike,
    *,
    sp_model: str | os.PathLike | None = None,
    overwrite: bool = False,
) -> Path:
    """`albert-tf convert --tf1-checkpoint`: writes our checkpoint directory (atomic), with the
    release's SentencePiece model (`30k-clean.model`) when `sp_model` is given."""
    config = AlbertConfig.from_json_file(config_path)
    model = load_tf1_checkpoint(checkpoint, config)
    return model.save(output_dir, sp_model=sp_model, overwrite=overwrite)
