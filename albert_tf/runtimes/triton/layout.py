"""A Triton model repository of an albert-tf fine-tune, as its writer and its server agree on it.

`albert-tf export --finetuned DIR --triton` (`albert_tf.export.triton.repository`) writes
`DIR/triton/`, and `albert-tf serve DIR [DIR ...]` (`albert_tf.runtimes.triton.server`) serves
it; a stock Triton server loads it too (Triton's containers run it on many machines):

    triton/
      classifier/          the model's folder: `classifier`, `squad` or `regressor` by task
        config.pbtxt       the Python backend; dynamic batching, a bounded queue, CPU instances
                           and ONNX Runtime's thread counts, each set explicitly
        1/
          model.py         albert_tf.runtimes.triton.model: ONNX Runtime in process
          model.onnx       the int8 raw-string model (tokenizer inside)
      report.json          the task, inputs and labels, and the served model's agreement with
                           `predict` on probe texts

Clients send BYTES [n, 1], Triton's shape for a model that it batches (`albert-tf serve` also
takes and gives the [n] shapes), and get one row per text (`served_outputs`):

- a classifier: `text` (and `text_pair` for a pair task) in; `label` BYTES [n, 1] and
  `probabilities` FP32 [n, k] out;
- regression: `text` (and `text_pair`) in; `value` FP32 [n, 1] out;
- SQuAD: `question` and `context` in; `answer` BYTES, `char_start`, `char_end` INT32 (the
  answer's characters in the context, -1 for no answer) and `null_score_diff` FP32, [n, 1]
  each, out.

The pytriton wheel's Triton ships the Python backend alone, not Triton's ONNX Runtime backend,
so the model runs in the Python backend.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from albert_tf.errors import ExportError
from albert_tf.runtimes.cores import available_cores

MODEL_NAME = "classifier"
# The model's folder in the repository, by fine-tuning task (`FinetuneSettings.task`).
MODEL_NAMES = {"classify": MODEL_NAME, "regress": "regressor", "squad": "squad"}
VERSION = "1"
CONFIG_FILE = "config.pbtxt"
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
    return ServingConfig(intra_op_threads=max(1, available_cores() // INSTANCES))


def served_outputs(task: str, num_labels: int = 0) -> list[tuple[str, str, int]]:
    """The outputs of a served model of `task` ("classify", "regress" or "squad"), in order:
    (name, KServe v2 datatype, values per text). One value per text is shaped as the request's
    texts ([n] or [n, 1]), k of them [n, k]."""
    if task == "squad":
        return [
            ("answer", "BYTES", 1),
            ("char_start", "INT32", 1),
            ("char_end", "INT32", 1),
            ("null_score_diff", "FP32", 1),
        ]
    if task == "regress":
        return [("value", "FP32", 1)]
    return [("label", "BYTES", 1), ("probabilities", "FP32", num_labels)]


# KServe v2's datatypes as Triton's configuration names them.
TRITON_TYPES = {"BYTES": "TYPE_STRING", "FP32": "TYPE_FP32", "INT32": "TYPE_INT32"}


def config_pbtxt(
    name: str,
    inputs: list[str],
    num_labels: int,
    config: ServingConfig,
    nul_substitute: str = "",
    task: str = "classify",
) -> str:
    """The text of `config.pbtxt` for model `name` of `task` with string `inputs` (and
    `num_labels` for a classifier), its outputs `served_outputs`."""
    tensors = ",\n".join(f'  {{ name: "{n}" data_type: TYPE_STRING dims: [ 1 ] }}' for n in inputs)
    outputs = ",\n".join(
        f'  {{ name: "{n}" data_type: {TRITON_TYPES[kind]} dims: [ {width} ] }}'
        for n, kind, width in served_outputs(task, num_labels)
    )
    parameters = dict(
        task=task,
        intra_op_threads=config.intra_op_threads,
        inter_op_threads=config.inter_op_threads,
        nul_substitute=f"{ord(nul_substitute):x}" if nul_substitute else "",
    )
    lines = [
        f'name: "{name}"',
        'backend: "python"',
        f"max_batch_size: {config.max_batch_size}",
        f"input [\n{tensors}\n]",
        f"output [\n{outputs}\n]",
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


def model_folder(repository: Path) -> Path | None:
    """The model's folder of `repository` (the one of `MODEL_NAMES` holding `config.pbtxt`),
    None if it has none."""
    for name in MODEL_NAMES.values():
        if (repository / name / CONFIG_FILE).is_file():
            return repository / name
    return None


def find_repository(path: str | os.PathLike) -> Path:
    """The model repository of `path`: `path/triton` of a fine-tuned directory, or `path` itself
    when it holds a model's folder (`model_folder`). ExportError if neither."""
    path = Path(path)
    for candidate in (path / "triton", path):
        if model_folder(candidate) is not None:
            return candidate
    if not path.is_dir():
        raise ExportError(f"{path} is not a directory")
    raise ExportError(
        f"{path} holds no Triton model repository: write one with "
        f"`albert-tf export --finetuned {path} --triton`"
    )
