"""Task distillation (issue 51, item 5): a fine-tuned classifier teaches smaller ALBERT students
on unlabeled in-domain text, and what each costs to serve.

The teacher is `albert_en_mini` fine-tuned on the Rotten Tomatoes training split (8,454 labels,
the size's defaults: learning rate 3e-4, 3 epochs; the best dev epoch kept). Each student is a
smaller ALBERT of the same vocabulary (the teacher's SentencePiece model), from random weights,
trained by `albert-tf distill --teacher TEACHER` to match the teacher's soft targets
(temperature 2) on unlabeled movie and review sentences: the training split's sentences without
their labels and VADER's other snippets (Amazon reviews, NYT editorials, tweets), about 21,500 texts
in all, over `EPOCHS` passes. No dev or test sentence is in it. Beside each distilled student,
the same config fine-tuned on the 8,454 labels alone (no teacher), so the teacher's share shows.

The students (chosen before the run, not tuned): ALBERT's cost is the layers' FLOPs, not the
parameter count (the layers share weights), so they shrink the hidden size and the depth:

  L2-H128: 2 layers of 128 (2 heads, FFN 512), embeddings 128: about 1/8 of the teacher's FLOPs
  L4-H128: 4 layers of 128 (2 heads, FFN 512), embeddings 128: about 1/4

Reported for the teacher and each student: dev and test accuracy (the test split scored once),
the int8 ONNX classifier's size (`export --onnx`: strings in, tokenizer inside) and its batch-1
latency (p50 over the test sentences, ONNX Runtime with every core of this process), and the
CPU. Latency is measured in its own stage (`--latency`), to be run with nothing else on the
machine; the accuracies do not depend on it.

    python -m experiments.task_distillation             # teacher, unlabeled text, students
    python -m experiments.task_distillation --latency   # sizes and latency (an idle machine)

Every stage is skipped when its output exists, so the script resumes where it stopped. Results
in experiments/results/task_distillation/results.json and table.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from experiments.rotten_tomatoes import TRUTH, VADER_DIR, fetch, snippet_rows, split

ROOT = Path(__file__).resolve().parents[1]

WORK = ROOT / "data" / "task_distillation"
VADER = ROOT / "data" / "rotten_tomatoes"  # the sdist and split the other experiments use
RESULTS = ROOT / "experiments" / "results" / "task_distillation"
TEACHER = {"init": "albert_en_mini", "learning_rate": 3e-4, "epochs": 3, "seed": 1}
MAX_SEQ_LENGTH = 64
EPOCHS = 10  # passes of distillation over the unlabeled text
STUDENTS = {
    "L2-H128": dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
                    intermediate_size=512, embedding_size=128),
    "L4-H128": dict(hidden_size=128, num_hidden_layers=4, num_attention_heads=2,
                    intermediate_size=512, embedding_size=128),
}  # fmt: skip
# The labels-only arm of a student config: fine-tuned from random weights on the 8,454 labels,
# at the learning rate the label-efficiency curve picked for random init at all labels (3e-4),
# for the epochs a random-init run needs (10).
LABELS_ONLY = {"learning_rate": 3e-4, "epochs": 10, "seed": 1}


def cli(*args: str) -> None:
    print("+ albert-tf " + " ".join(args), flush=True)
    subprocess.run([sys.executable, "-m", "albert_tf.cli", *args], check=True)


def data(work: Path) -> dict[str, Path]:
    """The Rotten Tomatoes split and the unlabeled in-domain text (one text a line)."""
    paths = split(fetch(VADER), VADER / "split")
    unlabeled = work / "unlabeled.txt"
    if not unlabeled.is_file():
        work.mkdir(parents=True, exist_ok=True)
        lines = paths["train"].read_text(encoding="utf-8").splitlines()[1:]
        texts = [line.rsplit("\t", 1)[0] for line in lines]
        for name in ("amazonReviewSnippets", "nytEditorialSnippets", "tweets"):
            rows = snippet_rows(fetch(VADER, f"{VADER_DIR}/{name}{TRUTH}"))
            texts += [text for _, _, text in rows]
        held_out = {
            line.rsplit("\t", 1)[0]
            for name in ("dev", "test")
            for line in paths[name].read_text(encoding="utf-8").splitlines()[1:]
        }
        texts = [t for t in texts if t.strip() and t not in held_out]
        unlabeled.write_text("\n".join(texts) + "\n", encoding="utf-8")
    return {**paths, "unlabeled": unlabeled}


def scores(directory: Path, paths: dict[str, Path]) -> dict:
    """Dev and test accuracy of a fine-tuned directory (each split scored once), and what its
    training ran (dtype, steps, hardware; a distilled student's are in its distill.json)."""
    from albert_tf.finetune.predict import load_finetuned, predict_file

    model = load_finetuned(directory)
    accuracies = {
        f"{name}_accuracy": predict_file(model, str(paths[name]))[1]["accuracy"]
        for name in ("dev", "test")
    }
    distilled = directory / "distill.json"
    ran = (
        json.loads(distilled.read_text()).get("ran") if distilled.is_file() else model.record.ran()
    )
    return {**accuracies, "ran": ran}


def teacher(work: Path, paths: dict[str, Path]) -> Path:
    target = work / "teacher"
    if not (target / "finetune.json").is_file():
        cli("finetune", "--task", "classify", "--train", str(paths["train"]),
            "--eval", str(paths["dev"]), "--init", TEACHER["init"],
            "--learning-rate", str(TEACHER["learning_rate"]), "--epochs", str(TEACHER["epochs"]),
            "--seed", str(TEACHER["seed"]), "--max-seq-length", str(MAX_SEQ_LENGTH),
            "--restarts", "0", "--dtype", "float32", "--output", str(target), "--quiet")  # fmt: skip
    return target


def student_config(work: Path, name: str, teacher_dir: Path) -> Path:
    """The student's config JSON: the teacher's, with the student's sizes."""
    path = work / f"config-{name}.json"
    config = json.loads((teacher_dir / "albert_config.json").read_text())
    path.write_text(json.dumps({**config, **STUDENTS[name]}, indent=2) + "\n")
    return path


def distilled(work: Path, name: str, teacher_dir: Path, paths: dict[str, Path]) -> Path:
    target = work / f"student-{name}"
    if not (target / "distill.json").is_file():
        cli("distill", "--teacher", str(teacher_dir), "--unlabeled", str(paths["unlabeled"]),
            "--init", "random", "--config", str(student_config(work, name, teacher_dir)),
            "--eval", str(paths["dev"]), "--epochs", str(EPOCHS),
            "--max-seq-length", str(MAX_SEQ_LENGTH), "--seed", "1", "--dtype", "float32",
            # the defaults of the run recorded (distill's until issue 60)
            "--learning-rate", "5e-4", "--no-teacher-data",
            "--output", str(target), "--quiet")  # fmt: skip
    return target


def labels_only(work: Path, name: str, teacher_dir: Path, paths: dict[str, Path]) -> Path:
    target = work / f"labels-only-{name}"
    if not (target / "finetune.json").is_file():
        cli("finetune", "--task", "classify", "--train", str(paths["train"]),
            "--eval", str(paths["dev"]), "--init", "random",
            "--config", str(student_config(work, name, teacher_dir)),
            "--sp-model", str(teacher_dir / "spm.model"),
            "--learning-rate", str(LABELS_ONLY["learning_rate"]),
            "--epochs", str(LABELS_ONLY["epochs"]), "--seed", str(LABELS_ONLY["seed"]),
            "--max-seq-length", str(MAX_SEQ_LENGTH), "--restarts", "0", "--dtype", "float32",
            "--output", str(target), "--quiet")  # fmt: skip
    return target


def int8_file(directory: Path) -> Path:
    path = directory / "onnx" / "classifier_int8.onnx"
    if not path.is_file():
        cli("export", "--finetuned", str(directory), "--onnx", "--quiet")
    return path


def latency(path: Path, texts: list[str], calls: int = 400) -> dict:
    """Batch-1 p50 of the raw-string int8 classifier over `texts` (every core of this process)."""
    from albert_tf.runtimes import available_cores
    from albert_tf.runtimes.triton.model import Classifier

    classifier = Classifier(path, available_cores(), 1)
    for text in texts[:20]:
        classifier({"text": [text]})
    times = []
    for i in range(calls):
        started = time.perf_counter()
        classifier({"text": [texts[i % len(texts)]]})
        times.append(time.perf_counter() - started)
    return {"p50_ms": round(1000 * statistics.median(times), 3), "calls": calls,
            "threads": available_cores(), "size_mb": round(path.stat().st_size / 2**20, 2)}  # fmt: skip


def cpu() -> str:
    """This machine as the figures name it: the CPU model, its instruction sets, its cores."""
    from albert_tf.benchmarking.machine import cpu_description

    d = cpu_description()
    return f"{d['model']} ({', '.join(d['flags'])}), {d['cores']} cores"


def table(results: dict) -> str:
    """The results as Markdown: accuracies with their binomial standard error (one seed each:
    the SE of the test split's sampling, not of the training draw)."""
    rows = ["| model | trained by | dev accuracy | test accuracy (± SE) | int8 ONNX | batch-1 p50 |",
            "|---|---|---|---|---|---|"]  # fmt: skip
    n = results.get("test_sentences")
    for name, row in results["models"].items():
        served = row.get("int8")
        size = f"{served['size_mb']} MB" if served else "-"
        p50 = f"{served['p50_ms']} ms" if served else "-"
        p = row["test_accuracy"]
        se = f" ± {(p * (1 - p) / n) ** 0.5:.3f}" if n else ""
        rows.append(f"| {name} | {row['trained_by']} | {row['dev_accuracy']:.3f} | "
                    f"{p:.3f}{se} | {size} | {p50} |")  # fmt: skip
    return "\n".join(rows) + f"\n\nLatency: {results.get('cpu', '-')}.\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=WORK, help="stage outputs (ignored by git)")
    parser.add_argument("--latency", action="store_true", help="sizes and batch-1 latency only")
    args = parser.parse_args(argv)
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / "results.json"
    results = json.loads(path.read_text()) if path.is_file() else {"models": {}}
    paths = data(args.work)
    teacher_dir = teacher(args.work, paths)
    runs = {"teacher (albert_en_mini, L4-H256)": (teacher_dir, "8,454 labels")}
    for name in STUDENTS:
        runs[f"{name}, distilled"] = (
            distilled(args.work, name, teacher_dir, paths),
            f"the teacher, {EPOCHS} passes over unlabeled text",
        )
        runs[f"{name}, labels only"] = (
            labels_only(args.work, name, teacher_dir, paths),
            "8,454 labels, no teacher",
        )
    texts = [line.rsplit("\t", 1)[0] for line in
             paths["test"].read_text(encoding="utf-8").splitlines()[1:]]  # fmt: skip
    results["test_sentences"] = len(texts)
    for name, (directory, trained_by) in runs.items():
        row = results["models"].setdefault(name, {})
        if "test_accuracy" not in row:
            row.update(trained_by=trained_by, directory=str(directory.relative_to(args.work)),
                       **scores(directory, paths))  # fmt: skip
        if args.latency:
            row["int8"] = latency(int8_file(directory), texts)
            results["cpu"] = cpu()
        path.write_text(json.dumps(results, indent=2) + "\n")
    (RESULTS / "table.md").write_text(table(results))
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
