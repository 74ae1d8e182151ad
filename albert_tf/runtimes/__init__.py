"""Running models: exported files outside TensorFlow, and serving them.

- `cores`: a runner (numpy inputs by name in, numpy outputs by name out) and a runner spread
  over the cores (`in_chunks`, `across_cores`, `available_cores`);
- `ort`: ONNX Runtime sessions and their runners, and onnxruntime-extensions' operator library;
- `litert`: TFLite files run by LiteRT;
- `encoder`: an int8 encoder file called like the Keras encoder (`RuntimeEncoder`), which
  `albert-tf predict --runtime` runs a fine-tuned model's encoder in;
- `triton`: `albert-tf serve`: Triton with its Python-backend model, the environment it runs
  in, and the KServe v2 front over it.

This package runs files and writes none; what it runs is given to it. The writers
(`albert_tf.export`) check what they write with the runners here, so they stand above it and
it never imports them: `albert_tf.export.int8_encoder` exports the encoder to a file and loads
it with `encoder.load_encoder`; `albert_tf.export.triton.repository` writes the model
repository that `triton.layout` describes, with `triton.model` copied in; and the command line,
on top, hands what the writers wrote to the server (`albert-tf serve DIR`).

Importing the package loads numpy and the runner functions below; no runtime is imported until
a runner is made, and no TensorFlow (`encoder` imports it, `triton.front` imports aiohttp).
"""

from albert_tf.runtimes.cores import across_cores, available_cores, in_chunks
from albert_tf.runtimes.litert import tflite_interpreter, tflite_runner
from albert_tf.runtimes.ort import (
    onnx_runner,
    onnx_session,
    onnxruntime_extensions_library,
    require_onnxruntime,
    session_runner,
)

__all__ = [
    "available_cores",
    "in_chunks",
    "across_cores",
    "onnx_session",
    "session_runner",
    "onnx_runner",
    "onnxruntime_extensions_library",
    "require_onnxruntime",
    "tflite_interpreter",
    "tflite_runner",
]
