"""What a benchmark ran on: the CPU model, the instruction sets that matter, and oneDNN.

Only `onednn_enabled` imports TensorFlow, inside it (a TensorFlow process calls it): the
benchmark's parent process and its other workers never load TensorFlow.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from albert_tf.environment import cpu_flags, cpuinfo_field
from albert_tf.runtimes import available_cores

# /proc/cpuinfo flags that decide which kernels TensorFlow and torch can use.
CPU_FLAGS = (
    "avx2",
    "fma",
    "avx512f",
    "avx512_vnni",
    "avx_vnni",
    "avx512_bf16",
    "amx_tile",
    "amx_bf16",
    "amx_int8",
)
# The int8 dot-product instructions that int8 kernels (oneDNN, ORT's MLAS, XNNPACK) use when
# present; without them int8 matmuls fall back to slower multiply-add sequences.
INT8_FLAGS = ("avx512_vnni", "avx_vnni", "amx_int8")


def cpu_description(cpuinfo: str | Path = "/proc/cpuinfo") -> dict[str, Any]:
    """{"model": name, "flags": the CPU_FLAGS present, "cores": visible cores}."""
    flags = cpu_flags(cpuinfo)
    return {
        "model": cpuinfo_field("model name", cpuinfo) or "unknown",
        "flags": [f for f in CPU_FLAGS if f in flags],
        "cores": available_cores(),
    }


def onednn_enabled() -> bool:
    """Whether this process's TensorFlow runs oneDNN kernels (TF_ENABLE_ONEDNN_OPTS, CPU kind)."""
    from tensorflow.python.util import _pywrap_util_port

    return bool(_pywrap_util_port.IsMklEnabled())
