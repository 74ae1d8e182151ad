"""A fine-tuned classifier or regression as raw-string ONNX models beside its `serving/` SavedModel.

`export_classifier_onnx(finetuned_dir)` writes `finetuned_dir/onnx/`:

- for a classify task, `classifier.onnx` (float32 encoder) and `classifier_int8.onnx` (ONNX
  Runtime's fusions and dynamic int8 on the encoder; the head stays float32): input `text`
  (and `text_pair` for pair tasks) strings [B]; outputs as `serving/`'s signature: `label`
  string [B], `label_id` int32 [B], `probabilities` float32 [B, L], `logits` float32 [B, L];
- for a regress task, `regression.onnx` and `regression_int8.onnx`, the same two encoders:
  the same inputs; output `value` float32 [B], what `serving/` names `prediction` and
  `predict` writes as each record's "prediction";
- `report.json`: the task, how each file agrees with `serving/` on probe text (labels equal
  and the largest probability difference, or the largest value difference), the fused
  operators and the window settings (null without).

B = 0 is a batch too (`albert_tf.export.onnx.text.guard_empty_batch`). A SQuAD model's files
are `albert_tf.export.onnx.squad`'s; other tasks are refused (ExportError).

Tokenization and packing are `albert_tf.export.onnx.text`'s, padded to the batch's longest
text (at most the model's `max_seq_length`; padding is masked, so outputs are those of a
full-length batch within float rounding). A model
fine-tuned with `--max-windows` above 1 reads a long text as up to that many windows placed and
pooled as `serving/` does (`albert_tf.export.onnx.windows`, from finetune.json's window settings): the
encoder runs on the real windows of the batch, and the head pools their logits (a regression's
one output) per text.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the ops serving/ uses)
from onnx import TensorProto, helper

from albert_tf.errors import ExportError
from albert_tf.export.onnx import optimize
from albert_tf.export.onnx.encoder import OPSET, GraphBuilder, encoder_graph
from albert_tf.export.onnx.squad import describe_onnx_squad, write_onnx_squad
from albert_tf.export.onnx.text import TEXT_INPUTS, preprocess_graph, raw_string_models
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
REGRESSION_FILES = {"float32": "regression.onnx", "int8": "regression_int8.onnx"}
# What `export --finetuned DIR --onnx` writes raw-string models for (the refusal's words).
COVERED = (
    "ONNX export of fine-tuned models covers classify and regress tasks and SQuAD with "
    "ALBERT's SQuAD 2.0 head (the default on v2.0 data)"
)

# A head's graph outputs: (name, the value it names, dtype, shape).
Outputs = list[tuple[str, str, int, list[Any]]]


def _task_head(
    weights: tuple[np.ndarray, np.ndarray],
    hidden_size: int,
    windows: Windows | None,
    name: str,
    outputs: Callable[[GraphBuilder, str], Outputs],
) -> onnx.ModelProto:
    """The graph `name`: `pooled_output` float32 [B, H] -> the task head's logits [B, N]
    (`weights`: its kernel [H, N] and bias [N], `TaskHead.output_weights`) -> what
    `outputs(g, logits)` builds from them.

    With `windows`: `pooled_output` [W, H] of the real windows and `window_present` bool
    [B, K] in; the window logits are pooled into each text's (`windows.window_pooling`) first,
    as `Classify.forward` pools them for both tasks."""
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
    declared = []
    for output, value, dtype, dims in outputs(g, logits):
        g.nodes.append(helper.make_node("Identity", [value], [output], name=output))
        declared.append(helper.make_tensor_value_info(output, dtype, dims))
    graph = helper.make_graph(
        g.nodes, name, inputs + present, declared, initializer=list(g.initializers.values())
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    return model


def head_graph(
    weights: tuple[np.ndarray, np.ndarray],
    labels: list[str],
    hidden_size: int,
    windows: Windows | None = None,
) -> onnx.ModelProto:
    """A classifier's head (`_task_head`): `pooled_output` -> `label` string [B] (argmax;
    labels as `serving/` names them), `label_id` int32 [B], `probabilities`, `logits` [B, L]."""
    num_labels = int(weights[0].shape[1])

    def outputs(g: GraphBuilder, logits: str) -> Outputs:
        label_id = g.node("ArgMax", [logits], "head", axis=-1, keepdims=0)  # int64 [B]
        names = g.constant("head/labels", np.array(labels or [""], dtype=object), object)
        return [
            ("label", g.node("Gather", [names, label_id], "head"), TensorProto.STRING, ["batch"]),
            (
                "label_id",
                g.node("Cast", [label_id], "head", to=TensorProto.INT32),
                TensorProto.INT32,
                ["batch"],
            ),
            (
                "probabilities",
                g.node("Softmax", [logits], "head", axis=-1),
                TensorProto.FLOAT,
                ["batch", num_labels],
            ),
            ("logits", logits, TensorProto.FLOAT, ["batch", num_labels]),
        ]

    return _task_head(weights, hidden_size, windows, "albert_classifier_head", outputs)


def regression_head_graph(
    weights: tuple[np.ndarray, np.ndarray], hidden_size: int, windows: Windows | None = None
) -> onnx.ModelProto:
    """A regression's head (`_task_head`, one output): `pooled_output` -> `value` float32 [B],
    the (pooled) logit, as `Regress.outputs` takes it."""

    def outputs(g: GraphBuilder, logits: str) -> Outputs:
        axis = g.constant("head/axis_1", [1], np.int64)
        value = g.node("Squeeze", [logits, axis], "head")
        return [("value", value, TensorProto.FLOAT, ["batch"])]

    return _task_head(weights, hidden_size, windows, "albert_regression_head", outputs)


def classifier_graphs(
    finetuned: Any, encoders: dict[str, onnx.ModelProto]
) -> dict[str, onnx.ModelProto]:
    """The raw-string classifier (a regression's model for a regress task) around each of
    `encoders` (kind -> an encoder graph of `finetuned`'s encoder): strings -> the outputs of
    the module docstring, with `finetuned`'s tokenizer, sequence length, windows and head."""
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
    weights = model.task_head.output_weights()
    hidden_size = model.encoder.config.hidden_size
    if settings.task == "regress":
        head = regression_head_graph(weights, hidden_size, windows)
    else:
        head = head_graph(weights, list(settings.labels or []), hidden_size, windows)
    return raw_string_models(preprocess, head, encoders)


def check_exportable(task: Any) -> None:
    """ExportError unless `task` is a classifier (what the raw-string classifier computes)."""
    if task.settings.task != "classify":
        raise ExportError(
            "the raw-string ONNX classifier covers classify tasks; "
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

    Raises CheckpointError (not a fine-tuned model directory), ExportError (a task without
    raw-string ONNX models: `COVERED`).
    """
    finetuned_dir = Path(finetuned_dir)
    source = ExportSource(finetuned_dir=finetuned_dir, finetuned=load_finetuned(finetuned_dir))
    (writer,) = writers_named(FINETUNED_WRITERS, ["onnx"])
    return write_one(writer, source, finetuned_dir / writer.directory)


def _label_agreement(got: dict[str, np.ndarray], expected: dict[str, Any]) -> dict[str, Any]:
    """How a classifier's outputs `got` agree with serving/'s `expected` on the same texts."""
    want = np.array([s.decode() for s in expected["label"].numpy()], dtype=object)
    return dict(
        labels_equal=got["label"].tolist() == want.tolist(),
        label_agreement=float(np.mean(got["label"] == want)),
        probabilities_max_abs_diff=float(
            np.abs(got["probabilities"] - expected["probabilities"].numpy()).max()
        ),
    )


def _value_agreement(got: dict[str, np.ndarray], expected: dict[str, Any]) -> dict[str, Any]:
    """How a regression's `value` agrees with serving/'s `prediction` on the same texts."""
    return dict(
        values_max_abs_diff=float(np.abs(got["value"] - expected["prediction"].numpy()).max())
    )


def write_onnx_classifier(source: ExportSource, target: Path) -> dict[str, Any]:
    """The fine-tuned `onnx` writer (`albert_tf.export.writers`): the files of the module
    docstring for a classify or regress task (a SQuAD model's: `squad.write_onnx_squad`) into
    `target`, checked against the model's serving/ on `probe_texts`; returns the report.
    ExportError (`COVERED`) for any other task and for SQuAD with BERT's head."""
    finetuned = source.finetuned
    task = finetuned.task.settings.task
    if task == "squad":
        if not finetuned.task.albert_head:
            raise ExportError(f"{COVERED}; this one has --squad-head bert")
        return write_onnx_squad(source, target)
    if task not in ("classify", "regress"):
        raise ExportError(f"{COVERED}; this one is {task}")
    regression = task == "regress"
    settings = finetuned.task.settings
    config = finetuned.model.encoder.config
    num_segments = 2 if settings.has_pair else 1
    windows = Windows.of(settings)
    float32 = encoder_graph(finetuned.model.encoder)
    fused = optimize.fuse(float32, config.num_attention_heads, config.hidden_size)
    graphs = classifier_graphs(
        finetuned, {"float32": float32, "int8": optimize.quantize_dynamic_int8(fused)}
    )
    names = REGRESSION_FILES if regression else CLASSIFIER_FILES
    files = {names[kind]: graph for kind, graph in graphs.items()}

    inputs = probe_texts(num_segments)
    serving_dir = source.finetuned_dir / SERVING_DIR
    serving = tf.saved_model.load(str(serving_dir)).signatures["serving_default"]
    expected = serving(**{k: tf.constant(v.astype(str)) for k, v in inputs.items()})
    agree = _value_agreement if regression else _label_agreement
    report = {
        "task": task,
        "seq_length": settings.max_seq_length,
        "inputs": list(TEXT_INPUTS[:num_segments]),
        "outputs": [o.name for o in graphs["float32"].graph.output],
        "labels": None if regression else list(settings.labels or []),
        "windows": windows.record() if windows else None,
        "fused_ops": {
            op: n for op, n in optimize.op_counts(fused).items() if op in optimize.FUSED_OPS
        },
        # What serving/ computes in (fine-tuning's resolved --dtype); the ONNX files compute
        # in float32 (and int8), so a bfloat16 model's float32 file differs by bfloat16 rounding.
        "serving_dtype": finetuned.record.dtype,
        "against_serving": {
            name: agree(run(session(model), inputs), expected) for name, model in files.items()
        },
    }
    return save_models(target, files, report)


def describe_onnx_classifier(path: Path, report: dict[str, Any]) -> list[str]:
    """The fine-tuned `onnx` writer's lines for `albert-tf export`."""
    if report.get("task") == "squad":
        return describe_onnx_squad(path, report)
    return [f"wrote {path}: fused {report['fused_ops']}", *agreement_lines(report)]
