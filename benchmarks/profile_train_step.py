"""Where the time of one training step goes: albert-tf with oneDNN off and on, and HF (torch).

The step is `albert-tf benchmark`'s train case (ALBERT-base, batch 16 x 128, 20 masked
positions, MLM + SOP loss, Adam, or with `--optimizer lamb` pretrain's LAMB), in float32 or
bfloat16 (`--dtype`), built by the same code (`benchmarking.tf_systems.build_ours`,
`torch_systems.build_hf`). `--compiled off` traces our step without the compiled training
kernels of `layers/compiled.py` (the step before them). Each system runs in its own process
(TF reads TF_ENABLE_ONEDNN_OPTS once, at import): warm-up steps, timed steps (the wall time per
step), then profiled steps. TensorFlow's steps are traced with `tf.profiler` and its XSpace is
read back; torch's with `torch.profiler`. Kernel time is summed per part of the step, in ms per
step. Parts come from node names (TF, after Grappler's rewrites: a bias or GELU that oneDNN fuses
into its MatMul kernel counts as matmul, and `AddN` as gradient sums; an XLA-compiled kernel
counts whole, as "GELU + LayerNorm, compiled") and aten op names (torch: HF's GELU is aten::tanh
and aten::pow; ops under `Optimizer.step` are optimizer). Kernels may overlap, so their total
can exceed the wall time; the wall time is what counts. On a machine other jobs share, every
figure grows with the load: compare the parts' shares, and repeat.

    python benchmarks/profile_train_step.py [--systems ours-off,ours-on,hf] [--steps 3]
        [--warmup 2] [--dtype float32|bfloat16] [--optimizer adam|lamb] [--compiled on|off]
        [--tiny] [--json benchmarks/results/profile_train_step.json]
"""

from __future__ import annotations

import argparse
import datetime
import glob
import json
import os
import statistics
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

from albert_tf.benchmarking.worker import RESULT_MARKER, run_marked
from albert_tf.runtimes import available_cores

SYSTEMS = {"ours-off": "0", "ours-on": "1", "hf": None}
CATEGORIES = (
    "matmuls, forward",
    "matmuls, backward",
    "attention core",
    "LayerNorm",
    "GELU",
    "GELU + LayerNorm, compiled",
    "casts",
    "embeddings: gather and gradient",
    "MLM head and loss",
    "bias gradients",
    "gradient sums",
    "dropout",
    "optimizer",
    "other",
)
MATMUL_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm")
_WORDS = (
    ("LayerNorm", ("layernorm", "layer_norm")),
    ("GELU", ("gelu", "aten::tanh", "aten::pow")),  # HF's gelu_new is tanh and pow
    ("dropout", ("dropout", "bernoulli", "randomuniform")),
)


def category(name: str, op: str, phase: str) -> str | None:
    """The part of the step one kernel belongs to, from its node or aten name, op type and
    phase; None for the events XLA reports inside a compiled kernel (counted in the kernel)."""
    if op.startswith(" "):
        return None
    name, op = name.lower(), op.lower()
    if phase == "optimizer":
        return "optimizer"
    if op == "execute":
        return "GELU + LayerNorm, compiled"
    if "cls/predictions" in name or "sparsesoftmaxcrossentropy" in op:
        return "MLM head and loss"
    if "embeddings" in name or op in ("resourcegather", "unsortedsegmentsum", "unique"):
        return "embeddings: gather and gradient"
    attention = "attention" in name
    if "batchmatmul" in op or op in ("aten::bmm", "aten::baddbmm") or "softmax" in op:
        return "attention core"
    if "matmul" in op or "einsum" in op or op in MATMUL_OPS:
        # TF's fused MatMul + BiasAdd (+ activation) kernels included
        return "matmuls, backward" if phase == "backward" else "matmuls, forward"
    if attention and "transpose" in op:
        return "attention core"
    for key, words in _WORDS:
        if any(w in name or w in op for w in words):
            return key
    if op in ("cast", "aten::to", "aten::_to_copy", "aten::copy_"):
        return "casts"
    if op == "biasaddgrad":
        return "bias gradients"
    if op == "addn" or (op == "aten::add_" and phase == "backward"):
        return "gradient sums"  # e.g. the shared block's gradients summed over its layers
    return "other"


# === TensorFlow: tf.profiler's XSpace ===


