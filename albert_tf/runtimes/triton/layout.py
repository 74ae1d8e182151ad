"""A Triton model repository of albert-tf's classifier, as its writer and its server agree on it.

`albert-tf export --finetuned DIR --triton` (`albert_tf.export.triton.repository`) writes
`DIR/triton/`, and `albert-tf serve DIR` (`albert_tf.runtimes.triton.server`) serves it; a stock
Triton server loads it too (Triton's containers run it on many machines):

    triton/
      classifier/
        config.pbtxt       the Python backend; dynamic batching, a bounded queue, CPU instances
                           and ONNX Runtime's thread counts, each set explicitly
        1/
          model.py         albert_tf.runtimes.triton.model: ONNX Runtime in process
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

from albert_tf.errors import ExportError
from albert_tf.runtimes.cores import available_cores

MODEL_NAME = "classifier"
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


def find_repository(path: str | os.PathLike) -> Path:
    """The model repository of `path`: `path/triton` of a fine-tuned directory, or `path` itself
    when it holds `*/config.pbtxt`. ExportError if neither."""
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
