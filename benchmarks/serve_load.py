"""Serving under load: `albert-tf serve` (Triton) at concurrency, beside the HF ALBERT peer.

Each arm is a server started here on loopback and measured through the same client (aiohttp,
one request = `--texts` texts):

- `albert-tf`: `albert-tf serve DIR` (the int8 raw-string classifier, Triton's dynamic batching);
- `albert-tf, no batching`: the same with `--no-batching`;
- `hf-peer` (with `--peer`): HF ALBERT exported the usual way (`export --finetuned DIR --hf`,
  torch.onnx, ORT's transformer optimizer, dynamic int8) with transformers' tokenizer in
  Python, as a Triton Python-backend model behind the same `albert-tf serve` front;
- `in-process`: the served ONNX file in this process at batch 1 (`Classifier`, the code Triton
  runs), the floor the engine's overhead is measured from: with one served instance's threads,
  and with every core (what a user's own process would get at batch 1).

For each arm and input kind (`fixed128`: texts of 126 pieces, 128 with [CLS] and [SEP];
`short`: the sentences of examples/sentiment/test.tsv): a closed loop at each `--concurrency`
for `--duration` seconds, then an open loop (Poisson arrivals) at 50% and 80% of the closed
loop's best requests/s. Each phase reports p50/p90/p99 latency, requests/s, texts/s, errors by
status, the server's CPU (cores busy: front, tritonserver and its stubs) and its peak RSS.
`--soak SECONDS` adds a closed loop at concurrency 16 that reports RSS growth.

    python benchmarks/serve_load.py --finetuned DIR [--peer] [--duration 20]
        [--json benchmarks/results/serving-load.json] [--chart docs/assets/serving-under-load.png]
    python benchmarks/serve_load.py --finetuned DIR --tiny   # a dry run: 1 s phases, c = 1, 4

DIR must hold triton/ (`albert-tf export --finetuned DIR --triton`); the serving environment is
`albert-tf serve --create-env`'s (the peer adds transformers to it). Figures mean something only
on an otherwise idle machine: the JSON and the table name the CPU.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
CONCURRENCY = (1, 2, 4, 8, 16, 64)
OPEN_LOOP = (0.5, 0.8)


# === Inputs ===


def fixed_texts(sp_model: Path, pieces: int = 126, count: int = 64) -> list[str]:
    """`count` texts of exactly `pieces` SentencePiece pieces (words of the sentiment set)."""
    from albert_tf.preprocess.tokenizer import AlbertTokenizer

    tokenizer = AlbertTokenizer(sp_model)
    words = " ".join(short_texts()).split()
    rng = random.Random(0)
    texts = []
    while len(texts) < count:
        chosen: list[str] = []
        while len(tokenizer.tokenize(" ".join(chosen))) < pieces:
            chosen.append(rng.choice(words))
        while len(tokenizer.tokenize(" ".join(chosen))) > pieces:
            chosen.pop()
        if len(tokenizer.tokenize(" ".join(chosen))) == pieces:
            texts.append(" ".join(chosen))
    return texts


def short_texts() -> list[str]:
    """The sentences of examples/sentiment/test.tsv."""
    lines = (REPO / "examples" / "sentiment" / "test.tsv").read_text(encoding="utf-8").splitlines()
    return [line.split("\t")[0] for line in lines[1:] if line.strip()]


# === Servers ===


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


class Served:
    """`albert-tf serve DIRECTORY FLAGS...` in a process of its own, on free loopback ports."""

    def __init__(self, directory: Path, flags: list[str], log: Path):
        import urllib.request

        port, grpc, metrics, triton = free_ports(4)
        command = [
            sys.executable, "-m", "albert_tf.cli", "serve", str(directory), f"--port={port}",
            f"--grpc-port={grpc}", f"--metrics-port={metrics}", f"--triton-port={triton}",
            "--max-pending=1024", *flags,
        ]  # fmt: skip
        self.log = log
        with open(log, "wb") as out:
            self.process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        self.url = f"http://127.0.0.1:{port}/v2/models/classifier/infer"
        self.triton_url = f"http://127.0.0.1:{triton}/v2/models/classifier/infer"  # no front
        deadline = time.monotonic() + 300
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/health/ready", timeout=2):
                    break
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"serve did not start: {log.read_text()[-2000:]}") from None
                time.sleep(0.3)

    def tree(self) -> list:
        import psutil

        root = psutil.Process(self.process.pid)
        return [root, *root.children(recursive=True)]

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(120)


class Usage:
    """The server tree's CPU seconds and peak RSS over a phase, sampled every 0.1 s."""

    def __init__(self, served: Served):
        self.served = served
        self.peak_rss = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _cpu(self) -> float:
        total = 0.0
        for p in self.served.tree():
            try:
                times = p.cpu_times()
                total += times.user + times.system
            except Exception:  # noqa: BLE001 (a stub that just ended)
                continue
        return total

    def _sample(self) -> None:
        while not self._stop.wait(0.1):
            rss = 0
            for p in self.served.tree():
                try:
                    rss += p.memory_info().rss
                except Exception:  # noqa: BLE001
                    continue
            self.peak_rss = max(self.peak_rss, rss)

    def __enter__(self) -> Usage:
        self.cpu0, self.t0 = self._cpu(), time.perf_counter()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.cores = (self._cpu() - self.cpu0) / (time.perf_counter() - self.t0)


