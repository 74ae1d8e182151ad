"""A fine-tuned classifier as raw-string ONNX models beside its `serving/` SavedModel.

`export_classifier_onnx(finetuned_dir)` writes `finetuned_dir/onnx/`:

- `classifier.onnx` (float32 encoder) and `classifier_int8.onnx` (ONNX Runtime's fusions and
  dynamic int8 on the encoder; the head stays float32): input `text` (and `text_pair` for
  pair tasks) strings [B]; outputs as `serving/`'s signature: `label` string [B], `label_id`
  int32 [B], `probabilities` float32 [B, L], `logits` float32 [B, L] (B = 0 included:
  `albert_tf.export.onnx.text.guard_empty_batch`);
- `report.json`: how each file agrees with `serving/` on probe text (labels equal, largest
  probability difference), the fused operators and the window settings (null without).

Tokenization and packing are `albert_tf.export.onnx.text`'s, padded to the batch's longest
text (at most the model's `max_seq_length`; padding is masked, so outputs are those of a
full-length batch within float rounding). A model
fine-tuned with `--max-windows` above 1 reads a long text as up to that many windows placed and
pooled as `serving/` does (`albert_tf.export.onnx.windows`, from finetune.json's window settings): the
encoder runs on the real windows of the batch, and the head pools their logits per text.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the ops serving/ uses)
from onnx import TensorProto, compose, helper

from albert_tf.errors import ExportError
from albert_tf.export.onnx import optimize
from albert_tf.export.onnx.encoder import OPSET, GraphBuilder, encoder_graph
from albert_tf.export.onnx.squad import describe_onnx_squad, write_onnx_squad
from albert_tf.export.onnx.text import (
    TEXT_INPUTS,
    guard_empty_batch,
    preprocess_graph,
    with_preprocess,
)
from albert_tf.export.onnx.windows import WINDOW_PRESENT, Windows, pool_windows
from albert_tf.export.onnx.writer import run, save_models, session
from albert_tf.export.writers import (
    FINETUNED_WRITERS,
    ExportSource,
    agreement_lines,
    write_one,
    writers_named,
)
from albert_tf.finetune.directory import SERVING_DIR
from albert_tf.finetune.predict import load_finetuned
from albert_tf.preprocess.corpus import probe_sentences, pydoc_topic_documents

CLASSIFIER_FILES = {"float32": "classifier.onnx", "int8": "classifier_int8.onnx"}
SERVING_OUTPUTS = ("label", "label_id", "probabilities", "logits")


def head_graph(
    weights: tuple[np.ndarray, np.ndarray],
    labels: list[str],
    hidden_size: int,
    windows: Windows | None = None,
) -> onnx.ModelProto:
    """`pooled_output` float32 [B, H] -> `logits`, `probabilities` [B, L], `label_id` int32
    [B], `label` string [B] (argmax; labels as `serving/` names them). `weights`: the task
    head's kernel [H, L] and bias [L] (`TaskHead.output_weights`).

    With `windows`: `pooled_output` [W, H] of the real windows and `window_present` bool
    [B, K] in; the window logits are pooled into each text's (`windows.window_pooling`) first."""
    g = GraphBuilder()
    kernel = g.constant("task_head/dense/kernel", weights[0])
    bias = g.constant("task_head/dense/bias", weights[1])
    logits = g.node("Add", [g.node("MatMul", ["pooled_output", kernel], "head"), bias], "head")
    rows, present = "batch", []
    if windows is not None:
        logits = pool_windows(g, logits, WINDOW_PRESENT, windows.window_pooling, "head/pool")
        rows, shape = "windows", ["batch", windows.max_windows]
        present = [helper.make_tensor_value_info(WINDOW_PRESENT, TensorProto.BOOL, shape)]
    inputs = [
        helper.make_tensor_value_info("pooled_output", TensorProto.FLOAT, [rows, hidden_size])
    ]
    probabilities = g.node("Softmax", [logits], "head", axis=-1)
    label_id = g.node("ArgMax", [logits], "head", axis=-1, keepdims=0)  # int64 [B]
    names = g.constant("head/labels", np.array(labels or [""], dtype=object), object)
    label = g.node("Gather", [names, label_id], "head")
    for name, value in (
        ("logits", logits),
        ("probabilities", probabilities),
        ("label_id", g.node("Cast", [label_id], "head", to=TensorProto.INT32)),
        ("label", label),
    ):
        g.nodes.append(helper.make_node("Identity", [value], [name], name=name))
    num_labels = int(weights[0].shape[1])
    graph = helper.make_graph(
        g.nodes,
        "albert_classifier_head",
        inputs + present,
        [
            helper.make_tensor_value_info("label", TensorProto.STRING, ["batch"]),
            helper.make_tensor_value_info("label_id", TensorProto.INT32, ["batch"]),
            helper.make_tensor_value_info(
                "probabilities", TensorProto.FLOAT, ["batch", num_labels]
            ),
            helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", num_labels]),
        ],
        initializer=list(g.initializers.values()),
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    return model


def classifier_graphs(
    finetuned: Any, encoders: dict[str, onnx.ModelProto]
) -> dict[str, onnx.ModelProto]:
    """The raw-string classifier around each of `encoders` (kind -> an encoder graph of
    `finetuned`'s encoder): strings -> the serving outputs, with `finetuned`'s tokenizer,
    sequence length, windows and head."""
    settings = finetuned.task.settings
    model = finetuned.model
    windows = Windows.of(settings)
    preprocess = preprocess_graph(
        finetuned.tokenizer,
        settings.max_seq_length,
        finetuned.tokenizer.do_lower_case,
        2 if settings.has_pair else 1,
        windows,
        pad_to_longest=True,
    )
    labels = list(settings.labels or [])
    head = head_graph(
        model.task_head.output_weights(), labels, model.encoder.config.hidden_size, windows
    )
    head = compose.add_prefix(head, "head/", rename_inputs=False, rename_outputs=False)
    graphs = {}
    for kind, encoder in encoders.items():
        merged = compose.merge_models(
            with_preprocess(preprocess, encoder),
            head,
            io_map=[(i.name, i.name) for i in head.graph.input],
        )
        # The outputs are chosen here, not by merge_models: given outputs, it extracts the
        # graph with onnx.utils.Extractor, which drops initializers only Loop bodies read (the
        # text graph's tokenizer tables). Every node still feeds a serving output.
        outputs = {o.name: o for o in merged.graph.output}
        del merged.graph.output[:]
        merged.graph.output.extend(outputs[name] for name in SERVING_OUTPUTS)
        graphs[kind] = guard_empty_batch(merged)
    return graphs


def check_exportable(task: Any) -> None:
    """ExportError unless `task` is a classifier."""
    if task.settings.task != "classify":
        raise ExportError(
            "ONNX export of fine-tuned models covers classify tasks; "
            f"this one is {task.settings.task}"
        )


def probe_texts(num_segments: int) -> dict[str, np.ndarray]:
    """English prose (pydoc help topics) as `text` (and `text_pair`): 16 sentences and 16
    whole topics of up to thousands of tokens, so that long texts fill every window."""
    sentences = probe_sentences(32)
    texts = sentences[:16] + [" ".join(doc) for _, doc in pydoc_topic_documents()][:16]
    inputs = {"text": np.array(texts, dtype=object)}
    if num_segments == 2:
        inputs["text_pair"] = np.array(sentences[16:32] + texts[16:][::-1], dtype=object)
    return inputs


def export_classifier_onnx(finetuned_dir: str | os.PathLike) -> dict[str, Any]:
    """Writes `finetuned_dir/onnx/` (see the module docstring) atomically; returns the report.

    Raises CheckpointError (not a fine-tuned model directory), ExportError (not a classifier).
    """
    finetuned_dir = Path(finetuned_dir)
    source = ExportSource(finetuned_dir=finetuned_dir, finetuned=load_finetuned(finetuned_dir))
    (writer,) = writers_named(FINETUNED_WRITERS, ["onnx"])
    return write_one(writer, source, finetuned_dir / writer.directory)


def write_onnx_classifier(source: ExportSource, target: Path) -> dict[str, Any]:
    """The fine-tuned `onnx` writer (`albert_tf.export.writers`): the classifiers of the module docstring
    into `target`, checked against the model's serving/; returns the report."""
    finetuned = source.finetuned
    if finetuned.task.settings.task == "squad":
        return write_onnx_squad(source, target)
    check_exportable(finetuned.task)
    settings = finetuned.task.settings
    config = finetuned.model.encoder.config
    num_segments = 2 if settings.has_pair else 1
    windows = Windows.of(settings)
    float32 = encoder_graph(finetuned.model.encoder)
    fused = optimize.fuse(float32, config.num_attention_heads, config.hidden_size)
    graphs = classifier_graphs(
        finetuned, {"float32": float32, "int8": optimize.quantize_dynamic_int8(fused)}
    )
    files = {CLASSIFIER_FILES[kind]: graph for kind, graph in graphs.items()}

    inputs = probe_texts(num_segments)
    serving_dir = source.finetuned_dir / SERVING_DIR
    serving = tf.saved_model.load(str(serving_dir)).signatures["serving_default"]
    expected = serving(**{k: tf.constant(v.astype(str)) for k, v in inputs.items()})
    agreement = {}
    for name, classifier in files.items():
        got = run(session(classifier), inputs)
        want_labels = [s.decode() for s in expected["label"].numpy()]
        agreement[name] = dict(
            labels_equal=got["label"].tolist() == want_labels,
            label_agreement=float(np.mean(got["label"] == np.array(want_labels, dtype=object))),
            probabilities_max_abs_diff=float(
                np.abs(got["probabilities"] - expected["probabilities"].numpy()).max()
            ),
        )
    report = {
        "seq_length": settings.max_seq_length,
        "inputs": list(TEXT_INPUTS[:num_segments]),
        "labels": list(settings.labels or []),
        "windows": windows.record() if windows else None,
        "fused_ops": {
            op: n for op, n in optimize.op_counts(fused).items() if op in optimize.FUSED_OPS
        },
        # What serving/ computes in (fine-tuning's resolved --dtype); the ONNX files compute
        # in float32 (and int8), so a bfloat16 model's float32 file differs by bfloat16 rounding.
        "serving_dtype": finetuned.record.dtype,
        "against_serving": agreement,
    }
    return save_models(target, files, report)


def describe_onnx_classifier(path: Path, report: dict[str, Any]) -> list[str]:
    """The fine-tuned `onnx` writer's lines for `albert-tf export`."""
    if report.get("task") == "squad":
        return describe_onnx_squad(path, report)
    return [f"wrote {path}: fused {report['fused_ops']}", *agreement_lines(report)]
