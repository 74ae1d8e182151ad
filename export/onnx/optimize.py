"""ONNX Runtime's fusions and int8 quantization of the encoder graph.

`fuse` runs ONNX Runtime's transformer optimizer (`model_type="bert"`), which turns the
canonical graph of `albert_tf.export.onnx.encoder` into EmbedLayerNormalization, Attention,
SkipLayerNormalization and FastGelu nodes (com.microsoft operators, ONNX Runtime only).
The optimizer gives every fused Attention node its own concatenated QKV weight, so layers that
share a block would each carry a copy; `share_equal_initializers` folds byte-equal
initializers back into one, which keeps ALBERT's cross-layer sharing in the file.

After the fusions, `split_for_cpu_kernels` rewrites two of them for ONNX Runtime's CPU kernels
(1.32), measured on the int8 encoder at batch 32 x 128 (AMD EPYC, AVX-512 VNNI, 2 threads):
- `SkipLayerNormalization` takes about 4x the time of a residual `Add` and a
  `LayerNormalization` (8.5 ms against 2.2 ms per [32, 128, 768] call, 13% of the encoder),
  so each becomes `Add` + `LayerNormalization` again. Both run on rows reshaped to [B*S, H]:
  ORT's own session-time SkipLayerNorm fusion matches 3-D inputs only and would undo the split
  in any session that loads the file with its default options;
- `FastGelu` with its bias input runs 3x slower than without one; the bias becomes an `Add`
  after the MatMul, which ORT folds into the int8 MatMul's bias (`DynamicQuantizeMatMul`).
Together: 1.23x the int8 encoder's throughput at batch 32 and 0.87x its batch-1 latency.

`quantize_dynamic_int8` stores weights as int8 and quantizes activations per call;
`quantize_static_int8` (QDQ) fixes activation scales from calibration batches. ORT's transformer
optimizer and its symbolic shape inference (which imports sympy) take about a second each to
import, so the one function that uses each imports it.
"""

from __future__ import annotations

import collections
import hashlib
import logging
import os
import tempfile
from collections.abc import Callable, Iterable

import numpy as np
import onnx
from onnx import numpy_helper
from onnxruntime.quantization import (
    CalibrationDataReader,
    QuantFormat,
    QuantType,
    quantize_dynamic,
    quantize_static,
)

FUSED_OPS = (
    "EmbedLayerNormalization",
    "Attention",
    "MultiHeadAttention",
    "SkipLayerNormalization",
    "FastGelu",
    "BiasGelu",
    "Gelu",
    "LayerNormalization",
)


def share_equal_initializers(model: onnx.ModelProto) -> int:
    """Points every use of a byte-equal duplicate initializer at the first one and removes the
    duplicates, in place; returns how many were removed."""
    graph = model.graph
    first: dict[tuple, str] = {}
    rename: dict[str, str] = {}
    kept = []
    for tensor in graph.initializer:
        digest = hashlib.sha256(numpy_helper.to_array(tensor).tobytes()).hexdigest()
        key = (tensor.data_type, tuple(tensor.dims), digest)
        if key in first:
            rename[tensor.name] = first[key]
        else:
            first[key] = tensor.name
            kept.append(tensor)
    if rename:
        del graph.initializer[:]
        graph.initializer.extend(kept)
        for node in graph.node:
            for i, name in enumerate(node.input):
                if name in rename:
                    node.input[i] = rename[name]
    return len(rename)


def op_counts(model: onnx.ModelProto) -> dict[str, int]:
    """Node count per operator type (sorted by name)."""
    return dict(sorted(collections.Counter(node.op_type for node in model.graph.node).items()))


def fuse(model: onnx.ModelProto, num_heads: int, hidden_size: int) -> onnx.ModelProto:
    """ONNX Runtime's BERT fusions on `model` (the python fusions only: `opt_level=0`, which
    also keeps the graph free of the machine-specific layouts ORT's own passes write)."""
    # start-up: the transformer optimizer takes most of a second to import; only fusing needs it
    from onnxruntime.transformers.optimizer import optimize_model

    # The optimizer warns that the producer is not "pytorch"; the BERT fusions match our
    # graph all the same (the counts land in report.json).
    logging.getLogger("onnxruntime.transformers.optimizer").setLevel(logging.ERROR)
    copy = onnx.ModelProto()
    copy.CopyFrom(model)  # the optimizer rewrites the graph it is given
    optimizer = optimize_model(
        copy, model_type="bert", num_heads=num_heads, hidden_size=hidden_size, opt_level=0
    )
    fused = optimizer.model
    if not any(opset.domain == "com.microsoft" for opset in fused.opset_import):
        fused.opset_import.append(onnx.helper.make_opsetid("com.microsoft", 1))
    split_for_cpu_kernels(fused, hidden_size)
    share_equal_initializers(fused)
    return fused