# === The client ===


def _body(texts: list[str]) -> bytes:
    tensor = {"name": "text", "datatype": "BYTES", "shape": [len(texts)], "data": texts}
    return json.dumps({"inputs": [tensor]}).encode()


async def _send(session, url: str, body: bytes, record: list) -> None:
    start = time.perf_counter()
    try:
        async with session.post(url, data=body) as response:
            await response.read()
            status = response.status
    except Exception as error:  # noqa: BLE001 (counted by kind)
        status = type(error).__name__
    record.append((time.perf_counter() - start, status))


async def closed_loop(url: str, bodies: list[bytes], concurrency: int, seconds: float) -> list:
    """`concurrency` clients, each sending its next request when the last one is answered."""
    from aiohttp import ClientSession, TCPConnector

    record: list = []
    async with ClientSession(connector=TCPConnector(limit=concurrency)) as session:
        deadline = time.perf_counter() + seconds

        async def client(i: int) -> None:
            n = i
            while time.perf_counter() < deadline:
                await _send(session, url, bodies[n % len(bodies)], record)
                n += concurrency

        await asyncio.gather(*(client(i) for i in range(concurrency)))
    return record


async def open_loop(url: str, bodies: list[bytes], rate: float, seconds: float) -> list:
    """Requests at Poisson arrivals of `rate` per second, whatever the answers."""
    from aiohttp import ClientSession, TCPConnector

    record: list = []
    rng = random.Random(0)
    async with ClientSession(connector=TCPConnector(limit=0)) as session:
        tasks, start, n = [], time.perf_counter(), 0
        at = start
        while at < start + seconds:
            await asyncio.sleep(max(0.0, at - time.perf_counter()))
            tasks.append(asyncio.create_task(_send(session, url, bodies[n % len(bodies)], record)))
            n += 1
            at += rng.expovariate(rate)
        await asyncio.gather(*tasks)
    return record


def summary(record: list, seconds: float, texts: int, usage: Usage) -> dict:
    """Latency percentiles (ms) of the answered requests, rates, errors by status, usage."""
    ok = sorted(t for t, status in record if status == 200)
    errors = Counter(str(status) for _, status in record if status != 200)
    pct = {f"p{q}_ms": round(1000 * float(np.percentile(ok, q)), 2) if ok else None
           for q in (50, 90, 99)}  # fmt: skip
    return {
        **pct,
        "requests_per_s": round(len(ok) / seconds, 1),
        "texts_per_s": round(len(ok) * texts / seconds, 1),
        "errors": dict(errors),
        "server_cores_busy": round(usage.cores, 2),
        "server_peak_rss_mb": round(usage.peak_rss / 2**20, 1),
    }


