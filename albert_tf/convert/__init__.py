"""Converters from the original TF1, Hugging Face and keras-hub ALBERT checkpoints to ours.

`convert_*` write a checkpoint directory (`albert-tf convert`); `load_*` return the model in
memory; `config_from_hf` reads a Hugging Face `config.json` as an `AlbertConfig`.
"""

from albert_tf.lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    {
        ".tf1": "convert_tf1_checkpoint load_tf1_checkpoint",
        ".hf": "convert_hf_checkpoint load_hf_checkpoint config_from_hf",
        ".keras_hub": "convert_keras_hub_preset read_keras_hub_preset",
    },
    globals(),
)