def _tf_kernels(logdir: str) -> list[tuple[str, str, float]]:
    """(node name, op type, ms) of every kernel in the trace under `logdir`."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    path = sorted(glob.glob(f"{logdir}/**/*.xplane.pb", recursive=True))[-1]
    space = xplane_pb2.XSpace()
    space.ParseFromString(Path(path).read_bytes())
    kernels = []
    for plane in space.planes:
        if plane.name != "/host:CPU":
            continue
        for line in plane.lines:
            if not line.name.startswith("tf_Compute") and "Eigen" not in line.name:
                continue
            for event in line.events:
                name = plane.event_metadata[event.metadata_id].name
                node, sep, op = name.rpartition(":")
                if sep and node and not node.startswith(("ThreadpoolListener", "Executor")):
                    kernels.append((node, op, event.duration_ps / 1e9))
    return kernels


def _tf_phase(node: str) -> str:
    low = node.lower()
    words = ("adam", "lamb", "assignvariableop", "global_norm", "clip_by_global_norm")
    if any(w in low for w in words) or low.startswith(("update", "iteration")):
        return "optimizer"
    return "backward" if low.startswith("gradient_tape") else "forward"


def _profile_tf(step, steps: int) -> list[tuple[str, str, str, float]]:
    import tensorflow as tf

    with tempfile.TemporaryDirectory() as logdir:
        tf.profiler.experimental.start(logdir)
        for _ in range(steps):
            step()
        tf.profiler.experimental.stop()
        return [(n, op, _tf_phase(n), ms) for n, op, ms in _tf_kernels(logdir)]


# === torch: torch.profiler's events ===


def _torch_phase(event) -> str:
    while event is not None:
        if event.name.startswith("Optimizer."):
            return "optimizer"
        if event.name.startswith("autograd::engine"):
            return "backward"
        event = event.cpu_parent
    return "forward"


def _profile_torch(step, steps: int) -> list[tuple[str, str, str, float]]:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            step()
    kernels = []
    for event in prof.events():
        if event.name.startswith("aten::") and event.self_cpu_time_total > 0:
            kernels.append(
                (event.name, event.name, _torch_phase(event), event.self_cpu_time_total / 1e3)
            )
    return kernels


# === one system in this process ===


def run_child(
    system: str, steps: int, warmup: int, tiny: bool, dtype: str, optimizer: str, compiled: bool
) -> dict:
    from albert_tf.benchmarking.cases import benchmark_config, case_shape
    from albert_tf.benchmarking.worker import time_steps

    config, shape = benchmark_config(tiny), case_shape("train", tiny)
    threads = available_cores()
    if system == "hf":
        from albert_tf.benchmarking import torch_systems as backend

        backend.configure_threads(threads, 1)
        step, _ = backend.build_hf(config, dtype, "train", shape, "cast")
        profile = _profile_torch
    else:
        from albert_tf.benchmarking import tf_systems as backend
        from albert_tf.layers.compiled import compiled_training

        backend.configure_threads(threads, 1)
        step, _ = backend.build_ours(config, dtype, "train", shape, optimizer)
        with compiled_training(compiled):
            step()  # traces the step
        profile = _profile_tf
    times = time_steps(step, warmup, steps)
    by_category: dict[str, float] = defaultdict(float)
    for name, op, phase, ms in profile(step, steps):
        part = category(name, op, phase)
        if part is not None:
            by_category[part] += ms / steps
    return {
        "system": system,
        "dtype": dtype,
        "optimizer": optimizer if system != "hf" else "adamw",
        "compiled": compiled if system != "hf" else None,
        "onednn": backend.onednn_in_use(),
        "step_ms": 1e3 * statistics.median(times),
        "examples_per_s": shape.batch / statistics.median(times),
        "kernel_ms": {c: by_category.get(c, 0.0) for c in CATEGORIES},
    }


# === the table ===


def _matmul_ms(result: dict) -> float:
    parts = ("matmuls, forward", "matmuls, backward")
    return sum(result["kernel_ms"][p] for p in parts)


def render(results: list[dict]) -> str:
    head = "| ms per step | " + " | ".join(
        f"{r['system']} {r['dtype']}, {r['optimizer']}"
        + (f", compiled {'on' if r['compiled'] else 'off'}" if r["compiled"] is not None else "")
        + f" (oneDNN {'on' if r['onednn'] else 'off'})"
        for r in results
    )
    lines = [head + " |", "|---" * (len(results) + 1) + "|"]
    rows = [("wall time", lambda r: r["step_ms"])]
    rows += [("kernels, total", lambda r: sum(r["kernel_ms"].values()))]
    rows += [(f"  {c}", lambda r, c=c: r["kernel_ms"][c]) for c in CATEGORIES]
    rows += [
        (
            "matmuls' share of kernels, %",
            lambda r: 100 * _matmul_ms(r) / sum(r["kernel_ms"].values()),
        )
    ]
    rows += [("examples/s", lambda r: r["examples_per_s"])]
    for label, get in rows:
        lines.append(f"| {label} | " + " | ".join(f"{get(r):.1f}" for r in results) + " |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    parser.add_argument("--optimizer", choices=("adam", "lamb"), default="adam")
    parser.add_argument("--compiled", choices=("on", "off"), default="on")
    parser.add_argument("--tiny", action="store_true", help="tiny config: a smoke test")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        result = run_child(
            args.child,
            args.steps,
            args.warmup,
            args.tiny,
            args.dtype,
            args.optimizer,
            args.compiled == "on",
        )
        print(RESULT_MARKER + json.dumps(result), flush=True)
        return 0
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = [s for s in systems if s not in SYSTEMS]
    if unknown:
        parser.error(f"unknown system {unknown[0]!r}; known: {', '.join(SYSTEMS)}")
    results = []
    for system in systems:
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
        if SYSTEMS[system] is not None:
            env["TF_ENABLE_ONEDNN_OPTS"] = SYSTEMS[system]
        argv = [sys.executable, __file__, "--child", system, "--steps", str(args.steps)]
        argv += ["--warmup", str(args.warmup)] + (["--tiny"] if args.tiny else [])
        argv += ["--dtype", args.dtype, "--optimizer", args.optimizer, "--compiled", args.compiled]
        print(f"profiling {system} ...", file=sys.stderr, flush=True)
        try:
            results.append(run_marked(argv, env))
        except RuntimeError as e:
            sys.exit(f"{system} failed: {e}")
    from albert_tf.benchmarking.machine import cpu_description

    table = render(results)
    print(table)
    cpu = cpu_description()
    print(f"\nCPU: {cpu['model']}, {cpu['cores']} cores; {' '.join(cpu['flags']).upper()}")
    if args.json:
        payload = {
            "date": datetime.date.today().isoformat(),
            "cpu": cpu,
            "steps": args.steps,
            "tiny": args.tiny,
            "load_average": os.getloadavg(),
            "results": results,
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