def measure_arm(served: Served, bodies: list[bytes], texts: int, args) -> dict:
    """The closed loops, then the open loops at fractions of the best closed-loop rate."""
    closed = {}
    asyncio.run(closed_loop(served.url, bodies, 2, 1.0))  # warm-up
    for c in args.concurrency:
        with Usage(served) as usage:
            record = asyncio.run(closed_loop(served.url, bodies, c, args.duration))
        closed[str(c)] = summary(record, args.duration, texts, usage)
        print(f"    c={c}: {closed[str(c)]}", flush=True)
    best = max(r["requests_per_s"] for r in closed.values())
    opened = {}
    for fraction in OPEN_LOOP:
        with Usage(served) as usage:
            record = asyncio.run(open_loop(served.url, bodies, best * fraction, args.duration))
        opened[f"{fraction:.0%}"] = {
            "rate": round(best * fraction, 1),
            **summary(record, args.duration, texts, usage),
        }
        print(f"    open {fraction:.0%}: {opened[f'{fraction:.0%}']}", flush=True)
    return {"closed": closed, "open": opened}


def soak(served: Served, bodies: list[bytes], seconds: float) -> dict:
    """Concurrency 16 for `seconds`: the server's RSS after a 10% warm-up and at the end."""
    asyncio.run(closed_loop(served.url, bodies, 16, max(1.0, seconds / 10)))
    first = sum(p.memory_info().rss for p in served.tree())
    record = asyncio.run(closed_loop(served.url, bodies, 16, seconds))
    last = sum(p.memory_info().rss for p in served.tree())
    return {
        "seconds": seconds,
        "rss_start_mb": round(first / 2**20, 1),
        "rss_end_mb": round(last / 2**20, 1),
        "growth": round(last / first - 1, 4),
        "errors": dict(Counter(str(s) for _, s in record if s != 200)),
    }


def served_threads(config: Path) -> int:
    """The ONNX Runtime threads of one served instance (its config.pbtxt)."""
    found = re.search(r'"intra_op_threads" value: \{ string_value: "(\d+)"', config.read_text())
    return int(found.group(1))


def in_process(model: Path, threads: int, texts: list[str], seconds: float) -> dict:
    """The served file at batch 1 in this process, with `threads` ONNX Runtime threads."""
    from albert_tf.export.triton.repository import NUL_SUBSTITUTE
    from albert_tf.runtimes.triton.model import Classifier

    classifier = Classifier(model, threads, 1, NUL_SUBSTITUTE)
    times, n, deadline = [], 0, time.perf_counter() + seconds
    while time.perf_counter() < deadline or n < 20:
        start = time.perf_counter()
        classifier(classifier.texts({"text": [texts[n % len(texts)]]}))
        times.append(time.perf_counter() - start)
        n += 1
    return {"p50_ms": round(1000 * statistics.median(times), 3), "calls": n, "threads": threads}


# === The peer: HF ALBERT exported the usual way ===

