"""The pretraining run directory, and the input checks made before anything is written.

A run directory is a checkpoint directory (albert_config.json, spm.model, `ckpt-N`) plus
`pretrain_run.json`, the settings that decide which batches come next: a run can only be resumed
with the same config and those settings.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.errors import CheckpointError, OutputError, TokenizerError
from albert_tf.io_utils import atomic_dir

RUN_FILE = "pretrain_run.json"
CONFIG_FILE = "albert_config.json"
# Settings that must be equal to resume a run: they decide which batches come next.
RESUME_KEYS = ("batch_size", "seed", "max_seq_length", "max_predictions_per_seq")
# Config fields a continued-pretraining init checkpoint may differ in (not the architecture).
_NON_ARCHITECTURE = ("hidden_dropout_prob", "attention_probs_dropout_prob", "initializer_range")


def check_sp_model(sp_model: str | os.PathLike, config: AlbertConfig) -> None:
    """TokenizerError unless `sp_model` is a SentencePiece model with config.vocab_size pieces."""
    import sentencepiece

    path = Path(sp_model)
    if not path.is_file():
        raise TokenizerError(f"SentencePiece model {path} does not exist")
    try:
        size = sentencepiece.SentencePieceProcessor(model_file=str(path)).get_piece_size()
    except (RuntimeError, OSError) as e:
        raise TokenizerError(f"{path} is not a SentencePiece model: {e}") from None
    if size != config.vocab_size:
        raise TokenizerError(
            f"SentencePiece model {path} has {size} pieces but the config has vocab_size "
            f"{config.vocab_size}"
        )


def check_init_checkpoint(path: str | os.PathLike, config: AlbertConfig) -> str:
    """The checkpoint file prefix in checkpoint dir `path`; CheckpointError if unusable."""
    directory = Path(path)
    config_file = directory / CONFIG_FILE
    if not config_file.is_file():
        raise CheckpointError(f"{directory} is not a checkpoint directory (no {CONFIG_FILE})")
    theirs = AlbertConfig.from_json_file(config_file)
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
    if not any(name.startswith("encoder/") for name, _ in tf.train.list_variables(prefix)):
        raise CheckpointError(f"{prefix} has no 'encoder' object (not an albert-tf checkpoint)")
    return prefix


def run_settings(args: dict) -> dict:
    """The settings stored in pretrain_run.json."""
    return {k: args[k] for k in ("batch_size", "seed", "learning_rate", "warmup_steps")} | {
        "max_seq_length": args["max_seq_length"],
        "max_predictions_per_seq": args["max_predictions_per_seq"],
    }


def prepare_output(
    output_dir: str | os.PathLike,
    config: AlbertConfig,
    settings: dict,
    sp_model: str | None,
    overwrite: bool,
) -> bool:
    """Creates the run directory, or checks it holds this run. Returns True when resuming.

    A new directory is written atomically with the config, run settings and spm.model.
    OutputError if `output_dir` holds something else (another config, other settings, or files
    that are not a run) and `overwrite` is False.
    """
    target = Path(output_dir)
    if target.exists() and not overwrite:
        if not target.is_dir():
            raise OutputError(f"output {target} exists and is not a directory")
        if (target / CONFIG_FILE).is_file():
            theirs = AlbertConfig.from_json_file(target / CONFIG_FILE)
            if theirs != config:
                raise OutputError(
                    f"output {target} holds another run (different config); choose another "
                    "directory or pass --overwrite"
                )
            run_file = target / RUN_FILE
            previous = json.loads(run_file.read_text()) if run_file.is_file() else {}
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
        if any(target.iterdir()):
            raise OutputError(
                f"output {target} exists and is not a pretraining run (pass --overwrite)"
            )
    with atomic_dir(target, overwrite=True) as tmp:
        config.to_json_file(tmp / CONFIG_FILE)
        (tmp / RUN_FILE).write_text(json.dumps(settings, indent=2) + "\n")
        if sp_model:
            shutil.copyfile(sp_model, tmp / "spm.model")
            vocab = Path(sp_model).with_suffix(".vocab")
            if vocab.is_file():
                shutil.copyfile(vocab, tmp / "spm.vocab")
    return False
