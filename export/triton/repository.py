"""A fine-tuned classifier as a Triton model repository: `export --finetuned DIR --triton`.

`DIR/triton/` is a model repository that a stock Triton server loads (`albert-tf serve DIR`
runs one here; Triton's containers run it on many machines):

    triton/
      classifier/
        config.pbtxt       the Python backend; dynamic batching, a bounded queue, CPU instances
                           and ONNX Runtime's thread counts, each set explicitly
        1/
          model.py         albert_tf.export.triton.model: ONNX Runtime in process
          model.onnx       the int8 raw-string classifier (tokenizer inside)
      report.json          agreement of the served model with `predict` on probe texts

Clients send `text` (and `text_pair` for a pair task) BYTES [n, 1], Triton's shape for a model
that it batches, and get `label` BYTES [n, 1] and `probabilities` FP32 [n, k]. (`albert-tf
serve` also takes and gives the [n] shapes.) The pytriton wheel's Triton ships the Python
backend alone, not Triton's ONNX Runtime backend, so the classifier runs in the Python backend.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import numpy as np

MODEL_NAME = "classifier"
VERSION = "1"
CONFIG_FILE = "config.pbtxt"
# A noncharacter, which no tokenizer trained on text holds: given to ONNX Runtime for a NUL
# when the model's tokenizer gives both the same ids (`nul_substitute`).
NUL_SUBSTITUTE = "\ufdd0"
# Model instances by default. One instance stalls a request for 500 ms now and then under
# dynamic batching (measured: p99 510 ms at concurrency 1, 536 ms at 8; 0 stalls over 780
# requests with two): Triton's batcher is woken by a request only if an instance is free, and
# the Python backend sends its responses before Triton marks the instance free, so a client
# that answers at once finds it busy and waits for the batcher's idle timeout.
INSTANCES = 2


@dataclasses.dataclass(frozen=True)
class ServingConfig:
    """What `config.pbtxt` sets.

    Attributes:
        max_batch_size: the most texts Triton's dynamic batcher gathers into one call (and the
            most one request may hold).
        max_queue_delay_us: how long the batcher waits for more requests, in microseconds. 0:
            a batch is what queued while the instance was busy, so a lone request waits for
            nothing (a wait is added to every request at low load, where batching gains none).
        max_queue_size: requests waiting beyond this many are refused at once (503).
        instances: model instances (processes), each with its own ONNX Runtime session. 2 by
            default (`INSTANCES`): with one, Triton 2.51's dynamic batcher leaves a request that
            arrives while the instance is still being released (the Python backend answers
            before it is) until its 500 ms idle wake-up; a second instance is always free then.
        intra_op_threads: ONNX Runtime threads of each instance (instances x threads <= cores).
        inter_op_threads: ONNX Runtime's inter-op threads of each instance.
        dynamic_batching: False serves each request alone (for comparisons).
    """

    max_batch_size: int = 64
    max_queue_delay_us: int = 0
    max_queue_size: int = 64
    instances: int = INSTANCES
    intra_op_threads: int = 1
    inter_op_threads: int = 1
    dynamic_batching: bool = True


def default_config() -> ServingConfig:
    """`INSTANCES` instances, sharing the cores this process may use (a thread each at least)."""
    from albert_tf.runtimes import available_cores

    return ServingConfig(intra_op_threads=max(1, available_cores() // INSTANCES))


def config_pbtxt(
    name: str,
    inputs: list[str],
    num_labels: int,
    config: ServingConfig,
    nul_substitute: str = "",
) -> str:
    """The text of `config.pbtxt` for model `name` with string `inputs` and `num_labels`."""
    tensors = ",\n".join(f'  {{ name: "{n}" data_type: TYPE_STRING dims: [ 1 ] }}' for n in inputs)
    parameters = dict(
        intra_op_threads=config.intra_op_threads,
        inter_op_threads=config.inter_op_threads,
        nul_substitute=f"{ord(nul_substitute):x}" if nul_substitute else "",
    )
    lines = [
        f'name: "{name}"',
        'backend: "python"',
        f"max_batch_size: {config.max_batch_size}",
        f"input [\n{tensors}\n]",
        "output [",
        '  { name: "label" data_type: TYPE_STRING dims: [ 1 ] },',
        f'  {{ name: "probabilities" data_type: TYPE_FP32 dims: [ {num_labels} ] }}',
        "]",
        f"instance_group [ {{ kind: KIND_CPU count: {config.instances} }} ]",
    ]
    if config.dynamic_batching:
        lines += [
            "dynamic_batching {",
            f"  max_queue_delay_microseconds: {config.max_queue_delay_us}",
            "  default_queue_policy {",
            f"    max_queue_size: {config.max_queue_size}",
            "    timeout_action: REJECT",
            "  }",
            "}",
        ]
    lines += [
        f'parameters {{ key: "{key}" value: {{ string_value: "{value}" }} }}'
        for key, value in parameters.items()
    ]
    return "\n".join(lines) + "\n"


def nul_substitute(tokenizer: Any) -> str:
    """`NUL_SUBSTITUTE` if `tokenizer` (an `AlbertTokenizer`) gives it the ids of a NUL in
    every probe position (alone, inside, beside spaces and digits, runs), else ""."""
    probes = ["\x00", "a\x00b", "a \x00 b", "\x00\x00a", "1,\x00", "x\x00\u00e9", "\x00 \x00"]
    for probe in probes:
        if tokenizer.encode(probe) != tokenizer.encode(probe.replace("\x00", NUL_SUBSTITUTE)):
            return ""
    return NUL_SUBSTITUTE


def _predict_probabilities(finetuned: Any, texts: dict[str, list[str]]) -> np.ndarray:
    """`predict`'s probabilities [n, k] of `texts`, read from a TSV file as `predict` reads one."""
    import tempfile

    from albert_tf.finetune.predict import load_examples, predict_examples

    names = list(texts)
    rows = zip(*(texts[n] for n in names), strict=True)
    with tempfile.TemporaryDirectory(prefix="albert-tf-triton-") as tmp:
        path = Path(tmp) / "probes.tsv"
        lines = ["\t".join(names)] + ["\t".join(row) for row in rows]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        columns = dict(text_column=names[0], quoting="none")
        if len(names) == 2:
            columns["text_pair_column"] = names[1]
        records, _ = predict_examples(finetuned, load_examples(finetuned, str(path), **columns))
    labels = list(finetuned.settings.labels)
    return np.array([[r["probabilities"][label] for label in labels] for r in records])


