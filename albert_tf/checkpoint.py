"""Our checkpoint directory: `albert_config.json`, a TF2 object checkpoint, optional `spm.model`.

The `tf.train.Checkpoint` root has children `encoder` (AlbertEncoder), and optionally `mlm`
(MaskedLMHead) and `sop` (SentenceOrderHead); training runs add `optimizer`, `step`, fine-tuned
models `task_head`. It is written through `tf.train.CheckpointManager` (`checkpoint`,
`ckpt-N.index`, `ckpt-N.data-*`) and located with `tf.train.latest_checkpoint`.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import gc
import logging
import os
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import tensorflow as tf

from albert_tf.config import CONFIG_FILE, SP_MODEL_FILE, SP_VOCAB_FILE, AlbertConfig
from albert_tf.encoder import AlbertEncoder
from albert_tf.errors import CheckpointError
from albert_tf.heads import MaskedLMHead, SentenceOrderHead
from albert_tf.io_utils import atomic_dir


@dataclasses.dataclass
class CheckpointDir:
    """A model as a checkpoint directory holds it: what `load_checkpoint_dir` restores and the
    converters fill. Heads are None when the checkpoint lacks them."""

    config: AlbertConfig
    encoder: AlbertEncoder
    mlm_head: MaskedLMHead | None
    sop_head: SentenceOrderHead | None
    sp_model_path: Path | None = None

    def save(
        self,
        output_dir: str | os.PathLike,
        *,
        sp_model: str | os.PathLike | None = None,
        overwrite: bool = False,
    ) -> Path:
        """Writes the model as a checkpoint directory (atomic), with `sp_model` (default: its
        own sp_model_path) as `spm.model`; see save_checkpoint_dir."""
        return save_checkpoint_dir(
            output_dir,
            self.config,
            self.encoder,
            self.mlm_head,
            self.sop_head,
            sp_model=sp_model or self.sp_model_path,
            overwrite=overwrite,
        )


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


def tf_error_reason(error: Exception) -> str:
    """The first line of a TensorFlow error's message without its op wrappers
    (`{{function_node ...}}`, `[Op:RestoreV2]`) and the checkpoint shard it names."""
    message = (getattr(error, "message", None) or str(error) or type(error).__name__).strip()
    message = re.sub(
        r"\{\{[^}]*\}\}\s*|\s*\[Op:\w+\]( name:\s*\S*)?|TensorBundle at \S+ shard \d+ \([^)]*\): ",
        "",
        message,
    )
    return message.splitlines()[0] if message else type(error).__name__


def _data_file(prefix: str, error: Exception) -> str:
    """The data file of checkpoint `prefix` that `error` (raised reading a tensor) is about."""
    message = str(error)
    named = re.search(r"\S+\.data-\d+-of-\d+", message)
    if named:
        return named.group(0).rstrip(";:,")
    shards = sorted(tf.io.gfile.glob(f"{prefix}.data-*"))
    shard = re.search(r"shard (\d+)", message)
    if shard and int(shard.group(1)) < len(shards):
        return shards[int(shard.group(1))]
    return shards[0] if len(shards) == 1 else f"{prefix}.data-*"


# What TF's checkpoint reader raises for missing, truncated or corrupted files.
_READ_ERRORS = (tf.errors.OpError, ValueError, IndexError)


def read_checkpoint_tensors(
    prefix: str, include: Callable[[str], bool] = lambda name: True
) -> Iterator[tuple[str, np.ndarray]]:
    """(name, value) of every tensor of the checkpoint at `prefix` whose name `include` accepts,
    read one at a time (TF checks each one's checksum as it reads it), in name order.

    Raises CheckpointError naming the file (`prefix.index` or the data file) when one is
    missing, truncated or corrupted.
    """
    try:
        reader = _reader(prefix)
        names = sorted(filter(include, reader.get_variable_to_shape_map()))
    except _READ_ERRORS as e:
        raise CheckpointError(
            f"checkpoint file {prefix}.index is corrupt or unreadable: {tf_error_reason(e)}"
        ) from None
    for name in names:
        try:
            value = reader.get_tensor(name)
        except _READ_ERRORS as e:
            raise CheckpointError(
                f"checkpoint file {_data_file(prefix, e)} is corrupt or unreadable: "
                f"{tf_error_reason(e)}"
            ) from None
        yield name, value


def check_checkpoint_files(prefix: str) -> None:
    """Reads every tensor of the checkpoint at `prefix` once, so that a damaged file is reported
    as such (CheckpointError naming it) before restoring, which raises the same TF errors for a
    damaged file as for variables that disagree with the model."""
    collections.deque(read_checkpoint_tensors(prefix), maxlen=0)


def _reader(prefix: str):
    # The reader itself, not tf.train.load_checkpoint / list_variables: those first ask
    # isdir(prefix), which ram:// answers True for any prefix of a file name (ckpt-4 of
    # ckpt-4.index).
    return tf.compat.v1.train.NewCheckpointReader(prefix)


def checkpoint_children(prefix: str) -> set[str]:
    """Names of the root's children stored in the checkpoint at `prefix` (e.g. `encoder`)."""
    names = _reader(prefix).get_variable_to_shape_map()
    return {name.split("/", 1)[0] for name in names if not name.startswith("_CHECKPOINTABLE")}


@contextlib.contextmanager
def _tf_log_quiet() -> Iterator[None]:
    """Silences TensorFlow's Python logger: what it would log here becomes our one error line."""
    logger = tf.get_logger()
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


def latest_checkpoint(path: str | os.PathLike) -> str:
    """The newest checkpoint prefix in directory `path`.

    Raises CheckpointError naming the file when the `checkpoint` state file is unreadable or
    names a checkpoint whose index file is missing, and when there is no checkpoint at all.
    """
    state_file = Path(path) / "checkpoint"
    with _tf_log_quiet():
        prefix = tf.train.latest_checkpoint(str(path))
        state = None if prefix else tf.train.get_checkpoint_state(str(path))
    if prefix is not None:
        return prefix
    if state is not None and state.model_checkpoint_path:
        index = f"{state.model_checkpoint_path}.index"  # the reader joined it to `path`
        raise CheckpointError(f"checkpoint file {index} (named in {state_file}) does not exist")
    if state_file.is_file():
        raise CheckpointError(f"checkpoint state file {state_file} is corrupt or names nothing")
    raise CheckpointError(f"no TF2 checkpoint found in {path}")


def read_checkpoint_dir_config(path: str | os.PathLike) -> AlbertConfig:
    """The config of checkpoint directory `path`; CheckpointError if the directory or its
    `albert_config.json` is missing, ConfigError if the config is invalid."""
    path = Path(path)
    if not path.is_dir():
        raise CheckpointError(f"checkpoint directory {path} does not exist")
    if not (path / CONFIG_FILE).is_file():
        raise CheckpointError(f"checkpoint directory {path} has no {CONFIG_FILE}")
    return AlbertConfig.from_json_file(path / CONFIG_FILE)


def load_checkpoint_dir(path: str | os.PathLike) -> CheckpointDir:
    """Reads a checkpoint directory: config, encoder, heads that were saved, SentencePiece path.

    Raises CheckpointError if the directory, its config or checkpoint is missing, a checkpoint
    file is corrupt (naming it), or the checkpoint's variables disagree with the config.
    """
    path = Path(path)
    config = read_checkpoint_dir_config(path)
    prefix = latest_checkpoint(path)
    check_checkpoint_files(prefix)
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
    mismatch = None
    with _tf_log_quiet():
        try:
            status = tf.train.Checkpoint(**objects).read(prefix).expect_partial()
            status.assert_existing_objects_matched()
        except (AssertionError, ValueError, tf.errors.OpError) as e:
            mismatch = tf_error_reason(e)
        if mismatch is not None:
            # TF warns about the unfinished restore when it collects these objects: do it now.
            objects.clear()
            encoder = mlm_head = sop_head = None
            gc.collect()
    if mismatch is not None:
        raise CheckpointError(f"checkpoint {prefix} does not match {CONFIG_FILE}: {mismatch}")
    sp_model = path / SP_MODEL_FILE
    return CheckpointDir(
        config, encoder, mlm_head, sop_head, sp_model if sp_model.is_file() else None
    )
