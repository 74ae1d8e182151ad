"""`tf.distribute` strategies by name, and which worker is the chief.

- "default": the default strategy (one device: the GPU if any, else the CPU).
- "mirrored": MirroredStrategy over all local GPUs (or all logical CPU devices if no GPU).
- "multi_worker": MultiWorkerMirroredStrategy; the cluster comes from the TF_CONFIG environment
  variable (`{"cluster": {"worker": ["host:port", ...]}, "task": {"type": "worker", "index": i}}`),
  and every worker runs the same command. Worker 0 is the chief: it writes checkpoints, summaries
  and progress; the others save their (identical) checkpoints to a scratch directory.
- "tpu": TPUStrategy on the TPU named by `tpu` (a Cloud TPU name, a grpc:// address, or "local"
  on a TPU VM), connected through TPUClusterResolver. Data and output must then live on GCS.
"""

from __future__ import annotations

import json
import os

import tensorflow as tf

from albert_tf.errors import ConfigError

STRATEGIES = ("default", "mirrored", "multi_worker", "tpu")


def make_strategy(name: str = "default", tpu: str | None = None) -> tf.distribute.Strategy:
    """Builds the named strategy (see the module docstring); ConfigError for a bad setup."""
    if name not in STRATEGIES:
        raise ConfigError(f"strategy {name!r} is not one of {', '.join(STRATEGIES)}")
    if name == "default":
        return tf.distribute.get_strategy()
    if name == "mirrored":
        devices = [d.name for d in tf.config.list_logical_devices("GPU")]
        if not devices:
            devices = [d.name for d in tf.config.list_logical_devices("CPU")]
        return tf.distribute.MirroredStrategy(devices=devices)
    if name == "multi_worker":
        if "TF_CONFIG" not in os.environ:
            raise ConfigError("--strategy multi_worker needs the TF_CONFIG environment variable")
        try:
            json.loads(os.environ["TF_CONFIG"])
        except ValueError as e:
            raise ConfigError(f"TF_CONFIG is not valid JSON: {e}") from None
        return tf.distribute.MultiWorkerMirroredStrategy()
    if not tpu:
        raise ConfigError("--strategy tpu needs --tpu NAME (a TPU name, grpc:// address or local)")
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)
    if tpu != "local":
        tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    return tf.distribute.TPUStrategy(resolver)


def device_type(strategy: tf.distribute.Strategy) -> str:
    """ "TPU", "GPU" or "CPU": the kind of device the strategy's replicas run on."""
    if isinstance(strategy, tf.distribute.TPUStrategy):
        return "TPU"
    return "GPU" if tf.config.list_logical_devices("GPU") else "CPU"


def is_chief(strategy: tf.distribute.Strategy) -> bool:
    """True on the worker that writes outputs (always, except on non-zero multi-worker tasks)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy) or resolver is None:
        return True
    task_type, task_id = resolver.task_type, resolver.task_id
    return task_type in (None, "chief") or (task_type == "worker" and task_id == 0)