PEER_MODEL = '''"""benchmarks/serve_load.py's peer: transformers' tokenizer in Python, ONNX Runtime int8."""

import json
from pathlib import Path

import numpy as np


class TritonPythonModel:
    def initialize(self, args):
        import onnxruntime as ort
        from transformers import AutoTokenizer

        config = json.loads(args["model_config"])
        params = {k: v["string_value"] for k, v in config.get("parameters", {}).items()}
        version = Path(args["model_repository"]) / args["model_version"]
        self.tokenizer = AutoTokenizer.from_pretrained(str(version / "hf"))
        options = ort.SessionOptions()
        options.intra_op_num_threads = int(params.get("intra_op_threads") or 1)
        options.inter_op_num_threads = 1
        self.session = ort.InferenceSession(
            str(version / "model.onnx"), options, providers=["CPUExecutionProvider"]
        )
        self.names = {i.name for i in self.session.get_inputs()}
        self.labels = json.loads((version / "labels.json").read_text())
        self.max_length = json.loads((version / "max_length.json").read_text())

    def execute(self, requests):
        import triton_python_backend_utils as pb_utils

        texts, sizes = [], []
        for request in requests:
            values = pb_utils.get_input_tensor_by_name(request, "text").as_numpy().reshape(-1)
            texts += [v.decode("utf-8") for v in values]
            sizes.append(len(values))
        encoded = self.tokenizer(
            texts, padding=True, truncation=True, max_length=self.max_length, return_tensors="np"
        )
        feed = {k: v.astype(np.int64) for k, v in encoded.items() if k in self.names}
        logits = self.session.run(None, feed)[0]
        e = np.exp(logits - logits.max(axis=1, keepdims=True))
        p = (e / e.sum(axis=1, keepdims=True)).astype(np.float32)
        labels = np.array([self.labels[i].encode() for i in p.argmax(1)], dtype=object)
        responses, start = [], 0
        for n in sizes:
            tensors = [
                pb_utils.Tensor("label", labels[start : start + n].reshape(-1, 1)),
                pb_utils.Tensor("probabilities", p[start : start + n]),
            ]
            responses.append(pb_utils.InferenceResponse(output_tensors=tensors))
            start += n
        return responses
'''


def peer_repository(finetuned: Path, root: Path, env: Path) -> Path:
    """root/triton: the HF peer's repository, laid out as `export --triton` lays out ours (so
    `albert-tf serve` serves it); transformers is added to the serving environment `env`."""
    import shutil

    import onnx
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.transformers.optimizer import optimize_model
    from transformers import AutoModelForSequenceClassification

    from albert_tf.cli import main
    from albert_tf.finetune.directory import read_record
    from albert_tf.runtimes.triton.layout import config_pbtxt, default_config

    if not (finetuned / "hf").is_dir():
        assert main(["export", "--finetuned", str(finetuned), "--hf"]) == 0
    model = AutoModelForSequenceClassification.from_pretrained(str(finetuned / "hf")).eval()
    version = root / "triton" / "classifier" / "1"
    version.mkdir(parents=True)
    ids = torch.ones(2, 16, dtype=torch.long)
    axes = {0: "batch", 1: "sequence"}
    torch.onnx.export(
        model, (ids, torch.ones_like(ids), torch.zeros_like(ids)), str(root / "fp32.onnx"),
        input_names=["input_ids", "attention_mask", "token_type_ids"], output_names=["logits"],
        dynamic_axes={"input_ids": axes, "attention_mask": axes, "token_type_ids": axes,
                      "logits": {0: "batch"}}, opset_version=17, dynamo=False,
    )  # fmt: skip
    config = model.config
    optimized = optimize_model(
        str(root / "fp32.onnx"), "bert", config.num_attention_heads, config.hidden_size
    )
    optimized.save_model_to_file(str(root / "optimized.onnx"))
    quantize_dynamic(
        str(root / "optimized.onnx"),
        str(version / "model.onnx"),
        weight_type=QuantType.QInt8,
        # Shape inference knows no com.microsoft operator (the fused ones); all are float32.
        extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
    )
    shutil.copytree(finetuned / "hf", version / "hf")
    labels = [config.id2label[i] for i in range(config.num_labels)]
    (version / "labels.json").write_text(json.dumps(labels))
    max_length = read_record(finetuned).settings.max_seq_length
    (version / "max_length.json").write_text(json.dumps(max_length))
    (version / "model.py").write_text(PEER_MODEL)
    (root / "triton" / "classifier" / "config.pbtxt").write_text(
        config_pbtxt("classifier", ["text"], len(labels), default_config())
    )
    (root / "triton" / "report.json").write_text(json.dumps({"inputs": ["text"], "labels": labels}))
    from importlib import metadata

    pip = [str(env / "bin" / "python"), "-m", "pip", "install", "--quiet"]
    subprocess.run([*pip, f"transformers=={metadata.version('transformers')}"], check=True)
    return root


