"""The encoder as an ONNX graph, written node by node from the checkpoint's weights.

The graph has the TF-Hub contract's names: inputs `input_word_ids`, `input_mask`,
`input_type_ids` (int32 [batch, sequence]), outputs `pooled_output` float32 [batch, H] and
`sequence_output` float32 [batch, sequence, H]. Batch and sequence are free dimensions
(sequence at most `max_position_embeddings`).

It uses only standard ONNX operators (opset 17, for `LayerNormalization`), in the shape the
exporters of BERT give, because that is what ONNX Runtime's transformer optimizer
(`onnxruntime.transformers.optimizer.optimize_model(model_type="bert")`) recognizes and fuses:

- embeddings: `Gather` word + `Gather` token type + `Gather` position, `Add`s,
  `LayerNormalization` (width E), then ALBERT's `embedding_hidden_mapping_in` (E -> H) as
  `MatMul` + `Add` when E != H;
- attention: `MatMul` + `Add` for each of query, key and value, `Reshape` to [B, S, N, D] and
  `Transpose`, `MatMul` of Q and K^T, `Div` by sqrt(D), `Add` of the mask bias
  `(1 - Cast(Unsqueeze(Unsqueeze(mask)))) * -10000`, `Softmax`, `MatMul` with V, `Transpose`,
  `Reshape`, output `MatMul` + `Add`, residual `Add`, `LayerNormalization` (eps 1e-12);
- feed-forward: `MatMul` + `Add`, the activation (`hidden_act`; ALBERT's "gelu" is the tanh
  approximation, written as the `Pow`/`Tanh` pattern the FastGelu fusion matches), `MatMul` +
  `Add`, residual `Add`, `LayerNormalization`;
- pooler: `Gather` of position 0, `MatMul` + `Add`, `Tanh`.

Cross-layer sharing stays visible: a block used by several layers reads the same initializers
each time, so the file holds each shared weight once.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from albert_tf.activations import GELU_TANH_COEFF, GELU_TANH_CUBIC
from albert_tf.export.encoder import ENCODER_INPUTS
from albert_tf.layers.attention import MASK_LOGIT
from albert_tf.layers.embeddings import LAYER_NORM_EPSILON

OPSET = 17
ENCODER_OUTPUTS = ("pooled_output", "sequence_output")


class GraphBuilder:
    """Collects nodes and initializers; names every intermediate value uniquely."""

    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: dict[str, onnx.TensorProto] = {}
        self._weights: dict[int, str] = {}
        self._count = 0

    def constant(self, name: str, value: Any, dtype: Any = np.float32) -> str:
        """An initializer holding `value` (named `name`, which must be new); returns the name."""
        if name in self.initializers:
            raise ValueError(f"initializer {name} written twice")
        self.initializers[name] = numpy_helper.from_array(np.asarray(value, dtype), name)
        return name

    def weight(self, variable: Any) -> str:
        """The initializer of a TF variable, written once however often a layer reuses it."""
        key = id(variable)
        if key not in self._weights:
            name = variable.name.split(":")[0]
            self._weights[key] = self.constant(name, variable.numpy())
        return self._weights[key]

    def node(self, op: str, inputs: list[str], prefix: str, **attributes: Any) -> str:
        """Appends one node with one output; returns the output's name."""
        return self.multi_node(op, inputs, prefix, 1, **attributes)[0]

    def multi_node(
        self,
        op: str,
        inputs: list[str],
        prefix: str,
        outputs: int,
        domain: str = "",
        **attributes: Any,
    ) -> list[str]:
        """Appends one node with `outputs` outputs (of operator `op` in `domain`); returns
        their names."""
        self._count += 1
        name = f"{prefix}/{op}_{self._count}"
        names = [name] if outputs == 1 else [f"{name}:{i}" for i in range(outputs)]
        self.nodes.append(
            helper.make_node(op, inputs, names, name=name, domain=domain, **attributes)
        )
        return names


def _dense(g: GraphBuilder, x: str, layer: Any, prefix: str) -> str:
    """x [..., in] @ kernel [in, out] + bias [out] -> [..., out]."""
    product = g.node("MatMul", [x, g.weight(layer.kernel)], prefix)
    return g.node("Add", [product, g.weight(layer.bias)], prefix)


def _layer_norm(g: GraphBuilder, x: str, norm: Any, prefix: str) -> str:
    return g.node(
        "LayerNormalization",
        [x, g.weight(norm.gamma), g.weight(norm.beta)],
        prefix,
        axis=-1,
        epsilon=LAYER_NORM_EPSILON,
    )


