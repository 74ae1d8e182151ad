"""Fine-tuning: task data readers, metrics, task models, training, prediction and serving.

`finetune(FinetuneSettings(...))` trains and writes a fine-tuned directory (`albert-tf
finetune`); `load_finetuned` reads one back and `predict_file`/`predict_examples` run it
(`albert_tf.export.runtime_encoder` swaps in an int8 ONNX Runtime or TFLite encoder);
`export_serving_model` writes the strings-in serving SavedModel. The tasks are in `albert_tf.finetune.tasks`.
"""

from albert_tf.lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    {
        ".settings": "FinetuneSettings",
        ".trainer": "finetune",
        ".predict": "FinetunedModel load_finetuned predict_examples predict_file",
        ".serving": "export_serving_model",
        ".models": "TaskModel",
    },
    globals(),
)