def probe_texts(inputs: list[str]) -> dict[str, list[str]]:
    """Probe texts for the agreement report: prose and long topics (`classifier.probe_texts`),
    one line each, and texts with NULs."""
    from albert_tf.export.onnx.classifier import probe_texts as prose

    flat = {n: [" ".join(t.split()) for t in v] for n, v in prose(len(inputs)).items()}
    nuls = ["a\x00b", "the \x00 film", "\x00"]
    return {n: flat[n] + (nuls if i == 0 else nuls[::-1]) for i, n in enumerate(inputs)}


def write_triton(source: Any, target: Path) -> dict[str, Any]:
    """The fine-tuned `triton` writer (`albert_tf.export.writers`): the repository of the
    module docstring into `target`; returns the report (agreement with `predict`)."""
    import shutil

    import onnx

    from albert_tf.export.onnx import optimize
    from albert_tf.export.onnx.classifier import check_exportable, classifier_graphs
    from albert_tf.export.onnx.encoder import encoder_graph
    from albert_tf.export.triton import model as served

    finetuned = source.finetuned
    check_exportable(finetuned.task)
    settings = finetuned.settings
    config = finetuned.model.encoder.config
    fused = optimize.fuse(
        encoder_graph(finetuned.model.encoder), config.num_attention_heads, config.hidden_size
    )
    (graph,) = classifier_graphs(
        finetuned, {"int8": optimize.quantize_dynamic_int8(fused)}
    ).values()
    inputs = ["text", "text_pair"][: 2 if settings.has_pair else 1]
    labels = list(settings.labels or [])
    version = target / MODEL_NAME / VERSION
    version.mkdir(parents=True)
    onnx.save(graph, str(version / served.MODEL_FILE))
    shutil.copyfile(served.__file__, version / "model.py")
    substitute = nul_substitute(finetuned.tokenizer)
    serving = default_config()
    (target / MODEL_NAME / CONFIG_FILE).write_text(
        config_pbtxt(MODEL_NAME, inputs, len(labels), serving, substitute), encoding="utf-8"
    )
    classifier = served.Classifier(version / served.MODEL_FILE, 1, 1, substitute)
    texts = probe_texts(inputs)
    if not substitute:  # NULs are refused (400), not compared
        texts = {n: [t.replace("\x00", " ") for t in v] for n, v in texts.items()}
    got = classifier(classifier.texts(texts))
    want = _predict_probabilities(finetuned, texts)
    want_labels = [labels[i] for i in want.argmax(axis=1)]
    return {
        "model": MODEL_NAME,
        "inputs": inputs,
        "labels": labels,
        "max_seq_length": settings.max_seq_length,
        "nul": f"given to ONNX Runtime as U+{ord(substitute):04X}" if substitute else "refused",
        "nul_substitute": f"{ord(substitute):x}" if substitute else "",
        "config": dataclasses.asdict(serving),
        "against_predict": dict(
            texts=len(want_labels),
            labels_equal=[str(x) for x in got["label"]] == want_labels,
            probabilities_max_abs_diff=float(np.abs(got["probabilities"] - want).max()),
        ),
        "bytes": (version / served.MODEL_FILE).stat().st_size,
    }


def find_repository(path: str | os.PathLike) -> Path:
    """The model repository of `path`: `path/triton` of a fine-tuned directory, or `path` itself
    when it holds `*/config.pbtxt`. ExportError if neither."""
    from albert_tf.errors import ExportError

    path = Path(path)
    for candidate in (path / "triton", path):
        if (candidate / MODEL_NAME / CONFIG_FILE).is_file():
            return candidate
    if not path.is_dir():
        raise ExportError(f"{path} is not a directory")
    raise ExportError(
        f"{path} holds no Triton model repository: write one with "
        f"`albert-tf export --finetuned {path} --triton`"
    )


def describe_triton(path: Path, report: dict[str, Any]) -> list[str]:
    """The `triton` writer's lines for `albert-tf export` (`albert_tf.export.writers`)."""
    agreement = report["against_predict"]
    return [
        f"wrote {path}: labels equal to predict's on {agreement['texts']} probe texts: "
        f"{agreement['labels_equal']}, probabilities within "
        f"{agreement['probabilities_max_abs_diff']:.1e}"
    ]
