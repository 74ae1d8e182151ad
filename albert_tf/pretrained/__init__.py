"""Models shipped inside the package, loadable by name with no network: `albert_en_mini`.

A shipped model is a folder of package data beside this file: `albert_config.json`, the
SentencePiece model (`spm.model`, `spm.vocab`), `weights.safetensors` and `MODEL_CARD.md`.
The weights are stored as float16 under our variable names (`encoder/embeddings/...`, `cls/...`:
the original checkpoint scopes), the encoder, the MLM head and the sentence-order head. Loading
casts them to float32, which is exact: the float32 model holds the float16 values unchanged, and
every figure on the model card was measured on those weights.

Wherever a checkpoint directory is read, the name works too: `finetune --init albert_en_mini`,
`export --checkpoint albert_en_mini`, `evaluate --checkpoint albert_en_mini`, `pretrain
--init albert_en_mini`, and `albert_tf.load_pretrained("albert_en_mini")` in Python.
The first use writes the model once as a checkpoint directory under the cache
(`$ALBERT_TF_CACHE`, else `$XDG_CACHE_HOME/albert-tf`, else `~/.cache/albert-tf`), in a folder
named by the weights' digest; `--init random --config albert_en_mini` is the same shape and
vocabulary with random weights (`resolve_config` knows the name). Only loading and writing the
weights import TensorFlow (`albert_tf.weights`): resolving a name does not, and `albert-tf
export`'s parser imports this module.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file, save

from albert_tf.config import (
    CONFIG_FILE,
    SHIPPED_DIR,
    SHIPPED_MODELS,
    SP_MODEL_FILE,
    AlbertConfig,
    did_you_mean,
)
from albert_tf.errors import CheckpointError, OutputError
from albert_tf.io_utils import atomic_dir

WEIGHTS_FILE = "weights.safetensors"
CARD_FILE = "MODEL_CARD.md"
STORAGE_DTYPE = np.float16


def is_shipped(name: str | os.PathLike) -> bool:
    """True when `name` is a shipped model's name (and no file or folder of that name exists
    in the working directory, which would win)."""
    return str(name) in SHIPPED_MODELS and not os.path.exists(name)


def model_dir(name: str) -> Path:
    """The package-data folder of shipped model `name`; CheckpointError for another name."""
    if name not in SHIPPED_MODELS:
        raise CheckpointError(f"{name!r} is not a shipped model ({', '.join(SHIPPED_MODELS)})")
    folder = SHIPPED_DIR / name
    if not (folder / WEIGHTS_FILE).is_file():
        raise CheckpointError(f"shipped model {name}: {folder / WEIGHTS_FILE} is missing")
    return folder


def load_pretrained(name: str):
    """The shipped model `name` as a `CheckpointDir` (encoder, MLM and sentence-order heads,
    SentencePiece model), float32 weights equal to the stored float16 values."""
    return load_shipped_folder(model_dir(name), name)


def load_shipped_folder(folder: Path, name: str | None = None):
    """`load_pretrained` of a folder in the shipped layout (`write_shipped`'s output), named
    `name` (default: the folder's) in errors."""
    from albert_tf.weights import assign_checked, build_model, variables_by_name

    name = name or folder.name
    config = AlbertConfig.from_json_file(folder / CONFIG_FILE)
    model = build_model(config, with_mlm=True, with_sop=True)
    tensors = load_file(str(folder / WEIGHTS_FILE))
    values = {key: (key, array.astype(np.float32)) for key, array in tensors.items()}
    assign_checked(variables_by_name(model), values, source=f"shipped model {name}")
    model.sp_model_path = folder / SP_MODEL_FILE
    return model


def cache_root() -> Path:
    """Where shipped models are written as checkpoint directories on first use."""
    if os.environ.get("ALBERT_TF_CACHE"):
        return Path(os.environ["ALBERT_TF_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "albert-tf"


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def _complete(directory: Path) -> bool:
    return (directory / CONFIG_FILE).is_file() and (directory / "checkpoint").is_file()


def checkpoint_dir(name: str) -> Path:
    """Shipped model `name` as a checkpoint directory (written into the cache on first use,
    atomically; concurrent first uses each write and the first rename wins)."""
    folder = model_dir(name)
    target = cache_root() / f"{name}-{_digest(folder / WEIGHTS_FILE)}"
    if _complete(target):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        load_pretrained(name).save(target, sp_model=folder / SP_MODEL_FILE)
    except OutputError:
        if not _complete(target):
            raise
    return target


def resolve(path: str | os.PathLike) -> str | os.PathLike:
    """A checkpoint directory for `path`: a shipped model's name becomes its cached checkpoint
    directory; anything else is returned unchanged, except a missing path that is a misspelt
    shipped name (`albert_en_mni`): CheckpointError naming the nearest name."""
    if is_shipped(path):
        return str(checkpoint_dir(str(path)))
    hint = did_you_mean(path)
    if hint and not os.path.exists(path):
        raise CheckpointError(f"{path} is neither a file, a folder nor a shipped model{hint}")
    return path


def write_shipped(model, output: str | os.PathLike, *, overwrite: bool = False) -> Path:
    """Writes `model` (a CheckpointDir with both heads and a SentencePiece model) as a shipped
    model folder: config, SentencePiece files and float16 weights (atomic). Raises
    CheckpointError when a weight is not finite or does not fit in float16."""
    from albert_tf.weights import variables_by_name

    if model.mlm_head is None or model.sop_head is None or model.sp_model_path is None:
        raise CheckpointError("a shipped model needs both pretraining heads and spm.model")
    tensors = {}
    for key, variable in variables_by_name(model).items():
        array = variable.numpy()
        stored = array.astype(STORAGE_DTYPE)
        if not np.all(np.isfinite(stored)):
            raise CheckpointError(
                f"{key}: a weight is not finite in float16 (max {abs(array).max()})"
            )
        tensors[key] = stored
    sp_model = Path(model.sp_model_path)
    with atomic_dir(output, overwrite=overwrite) as tmp:
        model.config.to_json_file(tmp / CONFIG_FILE)
        # bytes written here, not safetensors' save_file, which makes the file 0600
        (tmp / WEIGHTS_FILE).write_bytes(save(tensors))
        shutil.copyfile(sp_model, tmp / SP_MODEL_FILE)
        shutil.copyfile(sp_model.with_suffix(".vocab"), tmp / "spm.vocab")
    return Path(output)
