"""One benchmark process: `python -m albert_tf.benchmarking.worker '<json>'`.

The JSON holds `jobs` (a list of dicts with system, dtype, case, warmup, iters, and for HF
`hf_bf16`), `tiny`, `intra_threads`, `inter_threads` and `files` (the directory of the runtime
systems' exported files). Each job builds its system, runs `warmup` untimed and `iters` timed
steps, and reports its step times and the growth of the process's peak RSS. The last stdout line
is `RESULT_MARKER` followed by a JSON list of results (system, dtype, case, times [s],
peak_rss_delta_mib, note, error, and onednn: whether the system's framework ran its oneDNN
kernels in this process; None for ONNX Runtime and LiteRT, which do not use oneDNN).

With `prepare` (a list of runtime systems) instead of `jobs`, the worker writes those systems'
exported files into `files` and reports each system's info or error.

A worker imports `tf_systems` (TensorFlow) or `torch_systems` (torch) only for a job of that
framework, so a job's process holds its own framework and no other.
"""

from __future__ import annotations

import importlib
import json
import os
import resource
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from albert_tf.benchmarking import runtime_systems
from albert_tf.benchmarking.cases import OUR_RUNTIMES, benchmark_config, case_shape

RESULT_MARKER = "@@BENCHMARK_RESULT "
TORCH_SYSTEMS = ("hf", "torch")
RUNTIME_SYSTEMS = (*OUR_RUNTIMES, "ort")


def _rss_bytes() -> int:
    import psutil

    return psutil.Process(os.getpid()).memory_info().rss


def _peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


def run_marked(argv: list[str], env: dict[str, str], timeout: float | None = None) -> Any:
    """Runs a child process whose last `RESULT_MARKER` line carries its result as JSON; returns
    that result. RuntimeError with the child's last stderr line if it printed none or timed out."""
    try:
        proc = subprocess.run(
            argv, env=env, capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"worker timed out after {timeout:.0f}s") from None
    lines = [line for line in proc.stdout.splitlines() if line.startswith(RESULT_MARKER)]
    if not lines:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"worker exited with code {proc.returncode}: {tail[:300]}")
    return json.loads(lines[-1][len(RESULT_MARKER) :])


def time_steps(step: Any, warmup: int, iters: int) -> list[float]:
    """Runs `warmup` untimed then `iters` timed calls of `step`; returns seconds per call."""
    for _ in range(warmup):
        step()
    times = []
    for _ in range(iters):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return times


# Libraries each system imports, loaded before the RSS baseline so memory counts the model only.
_IMPORTS = {
    "ours": ("tf_keras", "albert_tf.models", "albert_tf.pretraining.losses"),
    "tfm": ("tf_keras", "official.nlp.modeling", "albert_tf.pretraining.losses"),
    "kerashub": ("keras", "keras_hub"),
    "hf": ("transformers", "transformers.models.albert.modeling_albert"),
    "ours_tflite": ("ai_edge_litert.interpreter",),
    "ours_onnx": ("onnxruntime",),
    "ours_onnx_static": ("onnxruntime",),
    "ort": ("onnxruntime",),
}


def build_step(job: dict[str, Any], spec: dict[str, Any]) -> tuple[Any, str]:
    """The job's step (a callable that runs one timed step) and its note, built in this process
    as `albert-tf benchmark` builds it (threads are the caller's to configure first)."""
    system, dtype, case = job["system"], job["dtype"], job["case"]
    config, shape = benchmark_config(spec["tiny"]), case_shape(case, spec["tiny"])
    if system in RUNTIME_SYSTEMS:
        files = Path(spec["files"])
        return runtime_systems.build(system, config, dtype, shape, files, spec["intra_threads"])
    if system in TORCH_SYSTEMS:
        from albert_tf.benchmarking import torch_systems

        if system == "torch":
            return torch_systems.build_torch_matmul(config, dtype, shape)
        return torch_systems.build_hf(config, dtype, case, shape, job.get("hf_bf16", "cast"))
    from albert_tf.benchmarking import tf_systems

    if system == "tensorflow":
        return tf_systems.build_tf_matmul(config, dtype, shape)
    builder = {
        "ours": tf_systems.build_ours,
        "tfm": tf_systems.build_tfm,
        "kerashub": tf_systems.build_kerashub,
    }[system]
    return builder(config, dtype, case, shape)


def run_job(job: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    """Builds and times one job; any exception becomes the result's `error`."""
    result = {k: job[k] for k in ("system", "dtype", "case")}
    result.update(times=[], peak_rss_delta_mib=None, note="", error=None)
    try:
        for module in _IMPORTS.get(job["system"], ()):
            importlib.import_module(module)
    except ImportError as e:
        result["error"] = f"not installed: {e}"
        return result
    baseline = max(_rss_bytes(), _peak_rss_bytes())
    try:
        step, note = build_step(job, spec)
        result["note"] = note
        result["times"] = time_steps(step, job["warmup"], job["iters"])
    except Exception as e:  # reported per job, so one failing system does not stop the run
        traceback.print_exc(file=sys.stderr)
        result["error"] = f"{type(e).__name__}: {e}".splitlines()[0][:300]
    result["peak_rss_delta_mib"] = max(_peak_rss_bytes() - baseline, 0) / 2**20
    return result


def prepare(systems: list[str], spec: dict[str, Any]) -> list[dict[str, Any]]:
    """Writes each runtime system's exported files; its info, or the error that stopped it."""
    config = benchmark_config(spec["tiny"])
    seq_length = case_shape("inference", spec["tiny"]).seq
    results = []
    for system in systems:
        try:
            info = runtime_systems.prepare(system, config, seq_length, Path(spec["files"]))
            results.append({"system": system, "info": info, "error": None})
        except Exception as e:  # reported, so the other systems still run
            traceback.print_exc(file=sys.stderr)
            error = f"{type(e).__name__}: {e}".splitlines()[0][:300]
            results.append({"system": system, "info": None, "error": error})
    return results


def main(argv: list[str]) -> int:
    spec = json.loads(argv[1])
    if "prepare" in spec:
        print(RESULT_MARKER + json.dumps(prepare(spec["prepare"], spec)), flush=True)
        return 0
    jobs = spec["jobs"]
    onednn = None  # ONNX Runtime and LiteRT run their own kernels (MLAS, XNNPACK)
    if any(job["system"] in TORCH_SYSTEMS for job in jobs):
        from albert_tf.benchmarking import torch_systems as backend
    elif not all(job["system"] in RUNTIME_SYSTEMS for job in jobs):
        from albert_tf.benchmarking import tf_systems as backend
    else:
        backend = None
    if backend is not None:
        backend.configure_threads(spec["intra_threads"], spec["inter_threads"])
        onednn = backend.onednn_in_use()
    results = [{**run_job(job, spec), "onednn": onednn} for job in jobs]
    print(RESULT_MARKER + json.dumps(results), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
