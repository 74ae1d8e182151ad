"""From an exported encoder SavedModel back to a checkpoint directory, to keep training it."""

from __future__ import annotations

import os
from pathlib import Path

import tensorflow as tf

from albert_tf.checkpoint import check_checkpoint_files, save_checkpoint_dir, tf_error_reason
from albert_tf.config import CONFIG_FILE, SP_MODEL_FILE, AlbertConfig
from albert_tf.encoder import AlbertEncoder
from albert_tf.errors import ExportError
from albert_tf.export.encoder import unique_variables
from albert_tf.heads import MaskedLMHead


def _copy(targets: list[tf.Variable], sources: list[tf.Variable], what: str) -> None:
    if len(targets) != len(sources):
        raise ExportError(
            f"{what}: the SavedModel has {len(sources)} variables, the config builds {len(targets)}"
        )
    for target, source in zip(targets, sources, strict=True):
        if target.shape != source.shape:
            raise ExportError(
                f"{what}: variable {source.name} has shape {source.shape.as_list()}, the config "
                f"builds {target.name} with shape {target.shape.as_list()}"
            )
        target.assign(source)


def hub_to_checkpoint_dir(
    hub_dir: str | os.PathLike, output_dir: str | os.PathLike, overwrite: bool = False
) -> Path:
    """Writes a checkpoint directory (encoder, MLM head when exported, spm.model when packaged)
    from an encoder SavedModel written by `albert_tf.export.encoder.save_encoder`; returns its path.

    Variables are matched by position (the export stores them in the encoder's own order) and
    checked by count and shape. Raises ExportError if `hub_dir` is not such a SavedModel or its
    variables disagree with its `albert_config.json`, CheckpointError naming a damaged variables
    file; OutputError as `save_checkpoint_dir`.
    """
    hub_dir = Path(hub_dir)
    assets = hub_dir / "assets"
    if not (assets / CONFIG_FILE).is_file():
        raise ExportError(
            f"{hub_dir} is not an albert-tf encoder SavedModel (no assets/{CONFIG_FILE})"
        )
    config = AlbertConfig.from_json_file(assets / CONFIG_FILE)
    check_checkpoint_files(str(hub_dir / "variables" / "variables"))
    try:
        loaded = tf.saved_model.load(str(hub_dir))
    except (tf.errors.OpError, ValueError, OSError) as e:
        raise ExportError(f"cannot load SavedModel {hub_dir}: {tf_error_reason(e)}") from None
    encoder = AlbertEncoder(config)
    _copy(encoder.variables, list(loaded.variables), "encoder")
    mlm_head = None
    if hasattr(loaded, "mlm"):
        mlm_head = MaskedLMHead(config, encoder.get_embedding_table())
        own = len(encoder.variables)
        _copy(
            unique_variables(encoder.variables + mlm_head.variables)[own:],
            list(loaded.mlm.variables)[own:],
            "MLM head",
        )
    sp_model = assets / SP_MODEL_FILE
    return save_checkpoint_dir(
        output_dir,
        config,
        encoder,
        mlm_head=mlm_head,
        sp_model=sp_model if sp_model.is_file() else None,
        overwrite=overwrite,
    )