def _activation(g: GraphBuilder, x: str, name: str, prefix: str) -> str:
    """`hidden_act` on x, in the operator patterns ORT's fusions recognize."""
    if name in ("gelu", "gelu_new"):
        # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))): the FastGelu pattern.
        cube = g.node("Pow", [x, "const/three"], prefix)
        inner = g.node("Add", [x, g.node("Mul", [cube, "const/gelu_cubic"], prefix)], prefix)
        tanh = g.node("Tanh", [g.node("Mul", [inner, "const/gelu_coeff"], prefix)], prefix)
        one_plus = g.node("Add", [tanh, "const/one"], prefix)
        return g.node("Mul", [g.node("Mul", [x, "const/half"], prefix), one_plus], prefix)
    if name in ("gelu_exact", "gelu_python"):
        # 0.5 x (1 + erf(x / sqrt(2))): the Gelu pattern.
        erf = g.node("Erf", [g.node("Div", [x, "const/sqrt_two"], prefix)], prefix)
        one_plus = g.node("Add", [erf, "const/one"], prefix)
        return g.node("Mul", [g.node("Mul", [x, one_plus], prefix), "const/half"], prefix)
    if name == "relu":
        return g.node("Relu", [x], prefix)
    if name == "swish":
        return g.node("Mul", [x, g.node("Sigmoid", [x], prefix)], prefix)
    raise ValueError(f"no ONNX form for hidden_act {name!r}")


def _attention(g: GraphBuilder, x: str, bias: str, attention: Any, prefix: str) -> str:
    """Multi-head self-attention on x [B, S, H] with the additive mask `bias` [B, 1, 1, S]."""

    def heads(t: str, perm: list[int]) -> str:
        split = g.node("Reshape", [t, "const/heads_shape"], prefix)  # [B, S, N, D]
        return g.node("Transpose", [split], prefix, perm=perm)

    q = heads(_dense(g, x, attention.query, prefix), [0, 2, 1, 3])  # [B, N, S, D]
    k = heads(_dense(g, x, attention.key, prefix), [0, 2, 3, 1])  # [B, N, D, S]
    v = heads(_dense(g, x, attention.value, prefix), [0, 2, 1, 3])  # [B, N, S, D]
    logits = g.node("Div", [g.node("MatMul", [q, k], prefix), "const/sqrt_head_size"], prefix)
    probs = g.node("Softmax", [g.node("Add", [logits, bias], prefix)], prefix, axis=-1)
    context = g.node("MatMul", [probs, v], prefix)  # [B, N, S, D]
    context = g.node("Transpose", [context], prefix, perm=[0, 2, 1, 3])  # [B, S, N, D]
    context = g.node("Reshape", [context, "const/hidden_shape"], prefix)  # [B, S, H]
    return _dense(g, context, attention.output_dense, prefix)


def _add_constants(g: GraphBuilder, config: Any) -> None:
    """The shared constants (`const/...`) the encoder's nodes read, in a fixed order."""
    g.constant("const/one", 1.0)
    if config.hidden_act in ("gelu", "gelu_new", "gelu_exact", "gelu_python"):
        g.constant("const/half", 0.5)
    if config.hidden_act in ("gelu", "gelu_new"):
        g.constant("const/three", 3.0)
        g.constant("const/gelu_cubic", GELU_TANH_CUBIC)
        g.constant("const/gelu_coeff", GELU_TANH_COEFF)
    if config.hidden_act in ("gelu_exact", "gelu_python"):
        g.constant("const/sqrt_two", math.sqrt(2.0))
    g.constant("const/sqrt_head_size", math.sqrt(config.head_size))
    g.constant("const/mask_logit", MASK_LOGIT)
    g.constant("const/heads_shape", [0, 0, config.num_attention_heads, config.head_size], np.int64)
    g.constant("const/hidden_shape", [0, 0, config.hidden_size], np.int64)
    g.constant("const/zero", 0, np.int64)
    g.constant("const/one_int", 1, np.int64)
    g.constant("const/axes_0", [0], np.int64)
    g.constant("const/axes_1", [1], np.int64)
    g.constant("const/zeros_1", [0], np.int64)
    g.constant("const/ones_1", [1], np.int64)
    g.constant("const/axes_2", [2], np.int64)


