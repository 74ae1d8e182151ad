"""Compute dtypes: which precision to train and run in, and the matching tf_keras policy.

One place decides what `--dtype auto` means, so pretraining, fine-tuning, prediction and the
benchmarks agree. Variables always stay float32; "bfloat16" and "float16" mean Keras mixed
precision (`mixed_bfloat16` / `mixed_float16`), and float16 training needs loss scaling.
TensorFlow is imported inside the functions that use it: the command line's parsers take
`DTYPES` from here.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from albert_tf.errors import ConfigError

DTYPES = ("auto", "float32", "bfloat16", "float16")

# CPU flags (Linux /proc/cpuinfo) that mean bfloat16 matmuls run natively.
_BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")


def cpu_supports_bfloat16(cpuinfo: str | Path = "/proc/cpuinfo") -> bool:
    """True if the CPU advertises native bfloat16 arithmetic (AVX512_BF16 or AMX-BF16)."""
    try:
        text = Path(cpuinfo).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    for line in text.splitlines():
        if line.startswith("flags"):
            flags = set(line.partition(":")[2].split())
            return any(flag in flags for flag in _BF16_CPU_FLAGS)
    return False


def _accelerator_supports_bfloat16(device_type: str) -> bool:
    if device_type == "TPU":
        return True
    if device_type != "GPU":
        return False
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        return False
    capability = tf.config.experimental.get_device_details(gpus[0]).get("compute_capability")
    # bfloat16 tensor cores start with Ampere (compute capability 8.0).
    return capability is not None and tuple(capability) >= (8, 0)


def resolve_dtype(requested: str = "auto", device_type: str | None = None) -> str:
    """The compute dtype to use: "float32", "bfloat16" or "float16".

    `requested` is one of DTYPES; anything but "auto" is returned as is. "auto" picks bfloat16
    on TPUs, on GPUs with bfloat16 tensor cores, and on CPUs with AVX512_BF16/AMX, else float32
    (never float16: it needs loss scaling and is only chosen explicitly). `device_type` is
    "CPU", "GPU" or "TPU"; None means GPU if one is visible, else CPU.
    """
    if requested not in DTYPES:
        raise ConfigError(f"dtype {requested!r} is not one of {', '.join(DTYPES)}")
    if requested != "auto":
        return requested
    if device_type is None:
        import tensorflow as tf

        device_type = "GPU" if tf.config.list_physical_devices("GPU") else "CPU"
    if device_type == "CPU":
        return "bfloat16" if cpu_supports_bfloat16() else "float32"
    return "bfloat16" if _accelerator_supports_bfloat16(device_type) else "float32"


def policy_name(dtype: str) -> str:
    """The tf_keras mixed-precision policy for a resolved compute dtype."""
    names = {"float32": "float32", "bfloat16": "mixed_bfloat16", "float16": "mixed_float16"}
    if dtype not in names:
        raise ConfigError(f"dtype {dtype!r} is not one of {', '.join(names)}")
    return names[dtype]


@contextlib.contextmanager
def keras_policy(dtype: str) -> Iterator[None]:
    """Sets the tf_keras global policy for `dtype` inside the block, restoring it afterwards.

    Layers pick up the global policy when they are constructed, so build models inside the block.
    """
    import tf_keras as keras

    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy(policy_name(dtype))
    try:
        yield
    finally:
        keras.mixed_precision.set_global_policy(previous)
