"""The pretraining run directory, and the input checks made before anything is written.

A run directory is a checkpoint directory (albert_config.json, spm.model, `ckpt-N`) plus
`pretrain_run.json`, the settings that decide which batches come next: a run can only be resumed
with the same config and those settings.

Every path may also be a tf.io.gfile URL (gs://bucket/run, ram://x; see io_utils.is_remote):
local paths go through the OS as before, URLs through tf.io.gfile.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import tensorflow as tf

from albert_tf.checkpoint import check_checkpoint_files, checkpoint_children
from albert_tf.config import (
    CONFIG_FILE,
    SP_MODEL_FILE,
    SP_VOCAB_FILE,
    AlbertConfig,
    resolve_config,
)
from albert_tf.errors import CheckpointError, ConfigError, OutputError, TokenizerError
from albert_tf.io_utils import (
    atomic_dir,
    atomic_remote_file,
    gfile_errors,
    is_file,
    is_remote,
    join,
    path_str,
)

RUN_FILE = "pretrain_run.json"
# Settings that must be equal to resume a run: they decide which batches come next.
RESUME_KEYS = ("batch_size", "seed", "max_seq_length", "max_predictions_per_seq")
# Config fields a continued-pretraining init checkpoint may differ in (not the architecture).
_NON_ARCHITECTURE = ("hidden_dropout_prob", "attention_probs_dropout_prob", "initializer_range")


def read_config(path: str | os.PathLike) -> AlbertConfig:
    """AlbertConfig.from_json_file for a local path or a URL; ConfigError if unreadable."""
    if not is_remote(path):
        return AlbertConfig.from_json_file(path)
    with gfile_errors(ConfigError, f"cannot read config {path}"):
        text = tf.io.gfile.GFile(path).read()
    try:
        return AlbertConfig.from_json_string(text)
    except ConfigError as e:
        raise ConfigError(f"{path}: {e}") from None


def load_config(spec: str | os.PathLike | AlbertConfig) -> AlbertConfig:
    """resolve_config, plus an albert_config.json (or a checkpoint dir holding one) at a URL."""
    if isinstance(spec, AlbertConfig) or not is_remote(spec):
        return resolve_config(spec)
    with gfile_errors(ConfigError, f"cannot read config {spec}"):
        directory = tf.io.gfile.isdir(spec)
    return read_config(join(spec, CONFIG_FILE) if directory else spec)


def check_init_checkpoint(path: str | os.PathLike, config: AlbertConfig) -> str:
    """The checkpoint file prefix in checkpoint dir `path`; CheckpointError if unusable."""
    directory = path_str(path)
    config_file = join(directory, CONFIG_FILE)
    with gfile_errors(CheckpointError, f"cannot read init checkpoint {directory}"):
        if not is_file(config_file):
            raise CheckpointError(f"{directory} is not a checkpoint directory (no {CONFIG_FILE})")
        theirs = read_config(config_file)
        differ = [
            f"{k}: {v} != {getattr(config, k)}"
            for k, v in theirs.to_dict().items()
            if k not in _NON_ARCHITECTURE and getattr(config, k) != v
        ]
        if differ:
            raise CheckpointError(
                f"init checkpoint {directory} has a different model config ({'; '.join(differ)})"
            )
        prefix = tf.train.latest_checkpoint(str(directory))
        if prefix is None:
            raise CheckpointError(f"{directory} holds no checkpoint")
        check_checkpoint_files(prefix)
        if "encoder" not in checkpoint_children(prefix):
            raise CheckpointError(f"{prefix} has no 'encoder' object (not an albert-tf checkpoint)")
    return prefix


def prepare_output(
    output_dir: str | os.PathLike,
    config: AlbertConfig,
    settings: dict,
    sp_model: str | None,
    overwrite: bool,
) -> bool:
    """Creates the run directory, or checks it holds this run. Returns True when resuming.

    A new local directory is written atomically with the config, run settings and spm.model (a
    URL one file at a time, see _prepare_remote_output). OutputError if `output_dir` holds
    something else (another config, other settings, or files that are not a run) and
    `overwrite` is False.
    """
    if is_remote(output_dir):
        return _prepare_remote_output(os.fspath(output_dir), config, settings, sp_model, overwrite)
    target = Path(output_dir)
    if target.exists() and not overwrite:
        if not target.is_dir():
            raise OutputError(f"output {target} exists and is not a directory")
        if _holds_this_run(target, config, settings):
            return True
        if any(target.iterdir()):
            raise OutputError(
                f"output {target} exists and is not a pretraining run (pass --overwrite)"
            )
    with atomic_dir(target, overwrite=True) as tmp:
        config.to_json_file(tmp / CONFIG_FILE)
        (tmp / RUN_FILE).write_text(json.dumps(settings, indent=2) + "\n")
        for source, name in _sp_files(sp_model):
            if is_remote(source):
                tf.io.gfile.copy(source, str(tmp / name))
            else:
                shutil.copyfile(source, tmp / name)
    return False


def _holds_this_run(target: str | Path, config: AlbertConfig, settings: dict) -> bool:
    """Whether directory `target` holds a run (has albert_config.json).

    OutputError if that run has another config or other RESUME_KEYS settings.
    """
    config_file = join(target, CONFIG_FILE)
    if not is_file(config_file):
        return False
    if read_config(config_file) != config:
        raise OutputError(
            f"output {target} holds another run (different config); choose another "
            "directory or pass --overwrite"
        )
    run_file = join(target, RUN_FILE)
    previous = json.loads(tf.io.gfile.GFile(run_file).read()) if is_file(run_file) else {}
    changed = [
        f"{k}={previous[k]} (now {settings[k]})"
        for k in RESUME_KEYS
        if k in previous and previous[k] != settings[k]
    ]
    if changed:
        raise OutputError(
            f"output {target} holds a run with {', '.join(changed)}; resume with the "
            "same settings, or pass --overwrite"
        )
    return True


def _sp_files(sp_model: str | None) -> list[tuple[str, str]]:
    """(source, name in the run directory) for `sp_model` and the .vocab file beside it, if any."""
    if not sp_model:
        return []
    vocab = os.path.splitext(sp_model)[0] + ".vocab"
    with gfile_errors(TokenizerError, f"cannot read {vocab}"):
        return [(sp_model, SP_MODEL_FILE)] + ([(vocab, SP_VOCAB_FILE)] if is_file(vocab) else [])


def _prepare_remote_output(
    target: str, config: AlbertConfig, settings: dict, sp_model: str | None, overwrite: bool
) -> bool:
    """prepare_output for a tf.io.gfile URL.

    Object stores cannot rename a directory atomically (GCS copies object by object), so the
    files are written one at a time, each whole (atomic_remote_file), and albert_config.json
    last: a directory with albert_config.json always holds the complete run header, and an
    interrupted start leaves one the next call refuses as "not a pretraining run". With
    `overwrite` the old directory is deleted first.
    """
    with gfile_errors(OutputError, f"cannot use output {target}"):
        exists = tf.io.gfile.exists(target)
        if exists and not overwrite:
            if not tf.io.gfile.isdir(target):
                raise OutputError(f"output {target} exists and is not a directory")
            if _holds_this_run(target, config, settings):
                return True
            if tf.io.gfile.listdir(target):
                raise OutputError(
                    f"output {target} exists and is not a pretraining run (pass --overwrite)"
                )
        elif exists and tf.io.gfile.isdir(target):
            tf.io.gfile.rmtree(target)
        elif exists:
            tf.io.gfile.remove(target)
        tf.io.gfile.makedirs(target)
    for source, name in _sp_files(sp_model):
        with atomic_remote_file(join(target, name)) as tmp:
            tf.io.gfile.copy(source, tmp, overwrite=True)
    for name, text in (
        (RUN_FILE, json.dumps(settings, indent=2) + "\n"),
        (CONFIG_FILE, config.to_json_string()),
    ):
        with atomic_remote_file(join(target, name)) as tmp, tf.io.gfile.GFile(tmp, "w") as f:
            f.write(text)
    return False