# === The run ===


def ratios(results: dict) -> dict:
    """The issue's ratios, where the run holds their arms (None where it does not)."""

    def closed(arm: str, kind: str, c: int) -> dict | None:
        return results["arms"].get(arm, {}).get(kind, {}).get("closed", {}).get(str(c))

    out = {}
    for kind in results["inputs"]:
        ours, alone = closed("albert-tf", kind, 8), closed("albert-tf, no batching", kind, 8)
        peer, one = closed("hf-peer", kind, 8), closed("albert-tf", kind, 1)
        floor = results["in_process"].get(kind)
        best = results.get("in_process_all_cores", {}).get(kind)
        out[kind] = {
            "c1_p50_over_in_process_batch1": one and floor and round(one["p50_ms"] / floor["p50_ms"], 3),
            "c1_p50_over_in_process_batch1_all_cores": one and best and round(one["p50_ms"] / best["p50_ms"], 3),
            "c8_throughput_batching_over_none": ours and alone and round(ours["requests_per_s"] / alone["requests_per_s"], 3),
            "c8_p99_batching_over_none": ours and alone and round(ours["p99_ms"] / alone["p99_ms"], 3),
            "c8_throughput_over_peer": ours and peer and round(ours["requests_per_s"] / peer["requests_per_s"], 3),
            "c8_p99_over_peer": ours and peer and round(ours["p99_ms"] / peer["p99_ms"], 3),
        }  # fmt: skip
    fixed, short = (closed("albert-tf", k, 8) for k in ("fixed128", "short"))
    out["short_over_fixed128_texts_per_s_c8"] = (
        fixed and short and round(short["texts_per_s"] / fixed["texts_per_s"], 3)
    )
    return out


