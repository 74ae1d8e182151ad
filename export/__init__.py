"""TF-Hub export: the encoder SavedModel (with `.mlm`), the bundle with the preprocessing
SavedModel, TFLite encoders, and loading an export back into a checkpoint directory.

`export_bundle` is `albert-tf export`: `encoder/`, `preprocess/`, and optionally `tflite/` and
`onnx/`. `save_encoder` writes the encoder SavedModel alone, `export_tflite` the TFLite files,
`export_onnx` the ONNX files (the `onnx` extra), `export_checkpoint_hf` / `export_finetuned_hf` a
Hugging Face transformers folder, `write_checkpoint_preset` / `export_finetuned_keras_hub` a
keras-hub preset (the `keras-hub` extra), `hub_to_checkpoint_dir` reads an exported encoder
back into a checkpoint directory, and `runtime_encoder` exports a fine-tuned model's encoder to
int8 ONNX Runtime or TFLite in memory (`albert-tf predict --runtime`).
"""

from albert_tf.lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    {
        ".bundle": "ExportedBundle export_bundle",
        ".encoder": "save_encoder",
        ".tflite": "export_tflite",
        ".onnx": "export_onnx",
        ".load": "hub_to_checkpoint_dir",
        ".hf": "export_checkpoint_hf export_finetuned_hf",
        ".keras_hub": "write_checkpoint_preset export_finetuned_keras_hub",
        ".keras_hub_tokenizer": "preset_tokenizer",
        ".int8_encoder": "runtime_encoder",
    },
    globals(),
)
