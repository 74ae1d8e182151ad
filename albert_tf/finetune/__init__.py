"""Fine-tuning: task data readers, metrics, task models, training, prediction and serving.

`finetune(FinetuneSettings(...))` trains and writes a fine-tuned directory (`albert-tf
finetune`); `load_finetuned` reads one back and `predict_file`/`predict_examples` run it;
`runtime_encoder` swaps in an int8 ONNX Runtime or TFLite encoder; `export_serving_model` writes
the strings-in serving SavedModel. The tasks are in `albert_tf.finetune.tasks`.
"""

from albert_tf.lazy import lazy_exports

_LAZY = {
    "FinetuneSettings": "albert_tf.finetune.settings",
    "finetune": "albert_tf.finetune.trainer",
    "FinetunedModel": "albert_tf.finetune.predict",
    "load_finetuned": "albert_tf.finetune.predict",
    "predict_examples": "albert_tf.finetune.predict",
    "predict_file": "albert_tf.finetune.predict",
    "runtime_encoder": "albert_tf.finetune.runtimes",
    "export_serving_model": "albert_tf.finetune.serving",
    "TaskModel": "albert_tf.finetune.models",
}

__all__ = [*_LAZY]
__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
