"""ALBERT ("A Lite BERT") for TensorFlow 2 and tf_keras, with TF-Hub export.

The public API: the names in `__all__`, and those of the subpackages' own `__all__`
(`albert_tf.layers`, `albert_tf.pretraining`, `albert_tf.finetune`, `albert_tf.finetune.tasks`,
`albert_tf.convert`, `albert_tf.quickstart`, `albert_tf.preprocess`,
`albert_tf.preprocess.pretraining_data`, `albert_tf.export`, `albert_tf.export.onnx`). The config
and the errors are imported with the package; every other name imports its module (and
TensorFlow) on first use.

The repository's `preprocess/` and `export/` folders install as `albert_tf.preprocess` and
`albert_tf.export` (pyproject.toml's package-dir, which setup.py's package search follows):
albert-tf claims one top-level name, so a user's own `preprocess.py` or `export.py` never
shadows it.
"""

from albert_tf.config import PRESETS, AlbertConfig, resolve_config
from albert_tf.errors import (
    AlbertError,
    CheckpointError,
    ConfigError,
    DataError,
    ExportError,
    InstallError,
    OutputError,
    TokenizerError,
)
from albert_tf.lazy import lazy_exports

_LAZY, __getattr__, __dir__ = lazy_exports(
    __name__,
    {
        ".encoder": "AlbertEncoder",
        ".models": "AlbertPretrainingModel",
        ".heads": "MaskedLMHead SentenceOrderHead",
        ".checkpoint": "CheckpointDir load_checkpoint_dir save_checkpoint_dir",
        ".pretrained": "load_pretrained",
        ".params": "parameter_breakdown",
        ".preprocess.tokenizer": "AlbertTokenizer",
        ".preprocess.spm_train": "train_sentencepiece",
        ".preprocess.pretraining_data": "create_pretraining_data",
        ".pretraining.settings": "PretrainSettings",
        ".pretraining.trainer": "pretrain",
        ".finetune.settings": "FinetuneSettings",
        ".finetune.predict": "FinetunedModel load_finetuned",
        ".tf1": "convert_tf1_checkpoint",
        ".convert.hf": "convert_hf_checkpoint",
        ".export.bundle": "export_bundle",
        ".quickstart": "run_quickstart",
    },
    globals(),
)

__all__ = [
    "PRESETS",
    "AlbertConfig",
    "resolve_config",
    "AlbertError",
    "CheckpointError",
    "ConfigError",
    "DataError",
    "ExportError",
    "InstallError",
    "OutputError",
    "TokenizerError",
    *_LAZY,
]
__version__ = "0.1.0"
