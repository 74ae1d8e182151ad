"""ALBERT ("A Lite BERT") for TensorFlow 2 and tf_keras, with TF-Hub export."""

from albert_tf.config import PRESETS, AlbertConfig, resolve_config
from albert_tf.errors import AlbertError

__all__ = ["PRESETS", "AlbertConfig", "AlbertError", "resolve_config"]
__version__ = "0.1.0"