def table(results: dict) -> str:
    """The closed loops as a Markdown table (p50/p99 in ms, requests/s), then the soak."""
    lines = [
        "| arm | input | concurrency | p50 ms | p99 ms | requests/s | errors | server cores |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for arm, kinds in results["arms"].items():
        for kind, measured in kinds.items():
            for c, r in measured["closed"].items():
                errors = ", ".join(f"{n} x {s}" for s, n in r["errors"].items()) or "0"
                lines.append(
                    f"| {arm} | {kind} | {c} | {r['p50_ms']} | {r['p99_ms']} | "
                    f"{r['requests_per_s']} | {errors} | {r['server_cores_busy']} |"
                )
    soak = results.get("soak")
    if soak:
        lines.append(
            f"\nSoak: {soak['seconds']:.0f} s at concurrency 16, RSS {soak['rss_start_mb']} -> "
            f"{soak['rss_end_mb']} MB ({100 * soak['growth']:+.2f}%), errors {soak['errors'] or 0}"
        )
    machine = results["machine"]
    return "\n".join(lines) + f"\n\n{machine['cpu']}, {machine['cores']} cores\n"


def chart(results: dict, path: Path) -> None:
    """p99 against requests/s, one line per arm and input kind (the closed loops)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(7, 4.5))
    for arm, kinds in results["arms"].items():
        for kind, measured in kinds.items():
            points = [
                (r["requests_per_s"], r["p99_ms"])
                for r in measured["closed"].values()
                if r["p99_ms"]
            ]
            axis.plot(*zip(*points, strict=True), marker="o", label=f"{arm}, {kind}")
    axis.set_xlabel("requests/s (closed loop, concurrency 1 to 64)")
    axis.set_ylabel("p99 latency (ms)")
    axis.set_yscale("log")
    axis.legend(fontsize=8)
    axis.set_title(
        f"Serving under load: {results['machine']['cpu']}, {results['machine']['cores']} cores",
        fontsize=9,
    )
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def machine() -> dict:
    """The CPU model, its instruction sets that decide the kernels, its cores, the Python."""
    from albert_tf.benchmarking.machine import cpu_description

    d = cpu_description()
    return {"cpu": d["model"], "flags": d["flags"], "cores": d["cores"],
            "python": platform.python_version()}  # fmt: skip


def run(args) -> dict:
    from albert_tf.runtimes import available_cores
    from albert_tf.runtimes.triton.serve_env import default_env_dir

    triton = args.finetuned / "triton"
    model, config = (
        triton / "classifier" / "1" / "model.onnx",
        triton / "classifier" / "config.pbtxt",
    )
    inputs = {"fixed128": fixed_texts(args.finetuned / "spm.model"), "short": short_texts()}
    inputs = {k: v for k, v in inputs.items() if k in args.inputs}
    results = {"machine": machine(), "args": {k: str(v) for k, v in vars(args).items()},
               "inputs": list(inputs), "in_process": {}, "arms": {}}  # fmt: skip
    floors = {"in_process": served_threads(config), "in_process_all_cores": available_cores()}
    for kind, texts in inputs.items():
        for key, threads in floors.items():
            results.setdefault(key, {})[kind] = in_process(model, threads, texts, args.duration)
            print(f"{key.replace('_', ' ')}, batch 1, {kind}: {results[key][kind]}", flush=True)
    work = Path(tempfile.mkdtemp(prefix="serve-load-"))
    arms = {
        "albert-tf": (args.finetuned, []),
        "albert-tf, no batching": (args.finetuned, ["--no-batching"]),
    }
    if args.peer:
        arms["hf-peer"] = (peer_repository(args.finetuned, work / "peer", default_env_dir()), [])
    for arm, (directory, flags) in arms.items():
        served = Served(directory, flags, work / f"{arm.replace(' ', '_')}.log")
        try:
            for kind, texts in inputs.items():
                print(f"{arm}, {kind}:", flush=True)
                bodies = [
                    _body(texts[i : i + args.texts])
                    for i in range(0, len(texts) - args.texts + 1, args.texts)
                ]
                results["arms"].setdefault(arm, {})[kind] = measure_arm(
                    served, bodies, args.texts, args
                )
            if args.soak and arm == "albert-tf":
                results["soak"] = soak(
                    served, [_body(inputs[next(iter(inputs))][: args.texts])], args.soak
                )
        finally:
            served.stop()
    results["ratios"] = ratios(results)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--finetuned", type=Path, help="a fine-tuned DIR with triton/")
    parser.add_argument(
        "--report", type=Path, metavar="JSON", help="print the table of a saved run and exit"
    )
    parser.add_argument("--duration", type=float, default=20.0, help="seconds per phase")
    parser.add_argument("--concurrency", default=",".join(map(str, CONCURRENCY)))
    parser.add_argument("--inputs", default="fixed128,short")
    parser.add_argument("--texts", type=int, default=1, help="texts per request")
    parser.add_argument("--peer", action="store_true", help="add the HF ALBERT peer")
    parser.add_argument("--soak", type=float, default=0.0, help="seconds at concurrency 16")
    parser.add_argument("--tiny", action="store_true", help="dry run: 1 s phases, c = 1, 4")
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--chart", type=Path, help="write the p99/throughput chart here (PNG)")
    args = parser.parse_args(argv)
    if args.report:
        saved = json.loads(args.report.read_text())
        print(table(saved) + json.dumps(saved["ratios"], indent=1))
        return 0
    if args.finetuned is None:
        parser.error("--finetuned DIR is needed (or --report JSON)")
    if args.tiny:
        args.duration, args.concurrency = 1.0, "1,4"
    args.concurrency = [int(c) for c in args.concurrency.split(",")]
    args.inputs = args.inputs.split(",")
    results = run(args)
    print(table(results) + json.dumps(results["ratios"], indent=1))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    if args.chart:
        chart(results, args.chart)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    sys.exit(main())
