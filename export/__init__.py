"""TF-Hub export: the encoder SavedModel (with `.mlm`), the bundle with the preprocessing
SavedModel, TFLite encoders, and loading an export back into a checkpoint directory.

`export_bundle` is `albert-tf export`: `encoder/`, `preprocess/`, and optionally `tflite/` and
`onnx/`. `save_encoder` writes the encoder SavedModel alone, `export_tflite` the TFLite files,
`export_onnx` the ONNX files (the `onnx` extra), `export_checkpoint_hf` / `export_finetuned_hf` a
Hugging Face transformers folder, `write_checkpoint_preset` / `export_finetuned_keras_hub` a
keras-hub preset (the `keras-hub` extra), and `hub_to_checkpoint_dir` reads an exported encoder
back into a checkpoint directory.
"""

from albert_tf.lazy import lazy_exports

_LAZY = {
    "ExportedBundle": "export.bundle",
    "export_bundle": "export.bundle",
    "save_encoder": "export.encoder",
    "export_tflite": "export.tflite",
    "export_onnx": "export.onnx",
    "hub_to_checkpoint_dir": "export.load",
    "export_checkpoint_hf": "export.hf",
    "export_finetuned_hf": "export.hf",
    "write_checkpoint_preset": "export.keras_hub",
    "export_finetuned_keras_hub": "export.keras_hub",
    "preset_tokenizer": "export.keras_hub_tokenizer",
}

__all__ = [*_LAZY]
__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
