"""Tokenizer throughput (sentences/s): the preprocessing SavedModel, the Python reference, and
Hugging Face's AlbertTokenizerFast when `transformers` is installed.

    python benchmarks/bench_tokenizer.py [--sp-model FILE] [--num-sentences N] [--batch-size B]

Sentences are English prose lines from `pydoc_data.topics` (ships with CPython), cycled to N.
Every implementation tokenizes the same sentences; the table also reports the share of sentences
whose ids equal the Python reference (the original ALBERT tokenization). Results are printed and
written as JSON to benchmarks/results/bench_tokenizer.json (git-ignored).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(os.environ.get("ALBERT_TF_FIXTURES") or REPO / "tests" / "fixtures")


def load_sentences(count: int) -> list[str]:
    """`count` non-empty prose lines from pydoc_data.topics, cycled if needed."""
    import pydoc_data.topics

    lines = [
        line.strip()
        for text in pydoc_data.topics.topics.values()
        for line in text.splitlines()
        if len(line.split()) >= 4
    ]
    return [lines[i % len(lines)] for i in range(count)]


def throughput(run: Callable[[list[str]], list[list[int]]], sentences, batch_size, repeats):
    """(best sentences/s over `repeats`, ids of the last run); one warm-up batch first."""
    run(sentences[:batch_size])
    best, ids = 0.0, []
    for _ in range(repeats):
        start = time.perf_counter()
        ids = [
            row
            for i in range(0, len(sentences), batch_size)
            for row in run(sentences[i : i + batch_size])
        ]
        best = max(best, len(sentences) / (time.perf_counter() - start))
    return best, ids


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sp-model", default=str(FIXTURES / "tokenizer" / "spm.model"))
    parser.add_argument("--num-sentences", type=int, default=20_000)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--seq-length", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--output", default=str(REPO / "benchmarks" / "results" / "bench_tokenizer.json")
    )
    args = parser.parse_args()

    import tensorflow as tf
    import tensorflow_hub as hub
    import tensorflow_text  # noqa: F401  (ops of the SavedModel)

    from albert_tf.preprocess.preprocess_model import save_preprocess_model
    from albert_tf.preprocess.tokenizer import AlbertTokenizer

    sentences = load_sentences(args.num_sentences)
    reference = AlbertTokenizer(args.sp_model)
    results = []

    def record(name, run, batch_size):
        rate, ids = throughput(run, sentences, batch_size, args.repeats)
        results.append(
            dict(name=name, batch_size=batch_size, sentences_per_s=round(rate, 1), ids=ids)
        )
        print(f"  {name}: {rate:,.0f} sentences/s", flush=True)

    work = Path(tempfile.mkdtemp(prefix="bench-tokenizer-"))
    try:
        preprocess = hub.load(
            str(save_preprocess_model(args.sp_model, work / "preprocess", args.seq_length))
        )
        record(
            "SavedModel .tokenize",
            lambda b: preprocess.tokenize(tf.constant(b)).to_list(),
            args.batch_size,
        )
        record(
            f"SavedModel root call (tokenize + pack to {args.seq_length})",
            lambda b: [
                [t for t in row if t]
                for row in preprocess(tf.constant(b))["input_word_ids"].numpy().tolist()
            ],
            args.batch_size,
        )
        record("Python reference AlbertTokenizer", lambda b: [reference.encode(s) for s in b], 1)
        try:
            import transformers
        except ImportError:
            print("  transformers not installed: skipping AlbertTokenizerFast")
        else:
            # A local directory with spiece.model: converted in-process, nothing downloaded.
            shutil.copy(args.sp_model, work / "spiece.model")
            hf = transformers.AlbertTokenizerFast.from_pretrained(str(work), local_files_only=True)
            record(
                f"HF AlbertTokenizerFast (transformers {transformers.__version__})",
                lambda b: hf(b, add_special_tokens=False)["input_ids"],
                args.batch_size,
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)

    expected = results[2]["ids"]
    for row in results:
        ids = row.pop("ids")
        if row["name"].startswith("SavedModel root"):  # truncated to seq_length - 2
            expected_row = [
                [reference.cls_id, *e[: args.seq_length - 2], reference.sep_id] for e in expected
            ]
        else:
            expected_row = expected
        row["equal_to_reference"] = round(
            sum(a == b for a, b in zip(ids, expected_row, strict=True)) / len(ids), 4
        )

    header = f"{'implementation':<62} {'batch':>5} {'sentences/s':>12} {'= reference':>11}"
    print(f"\n{len(sentences)} sentences, {os.cpu_count()} CPUs, {args.sp_model}\n{header}")
    for row in results:
        print(
            f"{row['name']:<62} {row['batch_size']:>5} {row['sentences_per_s']:>12,.0f} {row['equal_to_reference']:>11.2%}"
        )
    output = Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    report = dict(
        sp_model=args.sp_model,
        vocab_size=reference.vocab_size,
        num_sentences=len(sentences),
        cpus=os.cpu_count(),
        python=platform.python_version(),
        tensorflow=tf.__version__,
        results=results,
    )
    output.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {output}")


if __name__ == "__main__":
    main()
