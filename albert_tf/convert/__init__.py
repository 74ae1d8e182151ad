"""Converters from the original TF1, Hugging Face and keras-hub ALBERT checkpoints to ours.

`convert_*` write a checkpoint directory (`albert-tf convert`); `load_*` return the model in
memory; `config_from_hf` reads a Hugging Face `config.json` as an `AlbertConfig`.
"""

from albert_tf.lazy import lazy_exports

_LAZY = {
    "convert_tf1_checkpoint": "albert_tf.convert.tf1",
    "load_tf1_checkpoint": "albert_tf.convert.tf1",
    "convert_hf_checkpoint": "albert_tf.convert.hf",
    "load_hf_checkpoint": "albert_tf.convert.hf",
    "config_from_hf": "albert_tf.convert.hf",
    "convert_keras_hub_preset": "albert_tf.convert.keras_hub",
    "read_keras_hub_preset": "albert_tf.convert.keras_hub",
}

__all__ = [*_LAZY]
__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
