"""A fine-tuned model's encoder exported to int8 for another runtime and loaded there, in memory:
`albert-tf predict --runtime`.

The restored weights are exported in float32 to an int8 file in a temporary directory (ONNX
Runtime: `albert_tf.export.onnx`'s graph with ORT's BERT fusions and dynamic int8 quantization;
TFLite: `albert_tf.export.tflite`'s dynamic-range int8 file), which
`albert_tf.runtimes.encoder.load_encoder` loads: the runtime encoder that the task's forward pass
calls in place of the Keras one. The ONNX path needs the `onnx` extra and imports it.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from albert_tf.encoder import AlbertEncoder
from albert_tf.errors import ConfigError
from albert_tf.export.encoder import float32_copy
from albert_tf.export.tflite import tflite_converters
from albert_tf.runtimes.encoder import RuntimeEncoder, check_runtime, load_encoder


def runtime_encoder(
    encoder: Any, runtime: str, seq_length: int, threads: int | None = None
) -> RuntimeEncoder:
    """`encoder` (an `AlbertEncoder`) exported to int8 for `runtime` ("onnx" or "tflite") and
    loaded with `threads` threads (None: one per core the process may use, as TensorFlow
    does; the runners' own default, `albert_tf.runtimes.available_cores`). Both files take any
    sequence length up to `seq_length`, the model's (predict pads each batch to its longest
    text). Prints the export's duration on stderr."""
    check_runtime(runtime)
    if not isinstance(encoder, AlbertEncoder):
        raise ConfigError(
            f"--runtime {runtime} needs a model fine-tuned from an albert-tf checkpoint; this "
            "one wraps a TF-Hub encoder, which runs with --runtime tf"
        )
    start = time.perf_counter()
    encoder = float32_copy(encoder)
    with tempfile.TemporaryDirectory(prefix="albert-tf-runtime-") as tmp:
        path = Path(tmp) / f"encoder_int8.{runtime}"
        if runtime == "tflite":
            # Any length up to seq_length: predict pads each batch to its longest text.
            path.write_bytes(tflite_converters(encoder, None)["int8"].convert())
        else:
            import onnx

            from albert_tf.export.onnx import optimize
            from albert_tf.export.onnx.encoder import encoder_graph

            config = encoder.config
            fused = optimize.fuse(
                encoder_graph(encoder), config.num_attention_heads, config.hidden_size
            )
            onnx.save(optimize.quantize_dynamic_int8(fused), str(path))
        loaded = load_encoder(path, runtime, threads)
        # Both runtimes hold the model in memory (LiteRT maps the file: the mapping outlives
        # the name), so the directory can go.
    seconds = time.perf_counter() - start
    print(f"exported the encoder to int8 {runtime} in {seconds:.1f}s", file=sys.stderr)
    return loaded
