"""Our checkpoint directory: `albert_config.json`, a TF2 object checkpoint, optional `spm.model`.

The `tf.train.Checkpoint` root has children `encoder` (AlbertEncoder), and optionally `mlm`
(MaskedLMHead) and `sop` (SentenceOrderHead); training runs add `optimizer`, `step`, fine-tuned
models `task_head`. It is written through `tf.train.CheckpointManager` (`checkpoint`,
`ckpt-N.index`, `ckpt-N.data-*`) and located with `tf.train.latest_checkpoint`.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from pathlib import Path

import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.encoder import AlbertEncoder
from albert_tf.errors import CheckpointError
from albert_tf.heads import MaskedLMHead, SentenceOrderHead
from albert_tf.io_utils import atomic_dir

CONFIG_FILE = "albert_config.json"
SP_MODEL_FILE = "spm.model"
SP_VOCAB_FILE = "spm.vocab"


@dataclasses.dataclass
class CheckpointDir:
    """What `load_checkpoint_dir` restores; heads are None when the checkpoint lacks them."""

    config: AlbertConfig
    encoder: AlbertEncoder
    mlm_head: MaskedLMHead | None
    sop_head: SentenceOrderHead | None
    sp_model_path: Path | None


def write_checkpoint(directory: str | os.PathLike, **objects: tf.Module) -> str:
    """Saves `objects` as the children of a `tf.train.Checkpoint` under `directory`; returns
    the checkpoint prefix (`directory/ckpt-1`)."""
    checkpoint = tf.train.Checkpoint(**objects)
    manager = tf.train.CheckpointManager(checkpoint, str(directory), max_to_keep=1)
    return manager.save()


def save_checkpoint_dir(
    output_dir: str | os.PathLike,
    config: AlbertConfig,
    encoder: AlbertEncoder,
    mlm_head: MaskedLMHead | None = None,
    sop_head: SentenceOrderHead | None = None,
    sp_model: str | os.PathLike | None = None,
    overwrite: bool = False,
) -> Path:
    """Writes a checkpoint directory atomically; returns its path.

    `sp_model` is a SentencePiece `.model` file copied as `spm.model` (with the `.vocab` beside
    it as `spm.vocab` when present). Raises OutputError if `output_dir` exists and not
    `overwrite`, CheckpointError if `sp_model` is missing.
    """
    if sp_model is not None and not Path(sp_model).is_file():
        raise CheckpointError(f"SentencePiece model {sp_model} does not exist")
    objects: dict[str, tf.Module] = {"encoder": encoder}
    if mlm_head is not None:
        objects["mlm"] = mlm_head
    if sop_head is not None:
        objects["sop"] = sop_head
    with atomic_dir(output_dir, overwrite=overwrite) as tmp:
        config.to_json_file(tmp / CONFIG_FILE)
        write_checkpoint(tmp, **objects)
        if sp_model is not None:
            shutil.copyfile(sp_model, tmp / SP_MODEL_FILE)
            vocab = Path(sp_model).with_suffix(".vocab")
            if vocab.is_file():
                shutil.copyfile(vocab, tmp / SP_VOCAB_FILE)
    return Path(output_dir)


def checkpoint_children(prefix: str) -> set[str]:
    """Names of the root's children stored in the checkpoint at `prefix` (e.g. `encoder`)."""
    names = (name for name, _ in tf.train.list_variables(prefix))
    return {name.split("/", 1)[0] for name in names if not name.startswith("_CHECKPOINTABLE")}


def latest_checkpoint(path: str | os.PathLike) -> str:
    """The newest checkpoint prefix in directory `path`; CheckpointError if there is none."""
    prefix = tf.train.latest_checkpoint(str(path))
    if prefix is None:
        raise CheckpointError(f"no TF2 checkpoint found in {path}")
    return prefix


def load_checkpoint_dir(path: str | os.PathLike) -> CheckpointDir:
    """Reads a checkpoint directory: config, encoder, heads that were saved, SentencePiece path.

    Raises CheckpointError if the directory, its config or checkpoint is missing, or the
    checkpoint's variables disagree with the config.
    """
    path = Path(path)
    if not path.is_dir():
        raise CheckpointError(f"checkpoint directory {path} does not exist")
    if not (path / CONFIG_FILE).is_file():
        raise CheckpointError(f"{path} has no {CONFIG_FILE}")
    config = AlbertConfig.from_json_file(path / CONFIG_FILE)
    prefix = latest_checkpoint(path)
    children = checkpoint_children(prefix)
    if "encoder" not in children:
        raise CheckpointError(f"checkpoint {prefix} has no encoder")
    encoder = AlbertEncoder(config)
    objects: dict[str, tf.Module] = {"encoder": encoder}
    mlm_head = sop_head = None
    if "mlm" in children:
        mlm_head = objects["mlm"] = MaskedLMHead(config, encoder.get_embedding_table())
    if "sop" in children:
        sop_head = objects["sop"] = SentenceOrderHead(config)
    try:
        status = tf.train.Checkpoint(**objects).read(prefix).expect_partial()
        status.assert_existing_objects_matched()
    except (AssertionError, ValueError, tf.errors.OpError) as e:
        raise CheckpointError(f"checkpoint {prefix} does not match {CONFIG_FILE}: {e}") from None
    sp_model = path / SP_MODEL_FILE
    return CheckpointDir(
        config, encoder, mlm_head, sop_head, sp_model if sp_model.is_file() else None
    )