def split_for_cpu_kernels(model: onnx.ModelProto, hidden_size: int) -> None:
    """In place: every `SkipLayerNormalization` (input, skip, gamma, beta[, bias]) becomes
    `Add`(input, bias), `Add` of the skip and `LayerNormalization` on [B*S, H] rows, reshaped
    back to [B, S, H]; every `FastGelu`(x, bias) becomes `FastGelu`(`Add`(x, bias)). The module
    docstring says why. The [B*S, H] form of a split's output is reused where it is the next
    split's skip input, so a block adds two `Reshape`s, and the graph one `Shape`."""
    graph = model.graph
    rows = "cpu_split/rows_shape"
    graph.initializer.append(numpy_helper.from_array(np.array([-1, hidden_size], np.int64), rows))
    shape = None  # the [B, S, H] shape of the hidden states, taken once
    flat: dict[str, str] = {}  # a 3-D value -> its [B*S, H] form, where the graph has one
    nodes: list[onnx.NodeProto] = []

    def add(op: str, inputs: list[str], output: str, **attributes) -> str:
        nodes.append(onnx.helper.make_node(op, inputs, [output], name=output, **attributes))
        return output

    def to_rows(value: str, name: str) -> str:
        if value not in flat:
            flat[value] = add("Reshape", [value, rows], f"{name}/rows")
        return flat[value]

    for node in graph.node:
        inputs = list(node.input) + [""] * 5
        if node.op_type == "FastGelu" and inputs[1]:
            biased = add("Add", [inputs[0], inputs[1]], f"{node.name}/bias")
            del node.input[1:]
            node.input[0] = biased
            nodes.append(node)
        elif node.op_type == "SkipLayerNormalization":
            if any(node.output[1:]):
                raise ValueError(f"{node.name}: only the normalized output can be split")
            x, skip, gamma, beta, bias = inputs[:5]
            (epsilon,) = [a.f for a in node.attribute if a.name == "epsilon"]
            if bias:
                x = add("Add", [x, bias], f"{node.name}/bias")
            if shape is None:
                shape = add("Shape", [x], "cpu_split/hidden_shape")
            total = add(
                "Add",
                [to_rows(x, node.name), to_rows(skip, node.name + "/skip")],
                f"{node.name}/residual",
            )
            normed = add(
                "LayerNormalization",
                [total, gamma, beta],
                f"{node.name}/normalized",
                axis=-1,
                epsilon=epsilon,
            )
            add("Reshape", [normed, shape], node.output[0])
            flat[node.output[0]] = normed
        else:
            nodes.append(node)
    del graph.node[:]
    graph.node.extend(nodes)


class _WithoutPreprocessingAdvice(logging.Filter):
    """Drops ONNX Runtime's quantizers' advice, logged on the root logger at WARNING for every
    file, to run its model pre-processing (shape inference, graph optimization) first: the
    graphs here come out of ORT's transformer optimizer (`fuse`), and the advice reads like a
    fault to someone running `albert-tf export`."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Please consider")


def _through_files(model: onnx.ModelProto, quantize: Callable[[str, str], None]) -> onnx.ModelProto:
    """`quantize(source_path, target_path)` on `model` (ONNX Runtime's quantizers read and
    write files); the result with equal initializers shared."""
    advice = _WithoutPreprocessingAdvice()
    root = logging.getLogger()
    with tempfile.TemporaryDirectory() as work:
        source, target = os.path.join(work, "source.onnx"), os.path.join(work, "target.onnx")
        onnx.save(model, source)
        root.addFilter(advice)
        try:
            quantize(source, target)
        finally:
            root.removeFilter(advice)
        quantized = onnx.load(target)
    share_equal_initializers(quantized)
    return quantized


def quantize_dynamic_int8(model: onnx.ModelProto) -> onnx.ModelProto:
    """Dynamic int8 quantization: int8 weights (per tensor: per channel gave no better pooled
    cosine on the fixtures), activations quantized at run time (MatMulInteger, QAttention,
    QEmbedLayerNormalization)."""
    return _through_files(
        model,
        lambda source, target: quantize_dynamic(
            source,
            target,
            weight_type=QuantType.QInt8,
            # Shape inference knows no com.microsoft operator; every tensor here is float32.
            extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
        ),
    )


def quantize_static_int8(
    model: onnx.ModelProto, calibration: Iterable[dict[str, np.ndarray]]
) -> onnx.ModelProto:
    """Static int8 quantization in QDQ form: activation scales from `calibration` (encoder
    input dicts, int32 [B, S]) by MinMax, int8 weights per channel, uint8 activations.

    ONNX's shape inference knows no com.microsoft operator, and the quantizer leaves every
    activation it cannot type in float (the weights alone would be quantized); ORT's symbolic
    shape inference, which knows the fused operators, types them first."""
    # start-up: it imports sympy (a second or so); only quantizing a fused graph needs it
    from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self._batches = iter(calibration)

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self._batches, None)

    return _through_files(
        SymbolicShapeInference.infer_shapes(model, auto_merge=True),
        lambda source, target: quantize_static(
            source,
            target,
            Reader(),
            quant_format=QuantFormat.QDQ,
            per_channel=True,
            activation_type=QuantType.QUInt8,
            weight_type=QuantType.QInt8,
            op_types_to_quantize=["MatMul", "Attention", "Gemm"],
            extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
        ),
    )
