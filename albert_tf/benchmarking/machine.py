"""What a benchmark ran on: the CPU model, the instruction sets that matter, and oneDNN."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

# /proc/cpuinfo flags that decide which kernels TensorFlow and torch can use.
CPU_FLAGS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16")


def cpu_description(cpuinfo: str | Path = "/proc/cpuinfo") -> dict[str, Any]:
    """{"model": name, "flags": the CPU_FLAGS present, "cores": visible cores}."""
    model, flags = "unknown", set()
    try:
        text = Path(cpuinfo).read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name" and model == "unknown":
            model = value.strip()
        elif key.strip() == "flags" and not flags:
            flags = set(value.split())
    return {
        "model": model,
        "flags": [f for f in CPU_FLAGS if f in flags],
        "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
    }


def onednn_enabled() -> bool:
    """Whether this process's TensorFlow runs oneDNN kernels (TF_ENABLE_ONEDNN_OPTS, CPU kind)."""
    from tensorflow.python.util import _pywrap_util_port

    return bool(_pywrap_util_port.IsMklEnabled())
