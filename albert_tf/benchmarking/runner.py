"""Plans benchmark jobs, runs each in a fresh worker process, and turns timings into records.

A record is a dict with `system, dtype, case, metric, value, unit, ratio_to_ours` plus context
(`batch_size, seq_length, value_best, note, error`). `ratio_to_ours` is value / our value for
the same dtype, case and metric (1.0 for ours; None where we have no value); "ours" is the
TensorFlow path where it runs that dtype, else (int8) our best runtime system in the run. Metrics:
`throughput` (tokens/s for inference and latency, examples/s for train, GFLOP/s for matmul),
`latency` (ms per batch), `peak_rss_delta` (MiB of peak RSS above the process's baseline after
imports) and `mfu` (model FLOPs/s at the median step time as % of the best matmul FLOPs/s
measured for that dtype, over all backends).
"""

from __future__ import annotations

import importlib.util
import json
import os
import platform
import statistics
import sys
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from importlib.metadata import version
from typing import Any

from albert_tf.benchmarking.cases import (
    BENCH_DTYPES,
    CASES,
    EXPORTED_BY,
    MATMUL_BACKENDS,
    OUR_RUNTIMES,
    OURS,
    PEERS,
    RUNTIME_SYSTEMS,
    SUPPORTED,
    SYSTEMS,
    TITLES,
    benchmark_config,
    case_shape,
    step_flops,
    system_dtypes,
)
from albert_tf.benchmarking.machine import CPU_FLAGS, INT8_FLAGS, cpu_description
from albert_tf.benchmarking.worker import run_marked
from albert_tf.dtypes import cpu_supports_bfloat16
from albert_tf.environment import ONEDNN_VARIABLE, given_environment, use_onednn_choice
from albert_tf.errors import ConfigError
from albert_tf.runtimes import available_cores

# Modules a peer needs; a peer whose modules are missing is skipped unless asked for by name.
PEER_MODULES = {
    "tfm": ("official",),
    "hf": ("torch", "transformers"),
    "kerashub": ("keras_hub",),
    "ort": ("torch", "transformers", "onnx", "onnxruntime"),
}
INSTALL_HINTS = {
    "tfm": "pip install tf-models-official==2.20.0",
    "hf": 'pip install -e ".[hf]" (CPU torch and transformers)',
    "kerashub": "pip install keras-hub (check with --dry-run that TF/Keras stay pinned)",
    "ort": 'pip install -e ".[hf,onnx]" (CPU torch, transformers, onnx, onnxruntime)',
}
# Modules each runtime of `albert-tf predict --runtime` needs beside TensorFlow.
RUNTIME_MODULES = {"onnx": ("onnx", "onnxruntime"), "tflite": ("ai_edge_litert",)}
RUNTIME_HINTS = {"onnx": 'pip install -e ".[onnx]"', "tflite": "pip install ai-edge-litert"}
MATMUL_ITERS = 20  # timed steps of a matmul job (each one FFN-shaped matmul)
UNITS = {"inference": "tokens/s", "latency": "tokens/s", "train": "examples/s", "matmul": "GFLOP/s"}


@dataclass
class BenchmarkOptions:
    """What to run. `dtypes` are resolved names (float32 / bfloat16); `peers` None means every
    installed peer. `isolate` runs each job in its own process (clean peak RSS, no shared TF
    state); without it, jobs share one process per backend (fast smoke runs).
    `hf_bf16`: "best" measures HF inference both ways (`model.to(bfloat16)` and autocast) and
    keeps the faster. `rounds` runs the whole job list that many times, one job after another,
    so slow drift on shared cores reaches every system alike; each figure is then taken over
    the steps of all rounds. `onednn_off_path` runs TensorFlow peers with TF_ENABLE_ONEDNN_OPTS=0,
    reproducing on any machine a CPU where TensorFlow leaves oneDNN off (AVX2 without AVX-512);
    ours runs as `albert-tf` runs there (see `worker_environment`). `runtimes` are the other
    runtimes our encoder is measured in (onnx, tflite; see `cases.RUNTIME_SYSTEMS`), None
    meaning every installed one; they run float32 and int8."""

    cases: tuple[str, ...] = CASES
    dtypes: tuple[str, ...] = BENCH_DTYPES
    peers: tuple[str, ...] | None = None
    tiny: bool = False
    warmup: int = 2
    iters: int = 5
    # 100 batch-1 calls take 3-7 s, longer than a shared VM's speed phases; 20 (about a second)
    # let one phase decide a system's figure.
    latency_iters: int = 100
    intra_threads: int = field(default_factory=available_cores)
    inter_threads: int = 1
    hf_bf16: str = "best"
    isolate: bool = True
    timeout: float = 1800.0
    rounds: int = 1
    onednn_off_path: bool = False
    runtimes: tuple[str, ...] | None = None


