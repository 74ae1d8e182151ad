"""What every converter shares: a fresh model whose variables carry the original scopes, its
variables by name, and checked assignment from named arrays."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import tensorflow as tf

from albert_tf import progress
from albert_tf.checkpoint import CheckpointDir
from albert_tf.config import AlbertConfig
from albert_tf.encoder import AlbertEncoder
from albert_tf.errors import CheckpointError
from albert_tf.heads import MaskedLMHead, SentenceOrderHead


def build_model(config: AlbertConfig, with_mlm: bool, with_sop: bool) -> CheckpointDir:
    """A fresh encoder (and heads) whose variables carry the original-scope names."""
    if config.shared_params != "all":
        raise CheckpointError(
            f"shared_params={config.shared_params!r}: released checkpoints share all block "
            "weights within a group; use shared_params='all'"
        )
    encoder = AlbertEncoder(config)
    mlm = MaskedLMHead(config, encoder.get_embedding_table()) if with_mlm else None
    sop = SentenceOrderHead(config) if with_sop else None
    return CheckpointDir(config, encoder, mlm, sop)


def variables_by_name(model: CheckpointDir) -> dict[str, tf.Variable]:
    """Every variable of the model, keyed by its name without `:0`
    (`encoder/transformer/group_0/inner_group_0/LayerNorm/gamma`, `cls/predictions/output_bias`)."""
    layers = [model.encoder, model.mlm_head, model.sop_head]
    variables = [v for layer in layers if layer is not None for v in layer.variables]
    return {v.name.removesuffix(":0"): v for v in variables}


def assign_checked(
    targets: Mapping[str, tf.Variable], values: Mapping[str, tuple[str, np.ndarray]], source: str
) -> None:
    """Assigns `values[target] = (source variable name, array)` to every target variable.

    Raises CheckpointError naming the variable if a target has no value, a value has no target,
    or shapes disagree (both shapes given).
    """
    unknown = sorted(set(values) - set(targets))
    if unknown:
        names = ", ".join(values[name][0] for name in unknown)
        raise CheckpointError(f"{source}: variables with no place in the model: {names}")
    missing = sorted(set(targets) - set(values))
    if missing:
        raise CheckpointError(f"{source}: missing variable(s) for {', '.join(missing)}")
    # Progress on a terminal only (albert_tf.progress): large models take a while.
    for name, variable in progress.bar(targets.items(), desc="converting", unit="var"):
        source_name, array = values[name]
        if tuple(array.shape) != tuple(variable.shape):
            raise CheckpointError(
                f"{source}: variable {source_name} has shape {list(array.shape)} but the config "
                f"needs {list(variable.shape)} for {name}"
            )
        variable.assign(array.astype(variable.dtype.as_numpy_dtype))


def whole_block_groups(config: AlbertConfig) -> int:
    """The groups of `config` in a layout that shares whole blocks or nothing (transformers,
    keras-hub): ours, or one per layer when nothing is shared."""
    return config.num_hidden_layers if config.shared_params == "none" else config.num_hidden_groups