def _embeddings(g: GraphBuilder, encoder: Any) -> str:
    """Word + token type + position embeddings (width E), LayerNorm, then E -> H: [B, S, H]."""
    config = encoder.config
    word_ids, _, type_ids = ENCODER_INPUTS
    prefix = "embeddings"
    embeddings = encoder.embeddings
    x = g.node("Gather", [g.weight(embeddings.word_embeddings), word_ids], prefix)  # [B, S, E]
    types = g.node("Gather", [g.weight(embeddings.token_type_embeddings), type_ids], prefix)
    x = g.node("Add", [x, types], prefix)
    # Position ids as BERT's exporters write them: a [1, P] table of 0..P-1 sliced to S.
    seq_length = g.node(
        "Gather", [g.node("Shape", [word_ids], prefix), "const/one_int"], prefix, axis=0
    )
    seq_length = g.node("Unsqueeze", [seq_length, "const/axes_0"], prefix)  # [1]
    max_positions = config.max_position_embeddings
    g.constant("const/position_ids", np.arange(max_positions)[np.newaxis], np.int64)
    positions = g.node(
        "Slice",
        ["const/position_ids", "const/zeros_1", seq_length, "const/axes_1", "const/ones_1"],
        prefix,
    )  # [1, S]
    position_table = g.weight(embeddings.position_embeddings)
    x = g.node("Add", [x, g.node("Gather", [position_table, positions], prefix)], prefix)
    x = _layer_norm(g, x, embeddings.layer_norm, prefix)
    if encoder.embedding_projection is not None:
        x = _dense(g, x, encoder.embedding_projection, "embedding_hidden_mapping_in")
    return x


def encoder_graph(encoder: Any) -> onnx.ModelProto:
    """The ONNX model of `encoder` (an `AlbertEncoder`) in inference mode; see the module
    docstring for its inputs, outputs and operators."""
    config = encoder.config
    g = GraphBuilder()
    _add_constants(g, config)
    mask = ENCODER_INPUTS[1]
    x = _embeddings(g, encoder)  # [B, S, H]

    # The additive attention bias, [B, 1, 1, S]: 0 on tokens, -10000 on padding.
    prefix = "attention_bias"
    expanded = g.node("Unsqueeze", [mask, "const/axes_1"], prefix)  # [B, 1, S]
    expanded = g.node("Unsqueeze", [expanded, "const/axes_2"], prefix)  # [B, 1, 1, S]
    expanded = g.node("Cast", [expanded], prefix, to=TensorProto.FLOAT)
    bias = g.node(
        "Mul", [g.node("Sub", ["const/one", expanded], prefix), "const/mask_logit"], prefix
    )

    for layer, layer_blocks in enumerate(encoder.blocks):
        for inner, block in enumerate(layer_blocks):
            prefix = f"layer_{layer}/inner_{inner}"
            attended = _attention(g, x, bias, block.attention, prefix)
            x = _layer_norm(g, g.node("Add", [attended, x], prefix), block.attention_norm, prefix)
            ffn = block.ffn
            hidden = _dense(g, x, ffn.intermediate, prefix)  # [B, S, F]
            hidden = _activation(g, hidden, config.hidden_act, prefix)
            transformed = _dense(g, hidden, ffn.output_dense, prefix)
            x = _layer_norm(g, g.node("Add", [transformed, x], prefix), block.ffn_norm, prefix)
    g.nodes.append(helper.make_node("Identity", [x], ["sequence_output"], name="sequence_output"))

    first = g.node("Gather", [x, "const/zero"], "pooler", axis=1)  # [B, H]
    pooled = g.node("Tanh", [_dense(g, first, encoder.pooler, "pooler")], "pooler")
    g.nodes.append(helper.make_node("Identity", [pooled], ["pooled_output"], name="pooled_output"))

    batch_seq = ["batch", "sequence"]
    inputs = [
        helper.make_tensor_value_info(n, TensorProto.INT32, batch_seq) for n in ENCODER_INPUTS
    ]
    outputs = [
        helper.make_tensor_value_info(
            "pooled_output", TensorProto.FLOAT, ["batch", config.hidden_size]
        ),
        helper.make_tensor_value_info(
            "sequence_output", TensorProto.FLOAT, [*batch_seq, config.hidden_size]
        ),
    ]
    graph = helper.make_graph(
        g.nodes, "albert_encoder", inputs, outputs, initializer=list(g.initializers.values())
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="albert-tf"
    )
    model.ir_version = 8  # what onnxruntime 1.14+ loads; opset 17 needs IR 8
    onnx.checker.check_model(model)
    return model
