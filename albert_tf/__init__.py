"""ALBERT ("A Lite BERT") for TensorFlow 2 and tf_keras, with TF-Hub export.

The public API: the names in `__all__`, and those of the subpackages' own `__all__`
(`albert_tf.layers`, `albert_tf.pretraining`, `albert_tf.finetune`, `albert_tf.finetune.tasks`,
`albert_tf.convert`, `albert_tf.quickstart`, `preprocess`, `preprocess.pretraining_data`,
`export`, `export.onnx`). The config and the errors are imported with the package; every other
name imports its module (and TensorFlow) on first use.
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

_LAZY = {
    "AlbertEncoder": "albert_tf.encoder",
    "AlbertPretrainingModel": "albert_tf.models",
    "MaskedLMHead": "albert_tf.heads",
    "SentenceOrderHead": "albert_tf.heads",
    "CheckpointDir": "albert_tf.checkpoint",
    "load_checkpoint_dir": "albert_tf.checkpoint",
    "load_pretrained": "albert_tf.pretrained",
    "save_checkpoint_dir": "albert_tf.checkpoint",
    "parameter_breakdown": "albert_tf.params",
    "AlbertTokenizer": "preprocess.tokenizer",
    "train_sentencepiece": "preprocess.spm_train",
    "create_pretraining_data": "preprocess.pretraining_data",
    "PretrainSettings": "albert_tf.pretraining.settings",
    "pretrain": "albert_tf.pretraining.trainer",
    "FinetuneSettings": "albert_tf.finetune.settings",
    "FinetunedModel": "albert_tf.finetune.predict",
    "load_finetuned": "albert_tf.finetune.predict",
    "convert_tf1_checkpoint": "albert_tf.convert.tf1",
    "convert_hf_checkpoint": "albert_tf.convert.hf",
    "export_bundle": "export.bundle",
    "run_quickstart": "albert_tf.quickstart",
}

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
__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