def _installed(modules: tuple[str, ...]) -> bool:
    return all(importlib.util.find_spec(m) for m in modules)


def installed_peers() -> tuple[str, ...]:
    return tuple(p for p in PEERS if _installed(PEER_MODULES[p]))


def _validate_runtimes(options: BenchmarkOptions) -> tuple[str, ...]:
    """The runtimes to measure besides TensorFlow (ConfigError for unknown or missing ones)."""
    if options.runtimes is None:
        return tuple(r for r in RUNTIME_SYSTEMS if _installed(RUNTIME_MODULES[r]))
    for runtime in options.runtimes:
        if runtime == "tf":
            continue
        if runtime not in RUNTIME_SYSTEMS:
            raise ConfigError(
                f"unknown runtime {runtime!r}; known: tf, {', '.join(RUNTIME_SYSTEMS)}"
            )
        if not _installed(RUNTIME_MODULES[runtime]):
            raise ConfigError(f"runtime {runtime!r} is not installed: {RUNTIME_HINTS[runtime]}")
    return tuple(r for r in options.runtimes if r != "tf")


def _validate(options: BenchmarkOptions) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(peers, runtimes) to measure; ConfigError for any bad option, before anything runs."""
    for case in options.cases:
        if case not in CASES:
            raise ConfigError(f"--cases: unknown case {case!r}; known: {', '.join(CASES)}")
    for dtype in options.dtypes:
        if dtype not in BENCH_DTYPES:
            raise ConfigError(f"benchmark dtype {dtype!r} is not one of {', '.join(BENCH_DTYPES)}")
    for flag, value, least in (
        ("--warmup", options.warmup, 0),
        ("--iters", options.iters, 1),
        ("--latency-iters", options.latency_iters, 1),
        ("--rounds", options.rounds, 1),
        ("--threads", options.intra_threads, 1),
    ):
        if value < least:
            raise ConfigError(f"{flag} must be >= {least}, got {value}")
    if options.hf_bf16 not in ("best", "cast", "autocast"):
        raise ConfigError(f"hf_bf16 {options.hf_bf16!r} is not best, cast or autocast")
    runtimes = _validate_runtimes(options)
    if options.peers is None:
        return installed_peers(), runtimes
    available = installed_peers()
    for peer in options.peers:
        if peer not in PEERS:
            raise ConfigError(f"unknown peer {peer!r}; known: {', '.join(PEERS)}")
        if peer not in available:
            raise ConfigError(f"peer {peer!r} is not installed: {INSTALL_HINTS[peer]}")
    return tuple(options.peers), runtimes


def plan_jobs(
    options: BenchmarkOptions, peers: tuple[str, ...], runtimes: tuple[str, ...] = ()
) -> list[dict[str, Any]]:
    """Every (system, dtype, case) to measure: matmul first, then ours (TensorFlow, then each
    runtime's systems) and each peer, in the dtypes each system runs."""
    ours = [] if options.runtimes and "tf" not in options.runtimes else [OURS]
    ours += [system for runtime in runtimes for system in RUNTIME_SYSTEMS[runtime]]
    systems = [*MATMUL_BACKENDS, *ours, *peers]
    have_torch = "hf" in peers
    jobs = []
    for case in sorted(options.cases, key=lambda c: c != "matmul"):
        for system in systems:
            if system not in SUPPORTED[case] or (system == "torch" and not have_torch):
                continue
            for dtype in (d for d in options.dtypes if d in system_dtypes(system)):
                # The matmul and latency steps are short: more of them for a stable figure.
                iters = {"latency": options.latency_iters, "matmul": MATMUL_ITERS}.get(
                    case, options.iters
                )
                job = dict(system=system, dtype=dtype, case=case)
                # Tiny mode is a smoke test: one traced call, one timed call.
                job["warmup"] = min(options.warmup, 1) if options.tiny else options.warmup
                job["iters"] = 1 if options.tiny else iters
                modes = [options.hf_bf16]
                if system == "hf" and dtype == "bfloat16" and case != "train":
                    modes = ["cast", "autocast"] if options.hf_bf16 == "best" else modes
                for mode in modes if system == "hf" else [None]:
                    jobs.append({**job, "hf_bf16": mode} if mode else job)
    return jobs


def _group(job: dict[str, Any]) -> str:
    """Jobs that may share a process: ours runs alone, as its oneDNN setting may differ."""
    if job["system"] in (*OUR_RUNTIMES, "ort"):
        return "runtime"
    return {"hf": "torch", "torch": "torch", "kerashub": "keras3", OURS: OURS}.get(
        job["system"], "tf"
    )


def worker_environment(systems: set[str], onednn_off_path: bool) -> dict[str, str]:
    """The environment a worker runs in: ours with the oneDNN setting `albert-tf` itself runs
    with (`environment.use_onednn_choice`); the peers with TensorFlow's own default, or with
    TF_ENABLE_ONEDNN_OPTS=0 on the oneDNN-off path (as TF runs on CPUs without AVX-512)."""
    env = given_environment()
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if "kerashub" in systems:
        env["KERAS_BACKEND"] = "tensorflow"
    if systems <= {OURS, *OUR_RUNTIMES}:
        use_onednn_choice(env)
    elif onednn_off_path:
        env[ONEDNN_VARIABLE] = "0"
    return env


def _worker_spec(options: BenchmarkOptions, files: str) -> dict[str, Any]:
    return dict(
        tiny=options.tiny,
        intra_threads=options.intra_threads,
        inter_threads=options.inter_threads,
        files=files,
    )


def _run_worker(
    jobs: list[dict[str, Any]], options: BenchmarkOptions, files: str
) -> list[dict[str, Any]]:
    spec = dict(_worker_spec(options, files), jobs=jobs)
    env = worker_environment({job["system"] for job in jobs}, options.onednn_off_path)
    cmd = [sys.executable, "-m", "albert_tf.benchmarking.worker", json.dumps(spec)]
    try:
        return run_marked(cmd, env, options.timeout)
    except RuntimeError as e:
        return [{**_job_key(job), "times": [], "error": str(e)} for job in jobs]


def _prepare_files(
    systems: list[str], options: BenchmarkOptions, files: str
) -> dict[str, dict[str, Any]]:
    """Exports the runtime systems' files into `files`, one worker process per system (each
    imports only what its export needs); {system: {"info": ..., "error": ...}}."""
    prepared = {}
    for system in systems:
        spec = dict(_worker_spec(options, files), prepare=[system])
        env = worker_environment({system}, options.onednn_off_path)
        cmd = [sys.executable, "-m", "albert_tf.benchmarking.worker", json.dumps(spec)]
        try:
            (result,) = run_marked(cmd, env, options.timeout)
        except RuntimeError as e:
            result = {"system": system, "info": None, "error": f"export failed: {e}"}
        prepared[system] = result
    return prepared


def _job_key(job: dict[str, Any]) -> dict[str, Any]:
    return {k: job[k] for k in ("system", "dtype", "case")}


def merge_rounds(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One result per job (system, dtype, case and note, which names HF's bf16 mode): step times
    of every round together, the largest peak memory, an error only if no round ran."""
    merged: dict[tuple, dict[str, Any]] = {}
    for r in results:
        key = (r["system"], r["dtype"], r["case"], r.get("note", ""))
        if key not in merged:
            merged[key] = {**r, "times": list(r["times"])}
            continue
        into = merged[key]
        into["times"].extend(r["times"])
        rss = [m for m in (into.get("peak_rss_delta_mib"), r.get("peak_rss_delta_mib")) if m]
        into["peak_rss_delta_mib"] = max(rss, default=into.get("peak_rss_delta_mib"))
        into["error"] = None if into["times"] else into.get("error") or r.get("error")
    return list(merged.values())


def _pick_hf_bf16(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Keeps, per (system, dtype, case), the result with the lowest median step time."""
    best: dict[tuple, dict[str, Any]] = {}
    for r in results:
        key = (r["system"], r["dtype"], r["case"])
        old = best.get(key)
        if old is None or (r["times"] and (not old["times"] or _median(r) < _median(old))):
            best[key] = r
    return list(best.values())


def _median(result: dict[str, Any]) -> float:
    return statistics.median(result["times"])


def run_benchmark(
    options: BenchmarkOptions, progress: Callable[[int, int, str], None] | None = None
) -> dict[str, Any]:
    """Runs every planned job and returns `{"meta": {...}, "records": [...]}`.

    Raises ConfigError for bad options before anything runs. `progress(done, total, text)` is
    called before each worker process starts and once more when all are done.
    """
    peers, runtimes = _validate(options)
    jobs = plan_jobs(options, peers, runtimes)
    with tempfile.TemporaryDirectory(prefix="albert-tf-benchmark-") as files:
        return _run_planned(jobs, options, peers, files, progress)


def _run_planned(
    jobs: list[dict[str, Any]],
    options: BenchmarkOptions,
    peers: tuple[str, ...],
    files: str,
    progress: Callable[[int, int, str], None] | None,
) -> dict[str, Any]:
    if options.isolate:
        batches = [[job] for job in jobs]
    else:
        groups: dict[str, list] = {}
        for job in jobs:
            groups.setdefault(_group(job), []).append(job)
        batches = list(groups.values())
    batches = batches * options.rounds
    exporter = {job["system"]: EXPORTED_BY.get(job["system"], job["system"]) for job in jobs}
    to_export = [s for s in (*OUR_RUNTIMES, "ort") if s in exporter.values()]
    start = 1 if to_export else 0  # the export counts as one step of the progress bar
    total = len(batches) + start
    if to_export and progress:
        progress(0, total, "exporting " + ", ".join(to_export))
    exports = _prepare_files(to_export, options, files)
    # A system whose files could not be made is reported once per job, not run.
    failed = {s: e["error"] for s, e in exports.items() if e["error"]}
    results = [
        {**_job_key(job), "times": [], "error": failed[exporter[job["system"]]]}
        for job in jobs
        if exporter[job["system"]] in failed
    ]
    for done, batch in enumerate(batches, start):
        batch = [job for job in batch if exporter[job["system"]] not in failed]
        if progress:
            text = ", ".join(f"{j['system']} {j['dtype']} {j['case']}" for j in batch)
            progress(done, total, text)
        if batch:
            results.extend(_run_worker(batch, options, files))
    if progress:
        progress(total, total, "done")
    records = build_records(_pick_hf_bf16(merge_rounds(results)), options.tiny)
    meta = _meta(options, peers)
    meta["exports"] = {s: e["info"] for s, e in exports.items() if e["info"]}
    return {"meta": meta, "records": records}


def _meta(options: BenchmarkOptions, peers: tuple[str, ...]) -> dict[str, Any]:
    versions = {}
    for name in (
        "tensorflow",
        "tf_keras",
        "tf-models-official",
        "torch",
        "transformers",
        "keras-hub",
        "onnx",
        "onnxruntime",
        "ai-edge-litert",
    ):
        try:
            versions[name] = version(name)
        except Exception:
            continue
    return dict(
        options={**asdict(options), "peers": list(peers)},
        config=benchmark_config(options.tiny).to_dict(),
        cpu=platform.processor() or platform.machine(),
        cpu_count=os.cpu_count(),
        machine=cpu_description(),
        tf_enable_onednn_opts=given_environment().get(ONEDNN_VARIABLE),
        onednn_off_path=options.onednn_off_path,
        cpu_bfloat16=cpu_supports_bfloat16(),
        versions=versions,
    )


def build_records(results: list[dict[str, Any]], tiny: bool) -> list[dict[str, Any]]:
    """Turns worker results into records (see the module docstring)."""
    config = benchmark_config(tiny)
    peak_flops: dict[str, float] = {}
    records = []
    for r in results:
        shape = case_shape(r["case"], tiny)
        base = dict(
            system=r["system"],
            dtype=r["dtype"],
            case=r["case"],
            batch_size=shape.batch,
            seq_length=shape.seq,
            note=r.get("note", ""),
            error=r.get("error"),
            onednn=r.get("onednn"),
        )
        if not r["times"]:
            records.append(
                {**base, "metric": "throughput", "value": None, "unit": UNITS[r["case"]]}
            )
            continue
        median, best = _median(r), min(r["times"])
        per_step = shape.seq * shape.batch if r["case"] in ("inference", "latency") else shape.batch
        if r["case"] == "matmul":
            per_step = step_flops(config, "matmul", shape) / 1e9
            # The machine's peak: the fastest matmul seen, so noise cannot push MFU above 100%.
            peak_flops[r["dtype"]] = max(peak_flops.get(r["dtype"], 0.0), per_step * 1e9 / best)
        unit = UNITS[r["case"]]
        records.append(
            {
                **base,
                "metric": "throughput",
                "value": per_step / median,
                "unit": unit,
                "value_best": per_step / best,
            }
        )
        if r["case"] == "latency":
            records.append(
                {
                    **base,
                    "metric": "latency",
                    "value": median * 1e3,
                    "unit": "ms",
                    "value_best": best * 1e3,
                }
            )
        if r["case"] != "matmul":
            records.append(
                {
                    **base,
                    "metric": "peak_rss_delta",
                    "value": r["peak_rss_delta_mib"],
                    "unit": "MiB",
                }
            )
    for r in results:
        if r["times"] and r["case"] != "matmul" and r["dtype"] in peak_flops:
            shape = case_shape(r["case"], tiny)
            achieved = step_flops(config, r["case"], shape) / _median(r)
            records.append(
                dict(
                    system=r["system"],
                    dtype=r["dtype"],
                    case=r["case"],
                    metric="mfu",
                    value=100.0 * achieved / peak_flops[r["dtype"]],
                    unit="%",
                    batch_size=shape.batch,
                    seq_length=shape.seq,
                    note=f"model {achieved / 1e9:.1f} GFLOP/s",
                    error=None,
                )
            )
    _add_ratios(records)
    return records


_LOWER_IS_BETTER = ("latency", "peak_rss_delta")


def _better(metric: str, a: float, b: float) -> bool:
    return a < b if metric in _LOWER_IS_BETTER else a > b


def reference_systems(records: list[dict[str, Any]]) -> dict[tuple[str, str, str], str]:
    """{(dtype, case, metric): the system peers are compared with}: ours (TensorFlow) where it
    has a value, else the best of our runtime systems (int8: our fastest int8 path)."""
    best: dict[tuple[str, str, str], dict[str, Any]] = {}
    for r in records:
        key = (r["dtype"], r["case"], r["metric"])
        if r["value"] is None or r["system"] not in (OURS, *OUR_RUNTIMES):
            continue
        old = best.get(key)
        if (
            old is None
            or (r["system"] == OURS) > (old["system"] == OURS)
            or (old["system"] != OURS and _better(r["metric"], r["value"], old["value"]))
        ):
            best[key] = r
    return {key: r["system"] for key, r in best.items()}


def _add_ratios(records: list[dict[str, Any]]) -> None:
    reference = reference_systems(records)
    ours = {
        (r["dtype"], r["case"], r["metric"]): r["value"]
        for r in records
        if reference.get((r["dtype"], r["case"], r["metric"])) == r["system"]
    }
    for r in records:
        our = ours.get((r["dtype"], r["case"], r["metric"]))
        usable = r["value"] is not None and our and r["case"] != "matmul"
        r["ratio_to_ours"] = r["value"] / our if usable else None


# === Table ===

_ROW_ORDER = [
    ("inference", "throughput"),
    ("latency", "latency"),
    ("train", "throughput"),
    ("inference", "mfu"),
    ("latency", "mfu"),
    ("train", "mfu"),
    ("inference", "peak_rss_delta"),
    ("latency", "peak_rss_delta"),
    ("train", "peak_rss_delta"),
]


def _fmt(value: float | None) -> str:
    if value is None:
        return "n/a"
    return (
        f"{value:,.0f}"
        if abs(value) >= 100
        else f"{value:,.1f}"
        if abs(value) >= 10
        else f"{value:.2f}"
    )


def machine_line(result: dict[str, Any]) -> str:
    """What the figures ran on: CPU model, the flags that pick kernels, cores, whether int8
    dot-product instructions (VNNI, AMX) are there, and per system whether its framework ran
    oneDNN kernels."""
    machine = result.get("meta", {}).get("machine") or {}
    flags = [f.upper() for f in machine.get("flags", [])]
    missing = [f.upper() for f in CPU_FLAGS if f.upper() not in flags]
    onednn: dict[str, bool] = {}
    for r in result["records"]:
        if r.get("onednn") is not None:
            onednn.setdefault(r["system"], r["onednn"])
    systems = ", ".join(f"{TITLES[s]} {'on' if on else 'off'}" for s, on in onednn.items())
    int8 = [f.upper() for f in INT8_FLAGS if f.upper() in flags]
    return (
        f"CPU: {machine.get('model', 'unknown')}, {machine.get('cores')} cores; "
        f"{' '.join(flags) or 'none of the listed flags'}"
        + (f" (no {' '.join(missing)})" if missing else "")
        + f". int8 dot-product instructions: {' '.join(int8) or 'none (no VNNI, no AMX)'}"
        + (f". oneDNN: {systems}" if systems else "")
        + (
            " (oneDNN-off path: TensorFlow peers ran with TF_ENABLE_ONEDNN_OPTS=0)"
            if result.get("meta", {}).get("onednn_off_path")
            else ""
        )
        + "."
    )


def _export_note(info: dict[str, Any]) -> str:
    note = info["made_by"]
    for key, cosine in info.items():
        if key.endswith("_pooled_cosine"):
            note += f"; {key.removesuffix('_pooled_cosine')} pooled-output cosine to float32 "
            note += f">= {cosine:.4f}"
    if info.get("fused_ops"):
        note += "; fused: " + ", ".join(f"{k} {v}" for k, v in info["fused_ops"].items())
    return note


def render_table(result: dict[str, Any]) -> str:
    """A markdown table: one row per (case, metric, dtype), one column per system; peer cells
    show how many times better ours is ("ours 1.4x": faster, lower latency or less memory),
    where "ours" is `reference_systems`' choice: TensorFlow, or our fastest int8 system."""
    records = result["records"]
    systems = [s for s in SYSTEMS if any(r["system"] == s for r in records)]
    index = {(r["system"], r["dtype"], r["case"], r["metric"]): r for r in records}
    lines = [
        "| case | metric | dtype | " + " | ".join(TITLES[s] for s in systems) + " |",
        "|---|---|---|" + "---|" * len(systems),
    ]
    dtypes = sorted({r["dtype"] for r in records}, key=BENCH_DTYPES.index)
    for case, metric in _ROW_ORDER:
        for dtype in dtypes:
            row = [index.get((s, dtype, case, metric)) for s in systems]
            if not any(row):
                continue
            unit = next(r["unit"] for r in row if r)
            shape = next((r["batch_size"], r["seq_length"]) for r in row if r)
            cells = []
            for r in row:
                if r is None or r["value"] is None:
                    cells.append("error" if r and r.get("error") else "-")
                    continue
                cell = _fmt(r["value"])
                ratio = r.get("ratio_to_ours")
                if r["system"] in PEERS and ratio:
                    advantage = ratio if metric in _LOWER_IS_BETTER else 1.0 / ratio
                    cell += f" (ours {advantage:.2f}x)"
                cells.append(cell)
            label = f"{case} {shape[0]}x{shape[1]}"
            lines.append(f"| {label} | {metric} [{unit}] | {dtype} | " + " | ".join(cells) + " |")
    matmul = [r for r in records if r["case"] == "matmul" and r["value"] is not None]
    if matmul:
        parts = [f"{TITLES[r['system']]} {r['dtype']} {_fmt(r['value'])} GFLOP/s" for r in matmul]
        lines.append("")
        lines.append(f"Machine matmul at the FFN shape ({matmul[0]['note']}): " + "; ".join(parts))
    lines += ["", machine_line(result)]
    for (dtype, case, metric), system in reference_systems(records).items():
        if system != OURS and metric in ("throughput", "latency") and (case, metric) in _ROW_ORDER:
            lines.append(
                f"{dtype} {case if case == metric else f'{case} {metric}'}: peers compared with "
                f"our best, {TITLES[system]}."
            )
    for system, info in result.get("meta", {}).get("exports", {}).items():
        lines.append(f"{TITLES[system]}: {_export_note(info)}")
    errors = [r for r in records if r.get("error")]
    for r in errors:
        lines.append(f"- {TITLES[r['system']]} {r['dtype']} {r['case']}: {r['error']}")
    return "\n".join(lines)
