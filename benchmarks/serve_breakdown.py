"""Where a served request's time goes: `albert-tf serve` at concurrency 1, process by process,
and the served file's cost per text by batch size.

`serve_load.py` measures the server under load against its peer; this script explains its
first two ratios (the engine's overhead at concurrency 1, and what dynamic batching gains):

- `routes`: closed loops at concurrency 1 through the front (`--port`) and straight to Triton's
  own HTTP port (no front), each with the CPU milliseconds per request spent in each process of
  the server (the front, `tritonserver`, the Python backend's stubs), beside the served file's
  batch-1 latency in this process;
- `batches`: the served ONNX file in this process at batch 1, 2, 4, 8 and 16 with one and two
  ONNX Runtime threads, milliseconds per text.

    python benchmarks/serve_breakdown.py --finetuned DIR [--duration 12]
        [--json benchmarks/results/serving-breakdown.json]

DIR must hold triton/ (`albert-tf export --finetuned DIR --triton`). Run it on an otherwise idle
machine: the JSON and the table name the CPU.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from serve_load import (
    Served,
    _body,
    closed_loop,
    fixed_texts,
    in_process,
    machine,
    served_threads,
    short_texts,
)

BATCHES = (1, 2, 4, 8, 16)


def _triton_body(text: str) -> bytes:
    """A one-text request in Triton's own [n, 1] shape."""
    tensor = {"name": "text", "datatype": "BYTES", "shape": [1, 1], "data": [text]}
    return json.dumps({"inputs": [tensor]}).encode()


def _role(name: str) -> str:
    return {"tritonserver": "tritonserver", "triton_python_backend_stub": "stubs"}.get(
        name, "front"
    )


def cpu_by_role(served: Served) -> dict[str, float]:
    """CPU seconds so far of the server's processes, summed by role."""
    totals: dict[str, float] = {}
    for process in served.tree():
        try:
            name, times = process.name(), process.cpu_times()
        except Exception:  # noqa: BLE001 (a process that just ended)
            continue
        totals[_role(name)] = totals.get(_role(name), 0.0) + times.user + times.system
    return totals


def route(served: Served, url: str, bodies: list[bytes], seconds: float) -> dict:
    """Concurrency 1 on `url`: p50 and the CPU ms per answered request of each role."""
    asyncio.run(closed_loop(url, bodies, 1, 2.0))  # warm-up
    before = cpu_by_role(served)
    record = asyncio.run(closed_loop(url, bodies, 1, seconds))
    after = cpu_by_role(served)
    ok = [t for t, status in record if status == 200]
    cpu = {k: round(1000 * (after[k] - before.get(k, 0.0)) / len(ok), 3) for k in after}
    return {
        "p50_ms": round(1000 * statistics.median(ok), 3),
        "requests": len(ok),
        "errors": len(record) - len(ok),
        "cpu_ms_per_request": cpu,
    }


def per_text(classifier, texts: list[str], batch: int, seconds: float) -> float:
    """Milliseconds per text of `classifier` (the served file's `Classifier`) at `batch` texts
    a call."""
    classifier(classifier.texts({"text": texts[:batch]}))  # warm-up
    done, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds or done < 10 * batch:
        chunk = [texts[(done + j) % len(texts)] for j in range(batch)]
        classifier(classifier.texts({"text": chunk}))
        done += batch
    return round(1000 * (time.perf_counter() - start) / done, 3)


def run(args) -> dict:
    from albert_tf.export.triton.repository import NUL_SUBSTITUTE
    from albert_tf.runtimes.triton.model import Classifier

    triton = args.finetuned / "triton" / "classifier"
    model = triton / "1" / "model.onnx"
    inputs = {"fixed128": fixed_texts(args.finetuned / "spm.model"), "short": short_texts()}
    threads = served_threads(triton / "config.pbtxt")
    results: dict = {"machine": machine(), "served_threads": threads, "routes": {}, "batches": {}}
    for n in (1, 2):  # one ONNX Runtime session per thread count, for every input and batch
        classifier = Classifier(model, n, 1, NUL_SUBSTITUTE)
        for kind, texts in inputs.items():
            for batch in BATCHES:
                ms = per_text(classifier, texts, batch, args.duration / 3)
                results["batches"].setdefault(kind, {}).setdefault(str(n), {})[str(batch)] = ms
                print(f"in process, {kind}, {n} thread(s), batch {batch}: {ms} ms/text", flush=True)
    served = Served(args.finetuned, [], Path(tempfile.mkdtemp(prefix="serve-breakdown-")) / "log")
    try:
        for kind, texts in inputs.items():
            measured = {"in_process": in_process(model, threads, texts, args.duration)}
            for name, url, body in (
                ("front", served.url, lambda text: _body([text])),
                ("triton_direct", served.triton_url, _triton_body),
            ):
                measured[name] = route(served, url, [body(t) for t in texts], args.duration)
                print(f"{kind}, {name}: {measured[name]}", flush=True)
            results["routes"][kind] = measured
    finally:
        served.stop()
    return results


def table(results: dict) -> str:
    """The routes (p50, its ratio to the in-process floor, CPU ms a request by role), then the
    cost per text by batch size, as Markdown."""
    lines = [
        "| input | route | p50 ms | over in-process | front | tritonserver | stubs |",
        "|---|---|---|---|---|---|---|",
    ]
    for kind, measured in results["routes"].items():
        floor = measured["in_process"]["p50_ms"]
        lines.append(f"| {kind} | in process, batch 1 | {floor} | 1.00x | | | |")
        for name in ("triton_direct", "front"):
            r = measured[name]
            cpu = r["cpu_ms_per_request"]
            lines.append(
                f"| {kind} | {name.replace('_', ' ')} | {r['p50_ms']} | "
                f"{r['p50_ms'] / floor:.2f}x | {cpu.get('front', 0):.2f} | "
                f"{cpu.get('tritonserver', 0):.2f} | {cpu.get('stubs', 0):.2f} |"
            )
    lines += ["", "| input | threads | " + " | ".join(f"batch {b}" for b in BATCHES) + " |"]
    lines.append("|---|---|" + "---|" * len(BATCHES))
    for kind, by_threads in results["batches"].items():
        for n, by_batch in by_threads.items():
            lines.append(f"| {kind} | {n} | " + " | ".join(map(str, by_batch.values())) + " |")
    machine = results["machine"]
    return "\n".join(lines) + f"\n\n{machine['cpu']}, {machine['cores']} cores\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--finetuned", type=Path, help="a fine-tuned DIR with triton/")
    parser.add_argument("--report", type=Path, metavar="JSON", help="print a saved run's table")
    parser.add_argument("--duration", type=float, default=12.0, help="seconds per route")
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args(argv)
    if args.report:
        print(table(json.loads(args.report.read_text())))
        return 0
    if args.finetuned is None:
        parser.error("--finetuned DIR is needed (or --report JSON)")
    results = run(args)
    print(table(results))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    sys.exit(main())
