"""The train case on one GPU: ours (XLA) and HF torch (eager and torch.compile), float32, TF32 and
bfloat16, against the same GPU's best matmul.

Runs where neither TensorFlow nor albert_tf is installed: it needs numpy, torch with transformers,
and jax (with its CUDA plugin on a GPU), and the artifacts of `export_train_hlo.py`:

    python3 benchmarks/gpu/run_gpu_train.py --artifacts benchmarks/gpu/artifacts --out $OUT

Arms, in the order they run (each is skipped when the time budget cannot fit it):
- jax matmul, torch matmul at the benchmark's FFN shape [B*S, H] x [H, F], float32 (TF32 off:
  HIGHEST precision in XLA), TF32 and bfloat16: the MFU denominators, best of the two per precision;
- ours, XLA on: the exported HloModuleProtos (our TensorFlow train step under
  `tf.function(jit_compile=True)`) compiled by JAX's XLA for the GPU, the updated variables fed
  back as the next step's inputs (donated). The first two losses must match TensorFlow's own XLA
  step on the exporting CPU. Ours with XLA off (TensorFlow's graph executor) needs TensorFlow,
  which this machine lacks: reported as not run;
- HF torch, `AlbertForPreTraining` with the MLM head on the masked positions only and Adam, as
  `benchmarking/torch_systems.py` builds its train step (bfloat16: `torch.autocast`): eager (XLA
  off) and `torch.compile` of the loss and of the optimizer step (inductor, default mode: torch's
  compiler, the analog of XLA on).

Each arm: warm-up steps (the first compiles), then steps until `--seconds` pass (at least 5), each
timed to the loss on the host, so every step ends synchronized. Figures: examples/s at the median
step, MFU = analytic train FLOPs (written by the exporter from `cases.step_flops`) per second
over the best matmul FLOP/s of the same precision, peak device memory.

Every framework runs in its own worker process (jax first, then torch), so neither holds the other's
memory; a worker that outlives the budget is killed and its finished arms are kept. Output: one
table on stdout and `results.json` in `--out` (default $OUT, else ./gpu-results).
`--tiny` runs 1 warm-up and 2 timed steps per arm (with the exporter's `--tiny` artifacts; on CPU
where there is no GPU) to check that every path runs.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

PRECISIONS = ("float32", "bfloat16", "tf32")
# HF's arms (compiled, precision) in the order they run: TF32, the least needed, last.
HF_ARMS = (
    (False, "float32"),
    (False, "bfloat16"),
    (True, "float32"),
    (True, "bfloat16"),
    (False, "tf32"),
    (True, "tf32"),
)
# Seconds an arm needs, at most, beyond its timed steps: it is skipped if they do not fit.
SETUP_S = {"matmul": 5, "ours": 45, "hf_eager": 15, "hf_compile": 100}
# How close the GPU's first two losses must be to TensorFlow's on the exporting CPU (relative).
LOSS_RTOL = {"float32": 1e-4, "tf32": 5e-3, "bfloat16": 2e-2}
# Calls per timed matmul step: one call is too short to time alone on a GPU.
MATMUL_CALLS = 50
MATMUL_SECONDS = 1.0
# Share of the budget the jax worker may use; the torch worker has the rest.
JAX_SHARE = 0.4
KILL_GRACE_S = 20


def log(message: str) -> None:
    print(message, flush=True)


class Arms:
    """A worker's arms: runs each that fits before the deadline, appends its record to the
    results file as it ends (a killed worker keeps the arms it finished)."""

    def __init__(self, results: Path, deadline: float, tiny: bool, seconds: float) -> None:
        self.results = results
        self.deadline = deadline
        self.tiny = tiny
        self.seconds = seconds

    def write(self, record: dict) -> None:
        with self.results.open("a") as f:
            f.write(json.dumps(record) + "\n")

    def run(self, kind: str, record: dict, measure: Callable[[], dict]) -> None:
        label = f"{record['system']} {record['precision']} {record.get('compiler', '')}".strip()
        timed = MATMUL_SECONDS if kind == "matmul" else self.seconds
        if time.time() + SETUP_S[kind] + timed > self.deadline:
            record.update(status="skipped", reason="time budget")
            log(f"[skip] {label}: time budget")
        else:
            log(f"[run ] {label}")
            try:
                record.update(measure(), status="ok")
            except Exception as e:  # one arm failing must not lose the others
                record.update(status="failed", reason=f"{type(e).__name__}: {e}"[:2000])
                log(f"[fail] {label}: {record['reason']}")
        self.write(record)

    def time_steps(
        self, step: Callable[[], object], warmup: int, seconds: float | None = None
    ) -> dict:
        """Wall time of each step after `warmup` untimed ones, for `seconds` (default: the
        arms' `--seconds`); the first warm-up step's time is reported as `first_step_s` (it
        includes compilation)."""
        start = time.perf_counter()
        step()
        first = time.perf_counter() - start
        for _ in range(warmup - 1 if not self.tiny else 0):
            step()
        times = []
        end = time.perf_counter() + (self.seconds if seconds is None else seconds)
        while len(times) < (2 if self.tiny else 5) or (
            not self.tiny and time.perf_counter() < end and len(times) < 500
        ):
            start = time.perf_counter()
            step()
            times.append(time.perf_counter() - start)
        return {
            "first_step_s": first,
            "steps": len(times),
            "median_s": statistics.median(times),
            "best_s": min(times),
        }


def load_artifacts(path: Path) -> tuple[dict, dict[str, np.ndarray], dict[str, np.ndarray]]:
    manifest = json.loads((path / "manifest.json").read_text())
    with np.load(path / "batch.npz") as f:
        batch = {k: f[k] for k in f.files}
    with np.load(path / "weights.npz") as f:  # bfloat16 bits -> float32
        weights = {k: (f[k].astype(np.uint32) << np.uint32(16)).view(np.float32) for k in f.files}
    return manifest, batch, weights


def matmul_operands(manifest: dict) -> tuple[np.ndarray, np.ndarray]:
    mm = manifest["matmul"]
    rng = np.random.default_rng(0)
    a = rng.standard_normal((mm["m"], mm["k"]), np.float32)
    b = rng.standard_normal((mm["k"], mm["n"]), np.float32) / np.sqrt(mm["k"])
    return a, b


# === jax worker: JAX's XLA matmul, and ours (the exported HLO) ===


def jax_worker(args: argparse.Namespace, arms: Arms) -> None:
    import jax

    jax.config.update("jax_enable_x64", True)  # the step counter is int64
    import jax.extend.backend
    import jax.extend.mlir
    import jax.numpy as jnp

    manifest, batch, weights = load_artifacts(Path(args.artifacts))
    device = jax.devices()[0]
    arms.write(
        {
            "kind": "meta",
            "worker": "jax",
            "jax": jax.__version__,
            "device": f"{device.platform}: {device.device_kind}",
        }
    )
    if device.platform != "gpu" and not args.tiny:
        raise SystemExit(f"jax sees no GPU (its first device: {device}); only --tiny runs on CPU")
    backend = jax.extend.backend.get_backend(device.platform)

    a, b = matmul_operands(manifest)
    for precision in PRECISIONS:
        dtype = jnp.bfloat16 if precision == "bfloat16" else jnp.float32
        level = jax.lax.Precision.HIGHEST if precision == "float32" else jax.lax.Precision.DEFAULT
        x, y = (jax.device_put(jnp.asarray(v, dtype), device) for v in (a, b))
        matmul = jax.jit(lambda x, y, level=level: jnp.matmul(x, y, precision=level))

        def step(matmul=matmul, x=x, y=y):
            for _ in range(MATMUL_CALLS):
                out = matmul(x, y)
            out.block_until_ready()

        def measure(step=step):
            timing = arms.time_steps(step, warmup=3, seconds=MATMUL_SECONDS)
            timing["per_call_s"] = timing["median_s"] / MATMUL_CALLS
            return timing

        note = {"float32": "precision HIGHEST", "tf32": "precision DEFAULT (TF32)"}.get(
            precision, "bfloat16 inputs"
        )
        record = {"system": "jax_matmul", "precision": precision, "note": note}
        arms.run("matmul", record, measure)

    for precision in PRECISIONS:
        variant = manifest["variants"][precision]
        record = {
            "system": "ours",
            "precision": precision,
            "compiler": "XLA",
            "note": f"TF {manifest['tensorflow']} HLO, policy {variant['dtype_policy']}, "
            f"TF32 {'on' if variant['tensorflow_tf32'] else 'off'}, compiled by jax's XLA",
        }
        arms.run(
            "ours",
            record,
            lambda variant=variant, precision=precision: run_ours(
                variant, precision, batch, weights, backend, device, arms, args
            ),
        )


_COPY = re.compile(r"(%[\w#.]+) = mhlo\.copy (%[\w#.]+) : (tensor<[^>]*>)")


def without_copies(text: str) -> str:
    """TensorFlow's module copies each updated variable before returning it (`mhlo.copy`, left
    over from HLO's `copy`); jax's GPU pipeline marks that op illegal (its CPU one does not).
    A reshape to the same shape is the same no-op in StableHLO."""
    return _COPY.sub(r"\1 = stablehlo.reshape \2 : (\3) -> \3", text)


def run_ours(variant, precision, batch, weights, backend, device, arms, args) -> dict:
    import jax
    import jax.extend.backend
    import jax.extend.mlir
    from jax._src.interpreters.mlir import make_ir_context
    from jax.extend.mlir import ir
    from jaxlib import xla_client

    module = (Path(args.artifacts) / variant["hlo"]).read_bytes()
    start = time.perf_counter()
    options = jax.extend.backend.get_compile_options(num_replicas=1, num_partitions=1)
    # The module as jax's own compile passes it (an MLIR module in jax's context), so the call
    # is the one jax itself makes (jax._src.compiler.backend_compile_and_load).
    with make_ir_context():
        stablehlo = ir.Module.parse(
            without_copies(str(ir.Module.parse(jax.extend.mlir.hlo_to_stablehlo(module))))
        )
        executable = backend.compile_and_load(stablehlo, xla_client.DeviceList((device,)), options)
    compile_s = time.perf_counter() - start

    values = []
    for param in variant["params"]:
        if param["source"] == "batch":
            value = batch[param["key"]]
        elif param["source"] == "weight":
            value = weights[param["name"]]
        else:
            value = np.full(param["shape"], param["value"], param["dtype"])
        if list(value.shape) != param["shape"] or value.dtype != np.dtype(param["dtype"]):
            raise ValueError(f"parameter {param} does not match {value.dtype}{value.shape}")
        values.append(jax.device_put(value, device))
    aliases = [(int(out), param) for out, param in variant["aliases"].items()]
    losses = []

    def step():
        outputs = executable.execute_sharded(values).disassemble_into_single_device_arrays()
        for out, param in aliases:  # the updated variables become the next step's inputs
            values[param] = outputs[out][0]
        loss = float(np.asarray(outputs[0][0]))
        if len(losses) < 2:
            losses.append(loss)
        return loss

    timing = arms.time_steps(step, warmup=3)
    reference = variant["reference_losses"]
    error = max(abs(g - r) / abs(r) for g, r in zip(losses, reference, strict=True))
    stats = device.memory_stats() or {}
    return {
        **timing,
        "compile_s": compile_s,
        "losses": losses,
        "reference_losses": reference,
        "loss_rel_error": error,
        "loss_check": "pass" if error <= LOSS_RTOL[precision] else "FAIL",
        "peak_memory_bytes": stats.get("peak_bytes_in_use"),
    }


# === torch worker: torch matmul, and HF transformers eager and compiled ===


def torch_worker(args: argparse.Namespace, arms: Arms) -> None:
    import torch
    import transformers

    manifest, batch, _ = load_artifacts(Path(args.artifacts))
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.type != "cuda" and not args.tiny:
        raise SystemExit("torch sees no GPU; only --tiny runs on CPU")
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    arms.write(
        {
            "kind": "meta",
            "worker": "torch",
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "device": f"{device.type}: {name}",
        }
    )

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize()

    def peak_memory() -> int | None:
        return torch.cuda.max_memory_allocated() if device.type == "cuda" else None

    def reset(precision: str) -> None:
        torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
        torch.backends.cudnn.allow_tf32 = precision == "tf32"
        if device.type == "cuda":
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()

    a, b = matmul_operands(manifest)
    for precision in PRECISIONS:
        dtype = torch.bfloat16 if precision == "bfloat16" else torch.float32
        x, y = (torch.from_numpy(v).to(device, dtype) for v in (a, b))
        out = torch.empty(x.shape[0], y.shape[1], dtype=dtype, device=device)

        def step(x=x, y=y, out=out):
            with torch.inference_mode():
                for _ in range(MATMUL_CALLS):
                    torch.matmul(x, y, out=out)
            sync()

        def measure(step=step, precision=precision):
            reset(precision)
            timing = arms.time_steps(step, warmup=3, seconds=MATMUL_SECONDS)
            timing["per_call_s"] = timing["median_s"] / MATMUL_CALLS
            return timing

        note = {"float32": "allow_tf32=False", "tf32": "allow_tf32=True"}.get(
            precision, "bfloat16 inputs"
        )
        arms.run(
            "matmul", {"system": "torch_matmul", "precision": precision, "note": note}, measure
        )

    for compiled, precision in HF_ARMS:
        record = {
            "system": "hf",
            "precision": precision,
            "compiler": "torch.compile" if compiled else "eager",
        }

        def measure(precision=precision, compiled=compiled, record=record):
            reset(precision)
            step, note = hf_train_step(manifest, batch, device, precision, compiled)
            record["note"] = note
            losses = []

            def timed_step():
                loss = step()  # .item(): the step ends synchronized
                if len(losses) < 2:
                    losses.append(loss)

            timing = arms.time_steps(timed_step, warmup=3)
            return {**timing, "losses": losses, "peak_memory_bytes": peak_memory()}

        arms.run("hf_compile" if compiled else "hf_eager", record, measure)


def hf_train_step(manifest: dict, batch: dict, device, precision: str, compiled: bool):
    """`(step, note)`: HF's train step as `benchmarking/torch_systems.build_hf` builds it (same
    loss, Adam at 1e-4, autocast for bfloat16), on `device`; `compiled` wraps the loss and the
    optimizer step in `torch.compile`."""
    import torch
    import transformers

    torch.manual_seed(0)
    config = transformers.AlbertConfig(**manifest["hf_config"])
    model = transformers.AlbertForPreTraining(config).to(device).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    t = {k: torch.from_numpy(np.ascontiguousarray(v)).to(device) for k, v in batch.items()}
    encoder_inputs = dict(
        input_ids=t["input_word_ids"].long(),
        attention_mask=t["input_mask"].long(),
        token_type_ids=t["input_type_ids"].long(),
    )
    positions = t["masked_lm_positions"].long()
    mlm_ids = t["masked_lm_ids"].long()
    mlm_weights = t["masked_lm_weights"]
    sop_labels = t["sentence_order_label"].long()
    hidden, vocab = config.hidden_size, config.vocab_size
    bf16 = precision == "bfloat16"

    def loss_fn():
        with torch.autocast(device.type, torch.bfloat16, enabled=bf16):
            out = model.albert(**encoder_inputs)
            index = positions[:, :, None].expand(-1, -1, hidden)  # [B, P, H]
            gathered = torch.gather(out.last_hidden_state, 1, index)
            mlm_logits = model.predictions(gathered).float()
            sop_logits = model.sop_classifier(out.pooler_output).float()
        ce = torch.nn.functional.cross_entropy(
            mlm_logits.reshape(-1, vocab), mlm_ids.reshape(-1), reduction="none"
        )
        flat_weights = mlm_weights.reshape(-1)
        mlm_loss = (ce * flat_weights).sum() / (flat_weights.sum() + 1e-5)
        return mlm_loss + torch.nn.functional.cross_entropy(sop_logits, sop_labels)

    def optimizer_step():
        optimizer.step()

    if compiled:
        loss_fn = torch.compile(loss_fn)
        optimizer_step = torch.compile(optimizer_step)

    def step():
        loss = loss_fn()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer_step()
        return loss.item()

    note = f"attn={model.config._attn_implementation}, Adam"
    if bf16:
        note += ", torch.autocast bfloat16"
    if compiled:
        note += ", torch.compile (inductor, default mode) of the loss and of Adam's step"
    return step, note


# === the parent: runs the workers, prints the table, writes results.json ===


def run_worker(name: str, python: str, args: argparse.Namespace, results: Path, deadline: float):
    """Runs one worker in its own process group until it ends or `deadline` + a grace passes
    (then the group, torch's compile workers included, is killed)."""
    command = [
        python,
        str(Path(__file__).resolve()),
        "--worker",
        name,
        "--artifacts",
        str(args.artifacts),
        "--results",
        str(results),
        "--deadline",
        str(deadline),
        "--seconds",
        str(args.seconds),
        *(["--tiny"] if args.tiny else []),
    ]
    env = dict(os.environ, XLA_PYTHON_CLIENT_PREALLOCATE="false", PYTHONUNBUFFERED="1")
    process = subprocess.Popen(command, env=env, start_new_session=True)
    try:
        code = process.wait(timeout=max(1.0, deadline + KILL_GRACE_S - time.time()))
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        log(f"[kill] {name} worker: past the time budget")
        return "killed"
    return f"exit {code}"


def summarize(records: list[dict], manifest: dict) -> list[dict]:
    """Adds examples/s, FLOP/s and MFU (over the best matmul of the same precision) to the timed
    arms; returns the timed and untimed arms (meta records dropped)."""
    mm = manifest["matmul"]
    matmul_flops = 2.0 * mm["m"] * mm["k"] * mm["n"]
    train_flops = manifest["train_step_flops"]
    batch = manifest["shape"]["batch"]
    arms = [r for r in records if r.get("kind") != "meta"]
    best = {}
    for r in arms:
        if r["system"].endswith("_matmul") and r["status"] == "ok":
            r["flops_per_s"] = matmul_flops / r["per_call_s"]
            best[r["precision"]] = max(best.get(r["precision"], 0.0), r["flops_per_s"])
    for r in arms:
        if not r["system"].endswith("_matmul") and r["status"] == "ok":
            r["examples_per_s"] = batch / r["median_s"]
            r["flops_per_s"] = train_flops / r["median_s"]
            if r["precision"] in best:
                r["mfu"] = r["flops_per_s"] / best[r["precision"]]
    return arms


def table(arms: list[dict]) -> str:
    """Markdown: one row per arm (matmuls: ms per call, ours and HF: ms per step), then the loss
    checks of ours."""
    lines = [
        "| system | precision | compiler | examples/s | ms (median, best) | TFLOP/s | MFU "
        "| compile + 1st step, s | peak GiB |",
        "|" + "---|" * 9,
    ]
    for r in arms:
        compiler = r.get("compiler", "-")
        if r["status"] != "ok":
            reason = r.get("reason", "")
            lines.append(
                f"| {r['system']} | {r['precision']} | {compiler} | {r['status']}: {reason} |||||"
            )
            continue
        timed = r["per_call_s"] if "per_call_s" in r else r["median_s"]
        best = r["best_s"] / MATMUL_CALLS if "per_call_s" in r else r["best_s"]
        eps = f"{r['examples_per_s']:.1f}" if "examples_per_s" in r else "-"
        mfu = f"{100 * r['mfu']:.0f}%" if "mfu" in r else "-"
        first = f"{r.get('compile_s', 0.0) + r['first_step_s']:.1f}"
        peak = r.get("peak_memory_bytes")
        peak = f"{peak / 2**30:.2f}" if peak else "-"
        lines.append(
            f"| {r['system']} | {r['precision']} | {compiler} | {eps} | "
            f"{1e3 * timed:.3f}, {1e3 * best:.3f} | {r['flops_per_s'] / 1e12:.1f} | {mfu} "
            f"| {first} | {peak} |"
        )
    checks = [
        f"ours {r['precision']}: first losses {r['losses']} vs TensorFlow CPU XLA "
        f"{r['reference_losses']} (max rel. error {r['loss_rel_error']:.1e}, {r['loss_check']})"
        for r in arms
        if r["system"] == "ours" and r["status"] == "ok"
    ]
    return "\n".join(lines + [""] + checks)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--artifacts", default=str(Path(__file__).parent / "artifacts"))
    parser.add_argument("--out", default=os.environ.get("OUT") or "gpu-results")
    parser.add_argument("--budget", type=float, default=330.0, help="seconds for all arms")
    parser.add_argument("--seconds", type=float, default=4.0, help="timed seconds per arm")
    parser.add_argument("--tiny", action="store_true", help="1 warm-up + 2 timed steps per arm")
    parser.add_argument("--jax-python", default=sys.executable, help="python with jax")
    parser.add_argument("--torch-python", default=sys.executable, help="python with torch")
    parser.add_argument("--worker", choices=("jax", "torch"), help=argparse.SUPPRESS)
    parser.add_argument("--results", help=argparse.SUPPRESS)
    parser.add_argument("--deadline", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.worker:
        arms = Arms(Path(args.results), args.deadline, args.tiny, args.seconds)
        {"jax": jax_worker, "torch": torch_worker}[args.worker](args, arms)
        return 0

    start = time.time()
    manifest = json.loads((Path(args.artifacts) / "manifest.json").read_text())
    if manifest["tiny"] != args.tiny:
        parser.error(f"--artifacts {args.artifacts}: tiny={manifest['tiny']}, --tiny={args.tiny}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results = out / "arms.jsonl"
    results.unlink(missing_ok=True)
    workers = {
        "jax": run_worker("jax", args.jax_python, args, results, start + JAX_SHARE * args.budget),
        "torch": run_worker("torch", args.torch_python, args, results, start + args.budget),
    }
    records = [json.loads(line) for line in results.read_text().splitlines()]
    arms = summarize(records, manifest)
    arms.append(
        {
            "system": "ours",
            "precision": "all",
            "compiler": "none (TF graph executor)",
            "status": "not run",
            "reason": "needs TensorFlow, which this machine lacks; only the XLA step travels",
        }
    )
    report = {
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(start)),
        "wall_s": time.time() - start,
        "workers": workers,
        "meta": [r for r in records if r.get("kind") == "meta"],
        "manifest": {k: v for k, v in manifest.items() if k != "variants"},
        "arms": arms,
    }
    (out / "results.json").write_text(json.dumps(report, indent=1) + "\n")
    for meta in report["meta"]:
        log(f"{meta['worker']}: " + ", ".join(f"{k}={v}" for k, v in meta.items() if k != "kind"))
    log(table(arms))
    log(f"workers: {workers}; {report['wall_s']:.0f} s; wrote {out / 'results.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
