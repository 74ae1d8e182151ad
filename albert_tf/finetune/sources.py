"""Where fine-tuning starts: our checkpoint dir, an original TF1 checkpoint, a TF-Hub encoder
directory, or random initialization of a config.

`load_source` returns the encoder to fine-tune with what is known about it (config, SentencePiece
model); the kind decides how the fine-tuned model is saved and reloaded.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers ops an encoder export may use)

from albert_tf.checkpoint import checkpoint_children, load_checkpoint_dir
from albert_tf.config import (
    CONFIG_FILE,
    PRESETS,
    SHIPPED_DIR,
    SP_MODEL_FILE,
    AlbertConfig,
    resolve_config,
)
from albert_tf.encoder import AlbertEncoder
from albert_tf.errors import CheckpointError, ConfigError
from albert_tf.pretrained import is_shipped, resolve
from albert_tf.tf1 import load_tf1_checkpoint

KINDS = ("checkpoint", "tf1", "hub", "random")


@dataclass
class Source:
    """An encoder to fine-tune. For TF-Hub encoders `config` comes from the SavedModel's
    `albert_config.json` asset (None without one) and `hub_path` is set."""

    kind: str
    encoder: Any
    config: AlbertConfig | None
    sp_model_path: Path | None
    hub_path: Path | None = None


def _is_hub_dir(path: Path) -> bool:
    return path.is_dir() and (path / "saved_model.pb").is_file()


def _tf1_prefix(path: Path) -> str | None:
    """The TF1 checkpoint prefix at `path` (a prefix or a directory holding one), else None."""
    candidates = [str(path)]
    if path.is_dir():
        latest = tf.train.latest_checkpoint(str(path))
        candidates = [latest] if latest else []
        candidates += [str(p.with_suffix("")) for p in sorted(path.glob("*.ckpt*.index"))]
    for prefix in candidates:
        if prefix and Path(prefix + ".index").is_file():
            names = {name for name, _ in tf.train.list_variables(prefix)}
            if "bert/embeddings/word_embeddings" in names:
                return prefix
    return None


def hub_sp_model(path: Path) -> Path | None:
    """The SentencePiece model packaged as an asset of a TF-Hub encoder, if any."""
    models = sorted((path / "assets").glob("*.model")) if (path / "assets").is_dir() else []
    return models[0] if models else None


def load_source(
    source: str | os.PathLike,
    config: str | os.PathLike | None = None,
    sp_model: str | os.PathLike | None = None,
) -> Source:
    """Loads the encoder named by `source`.

    - our checkpoint directory (`albert_config.json` + TF2 checkpoint with an `encoder`), or a
      shipped model's name (`albert_en_mini`, see albert_tf.pretrained);
    - an original TF1 checkpoint (prefix or directory), with `config` or an
      `albert_config.json` beside it, converted in memory;
    - a TF-Hub encoder SavedModel directory (fine-tuned through `hub.KerasLayer(trainable=True)`);
    - `"random"` with `config` (preset, shipped model name or JSON): the same architecture,
      randomly initialized; a shipped model's name brings its SentencePiece model too.

    `sp_model` overrides the SentencePiece model found with the source. Raises CheckpointError
    or ConfigError with one line naming what is missing.
    """
    sp_path = Path(sp_model) if sp_model is not None else None
    if sp_path is not None and not sp_path.is_file():
        raise ConfigError(f"SentencePiece model {sp_path} does not exist")
    if str(source) == "random":
        if config is None:
            raise ConfigError("--init random needs --config (a preset or albert_config.json)")
        resolved = resolve_config(config)
        if sp_path is None and is_shipped(config):  # the shipped vocabulary comes with the name
            sp_path = SHIPPED_DIR / str(config) / SP_MODEL_FILE
        return Source("random", AlbertEncoder(resolved), resolved, sp_path)
    path = Path(resolve(source))  # a shipped model's name: its checkpoint directory
    if not path.exists() and not Path(str(path) + ".index").exists():
        raise CheckpointError(f"--init {path} does not exist")
    if _is_hub_dir(path):
        # optional: only a TF-Hub encoder needs it, and it needs pkg_resources (setuptools<82)
        import tensorflow_hub as hub

        try:
            layer = hub.KerasLayer(str(path), trainable=True, name="encoder")
        except (OSError, ValueError) as e:
            raise CheckpointError(f"cannot load TF-Hub encoder {path}: {e}") from None
        config_asset = path / "assets" / CONFIG_FILE
        hub_config = AlbertConfig.from_json_file(config_asset) if config_asset.is_file() else None
        return Source("hub", layer, hub_config, sp_path or hub_sp_model(path), hub_path=path)
    if path.is_dir() and (path / CONFIG_FILE).is_file():
        latest = tf.train.latest_checkpoint(str(path))
        if latest is not None and "encoder" in checkpoint_children(latest):
            loaded = load_checkpoint_dir(path)
            return Source(
                "checkpoint", loaded.encoder, loaded.config, sp_path or loaded.sp_model_path
            )
    prefix = _tf1_prefix(path)
    if prefix is None:
        raise CheckpointError(
            f"--init {path} is not a checkpoint directory, TF1 ALBERT checkpoint or TF-Hub encoder"
        )
    config_path = config or Path(prefix).parent / CONFIG_FILE
    if not Path(config_path).is_file() and str(config_path) not in _presets():
        raise ConfigError(f"TF1 checkpoint {prefix} needs --config (its albert_config.json)")
    resolved = resolve_config(config_path)
    return Source("tf1", load_tf1_checkpoint(prefix, resolved).encoder, resolved, sp_path)


def _presets() -> tuple[str, ...]:
    return tuple(PRESETS)
