"""ALBERT's ablations at small scale: embedding size, what is shared, NSP vs SOP.

The paper (Lan et al., ICLR 2020) rests its design on three tables, each run on ALBERT-base:
  Table 3: the embedding size E, with all parameters shared and with none shared;
  Table 4: sharing all parameters, the attention only, the FFN only, or nothing;
  Table 5: no inter-sentence loss vs NSP vs SOP, each model scored on MLM, NSP and SOP.
This script pretrains those rows with equal steps, batch and data, scores every checkpoint on
held-out MLM, NSP and SOP data (`albert-tf evaluate`), fine-tunes each on the Rotten Tomatoes
sentences (SST-2's source, so the paper's SST-2 column is the nearest comparison) with 3 seeds,
and writes the results JSON, a Markdown table beside the paper's numbers and PNG plots.

Rows (`rows()`): E x {all-shared, not-shared} with SOP (Table 3); shared-attention and
shared-FFN at the default E (Table 4, whose all/not-shared rows are Table 3's at that E); no
sentence loss and NSP at the default E, all shared (Table 5, whose SOP row is all-shared at that
E); and a randomly initialized model fine-tuned the same way, the floor every row should clear.

The full run (`FULL`) pretrains the tiny preset's shape (H=128, 4 layers, 4 heads, FFN 512, vocab
8k; E in 16..128, the paper's E/H ratios from 1/8 to 1) on `english-wordnet` (corpora.py: Brown,
State of the Union, Moby-Dick, Shakespeare, WordNet; 30.7 MB of training text, documents
shuffled so NSP's random segments come from any source), 5,000 steps x 32 x 64 tokens per row
(16M tokens, about two passes over the corpus), float32 so rows run on different CPUs agree in
kind. Why this size: on 2 cores a row pretrains in about 10 minutes and fine-tunes 3 seeds in
about 3; 13 rows make about 3 hours of wall time (6 CPU-hours), enough steps for MLM to reach
~20% held-out accuracy and for SOP to move off chance in the earlier 24k-step run
(experiments/README.md), and small enough to finish in two sessions. Settings were fixed before
the first row ran; nothing is tuned on the results.

Resumable: every finished row is a JSON file under the results directory (committed for the
full run), and a rerun skips it; an unfinished row resumes its pretraining from its last
checkpoint under --work. The manifest records the digests of the corpus, the SentencePiece
model and the records, and a rerun on different data refuses to mix rows.

`--small` runs the whole machinery in under 3 minutes with no download and no claims: the
embedded corpus of the quickstart, a 2-layer H=32 model, 20 steps per row and a word-order task
made from held-out sentences instead of Rotten Tomatoes.

Usage (niced on a shared machine):
  nice -n 10 python -m experiments.ablation                 # the full run (resumes)
  nice -n 10 python -m experiments.ablation --rows all-shared-E64 not-shared-E64
  python -m experiments.ablation --small --work /tmp/ablation-small
  python -m experiments.ablation --report-only              # table and plots from the rows so far
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import math
import random
import statistics
import sys
import time
from pathlib import Path

from albert_tf.config import CONFIG_FILE, SP_MODEL_FILE
from albert_tf.io_utils import atomic_file
from albert_tf.preprocess.pretraining_data.format import SENTENCE_TASKS
from experiments.ablation_report import write_report
from experiments.corpora import prepare_corpus
from experiments.rotten_tomatoes import fetch, finetune_and_score, split

ROOT = Path(__file__).resolve().parents[1]

EVAL_TASKS = ("sop", "nsp")  # held-out data every checkpoint is scored on
SHARING = {"all": "all-shared", "none": "not-shared", "attention": "shared-attention",
           "ffn": "shared-ffn"}  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Budget:
    """The scale of a run: model shape, data, pretraining and fine-tuning settings."""

    name: str
    corpus: str  # a corpora.CORPORA name, or "embedded" (the quickstart's corpus)
    model: dict  # AlbertConfig fields shared by every row (E and sharing vary)
    embedding_sizes: tuple[int, ...]
    default_embedding_size: int
    seq_length: int
    max_predictions: int
    dupe_factor: int
    train_steps: int
    batch_size: int
    learning_rate: float
    warmup_steps: int
    save_every: int
    finetune_seeds: tuple[int, ...]
    finetune_epochs: int
    finetune_learning_rate: float
    finetune_max_steps: int | None = None
    seed: int = 12345

    @property
    def task_title(self) -> str:
        """The downstream task's name in tables and plots."""
        return "word order" if self.corpus == "embedded" else "Rotten Tomatoes"


FULL = Budget(
    name="full",
    corpus="english-wordnet",
    model=dict(
        vocab_size=8000,
        hidden_size=128,
        num_hidden_layers=4,
        num_attention_heads=4,
        intermediate_size=512,
        max_position_embeddings=128,
    ),
    embedding_sizes=(16, 32, 64, 128),
    default_embedding_size=64,
    seq_length=64,
    max_predictions=10,
    dupe_factor=5,
    train_steps=5000,
    batch_size=32,
    learning_rate=4e-3,  # LAMB; stable for 24k steps at this size (experiments/README.md)
    warmup_steps=500,
    save_every=1000,
    finetune_seeds=(1, 2, 3),
    finetune_epochs=3,
    finetune_learning_rate=1e-3,  # the setting picked on dev in experiments/README.md
)

SMALL = Budget(
    name="small",
    corpus="embedded",
    model=dict(
        vocab_size=1000,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
    ),
    embedding_sizes=(8, 32),
    default_embedding_size=8,
    seq_length=32,
    max_predictions=5,
    dupe_factor=1,
    train_steps=20,
    batch_size=16,
    learning_rate=1e-3,
    warmup_steps=0,
    save_every=20,
    finetune_seeds=(1,),
    finetune_epochs=1,
    finetune_learning_rate=1e-3,
    finetune_max_steps=10,
)


@dataclasses.dataclass(frozen=True)
class Row:
    """One model of the ablation; `sentence_task` None means not pretrained (random init)."""

    name: str
    embedding_size: int
    shared_params: str
    sentence_task: str | None

    @property
    def tables(self) -> tuple[str, ...]:
        return tuple(t for t, rows in TABLE_MEMBERS.items() if rows(self))


def rows(budget: Budget) -> list[Row]:
    """Every row of the run, in the order they are trained: the default E's rows first (Tables
    4 and 5 and the random floor), then the rest of Table 3's E sweep."""
    e0 = budget.default_embedding_size
    out = [Row(f"{SHARING[s]}-E{e0}", e0, s, "sop") for s in ("all", "none", "attention", "ffn")]
    out += [Row(f"{task}-loss-E{e0}", e0, "all", task) for task in ("nsp", "none")]
    out.append(Row(f"random-init-E{e0}", e0, "all", None))
    out += [
        Row(f"{SHARING[sharing]}-E{e}", e, sharing, "sop")
        for e in budget.embedding_sizes
        for sharing in ("all", "none")
        if e != e0
    ]
    return out


TABLE_MEMBERS = {
    "table3": lambda r: r.sentence_task == "sop" and r.shared_params in ("all", "none"),
    "table4": lambda r: r.sentence_task == "sop",  # filtered to the default E in the report
    "table5": lambda r: r.sentence_task is not None and r.shared_params == "all",
}


# === Data ===


@dataclasses.dataclass(frozen=True)
class Prepared:
    """Paths of the prepared data: SentencePiece model, training and held-out record globs per
    sentence task, and the downstream task's train/dev/test TSVs."""

    sp_model: Path
    train: dict[str, str]
    heldout: dict[str, str]
    task: dict[str, Path]
    digests: dict[str, str]


def _digest(paths: list[Path]) -> str:
    sha = hashlib.sha256()
    for path in sorted(paths):
        sha.update(path.name.encode())
        sha.update(path.read_bytes())
    return sha.hexdigest()[:16]


def _embedded_corpus(work: Path) -> tuple[Path, Path]:
    from albert_tf.preprocess.corpus import build_default_corpus

    paths = build_default_corpus(work / "corpus", heldout_percent=10)
    return paths.train, paths.heldout


def word_order_task(heldout: Path, out: Path, seed: int = 0, size: int = 400) -> dict[str, Path]:
    """A labelled task made from held-out sentences, for `--small` (no download): label 1 when
    the sentence's words were shuffled, 0 when in their order. 50/25/25% train/dev/test."""
    rng = random.Random(seed)
    lines = [s for s in heldout.read_text(encoding="utf-8").splitlines() if len(s.split()) >= 6]
    rng.shuffle(lines)
    rows = []
    for i, sentence in enumerate(lines[:size]):
        words = sentence.replace("\t", " ").split()
        if i % 2:
            rng.shuffle(words)
        rows.append((" ".join(words), "shuffled" if i % 2 else "ordered"))
    parts = {"train": rows[: size // 2], "dev": rows[size // 2 : 3 * size // 4]}
    parts["test"] = rows[3 * size // 4 :]
    out.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, part in parts.items():
        paths[name] = out / f"{name}.tsv"
        with atomic_file(paths[name]) as tmp:
            tmp.write_text(
                "sentence\tlabel\n" + "".join(f"{t}\t{label}\n" for t, label in part),
                encoding="utf-8",
            )
    return paths


def prepare(budget: Budget, work: Path, progress: bool) -> Prepared:
    """Corpus, SentencePiece model, records for every sentence task, and the downstream task:
    each built once under `work` and reused."""
    from albert_tf.preprocess.pretraining_data import create_pretraining_data
    from albert_tf.preprocess.spm_train import train_sentencepiece

    if budget.corpus == "embedded":
        train_txt, heldout_txt = _embedded_corpus(work)
    else:
        train_txt, heldout_txt = prepare_corpus(work, budget.corpus, mix_seed=budget.seed)
    sp_model = work / SP_MODEL_FILE
    if not sp_model.exists():
        # Two threads on every machine: SentencePiece's pieces depend on the thread count.
        train_sentencepiece(
            [str(train_txt)], budget.model["vocab_size"], work / "spm", num_threads=2
        )
    train, heldout, digests = {}, {}, {}
    for split_name, text, tasks, dupe in (
        ("train", train_txt, SENTENCE_TASKS, budget.dupe_factor),
        ("heldout", heldout_txt, EVAL_TASKS, 1),
    ):
        for task in tasks:
            out = work / "records" / f"{split_name}-{task}"
            if not out.exists():
                create_pretraining_data(
                    [str(text)],
                    sp_model,
                    out,
                    max_seq_length=budget.seq_length,
                    max_predictions_per_seq=budget.max_predictions,
                    dupe_factor=dupe,
                    seed=budget.seed,
                    num_shards=1,
                    num_workers=2,
                    sentence_task=task,
                    progress=progress,
                )
            (train if split_name == "train" else heldout)[task] = str(out / "*.tfrecord")
            digests[f"{split_name}-{task}"] = _digest(list(out.glob("*.tfrecord")))
    if budget.corpus == "embedded":
        task = word_order_task(heldout_txt, work / "task")
    else:
        rt = work / "rotten_tomatoes"
        task = split(fetch(rt), rt / "split")
    digests["corpus"] = _digest([train_txt, heldout_txt])
    # The pieces and scores (the model file also records where it was written).
    digests["spm"] = _digest([sp_model.with_suffix(".vocab")])
    digests["task"] = _digest(list(task.values()))
    return Prepared(sp_model, train, heldout, task, digests)


# === Rows ===


def row_config(budget: Budget, row: Row):
    from albert_tf.config import AlbertConfig

    return AlbertConfig(
        **budget.model, embedding_size=row.embedding_size, shared_params=row.shared_params
    )


def binomial_se(p: float, n: float) -> float:
    return math.sqrt(max(p * (1 - p), 0.0) / n) if n else float("nan")


def mean_se(values: list[float]) -> tuple[float, float]:
    """Mean and standard error of the mean (NaN error for one value)."""
    mean = statistics.mean(values)
    se = statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else float("nan")
    return mean, se


def _machine() -> dict:
    from albert_tf.benchmarking.machine import cpu_description, onednn_enabled

    return {"cpu": cpu_description(), "onednn": onednn_enabled()}


def pretrain_settings(budget: Budget, row: Row, data: Prepared, output: Path, progress: bool):
    """The row's `PretrainSettings` (equal for every row but the config and the data's task)."""
    from albert_tf.pretraining.settings import PretrainSettings

    return PretrainSettings(
        data=data.train[row.sentence_task],
        config=row_config(budget, row),
        output=str(output),
        sp_model=str(data.sp_model),
        train_steps=budget.train_steps,
        batch_size=budget.batch_size,
        learning_rate=budget.learning_rate,
        warmup_steps=budget.warmup_steps,
        save_every=budget.save_every,
        keep=2,  # pretrain's minimum: a torn checkpoint falls back to the one before
        log_every=max(budget.train_steps // 50, 1),
        dtype="float32",
        seed=budget.seed,
        progress=progress,
    )


def run_row(budget: Budget, row: Row, data: Prepared, work: Path, progress: bool) -> dict:
    """Pretrains, evaluates and fine-tunes one row; returns its record (see the results JSON)."""
    import tf_keras

    from albert_tf.params import parameter_breakdown
    from albert_tf.pretraining.evaluate import evaluate
    from albert_tf.pretraining.trainer import pretrain

    config = row_config(budget, row)
    run_dir = work / "runs" / budget.name / row.name
    record: dict = {
        "row": dataclasses.asdict(row),
        "tables": list(row.tables),
        "config": config.to_dict(),
        "params": parameter_breakdown(config)["total"],
        "machine": _machine(),
    }
    started = time.time()
    init = "random"
    run_dir.mkdir(parents=True, exist_ok=True)
    config_file = run_dir / CONFIG_FILE
    config.to_json_file(config_file)
    if row.sentence_task is not None:
        ckpt = run_dir / "pretrain"
        result = pretrain(pretrain_settings(budget, row, data, ckpt, progress))
        record["pretrain"] = {
            "steps": result.step,
            "seconds_this_session": round(result.seconds, 1),
            "ran": result.ran,
            "last_train_log": result.train_history[-1] if result.train_history else None,
        }
        record["heldout"] = {}
        for task in EVAL_TASKS:
            scores = evaluate(str(ckpt), data.heldout[task], progress=progress)
            scores[f"{task}_accuracy_se"] = binomial_se(
                scores[f"{task}_accuracy"], scores["num_examples"]
            )
            record["heldout"][task] = scores
        init = str(ckpt)
        tf_keras.backend.clear_session()
    runs = []
    for seed in budget.finetune_seeds:
        done = run_dir / f"finetune-seed{seed}.json"
        if done.exists():
            runs.append(json.loads(done.read_text()))
            continue
        run = finetune_and_score(
            data.task,
            run_dir / f"finetune-seed{seed}",
            init=init,
            config=config_file if init == "random" else None,
            sp_model=data.sp_model,
            seed=seed,
            epochs=budget.finetune_epochs,
            learning_rate=budget.finetune_learning_rate,
            max_seq_length=budget.seq_length,
            max_steps=budget.finetune_max_steps,
        )
        with atomic_file(done) as tmp:
            tmp.write_text(json.dumps(run) + "\n")
        runs.append(run)
        tf_keras.backend.clear_session()
    test_mean, test_se = mean_se([r["test_accuracy"] for r in runs])
    dev_mean, dev_se = mean_se([r["dev_accuracy"] for r in runs])
    record["finetune"] = {
        "runs": runs,
        "test_accuracy": test_mean,
        "test_accuracy_se": test_se,
        "dev_accuracy": dev_mean,
        "dev_accuracy_se": dev_se,
    }
    record["minutes_this_session"] = round((time.time() - started) / 60, 2)
    record["finished"] = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    return record


def check_manifest(results: Path, budget: Budget, data: Prepared, fresh: bool) -> None:
    """Writes `results/manifest.json` (budget and data digests) or checks a committed one: rows
    from different data must not be mixed in one table."""
    manifest = json.loads(
        json.dumps({"budget": dataclasses.asdict(budget), "digests": data.digests})
    )
    path = results / "manifest.json"
    if path.exists() and not fresh:
        old = json.loads(path.read_text())
        if old != manifest:
            changed = [k for k in ("budget", "digests") if old.get(k) != manifest[k]]
            sys.exit(
                f"ablation: {path} was made with different {' and '.join(changed)}; "
                "rerun with --fresh to discard its rows, or restore the data it names"
            )
        return
    results.mkdir(parents=True, exist_ok=True)
    if fresh:
        for old_row in (results / "rows").glob("*.json"):
            old_row.unlink()
    with atomic_file(path) as tmp:
        tmp.write_text(json.dumps(manifest, indent=2) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--small", action="store_true", help="the machinery in minutes, no claims")
    parser.add_argument("--work", help="corpora, records, checkpoints (default data/ablation)")
    parser.add_argument(
        "--results",
        help="row JSON, table and plots (default experiments/results/ablation; "
        "WORK/results with --small)",
    )
    parser.add_argument("--rows", nargs="+", metavar="NAME", help="only these rows")
    parser.add_argument("--report-only", action="store_true", help="table and plots, no training")
    parser.add_argument("--fresh", action="store_true", help="discard finished rows first")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    args = parser.parse_args(argv)

    budget = SMALL if args.small else FULL
    work = Path(args.work or ROOT / "data" / ("ablation-small" if args.small else "ablation"))
    results = Path(
        args.results
        or (work / "results" if args.small else ROOT / "experiments" / "results" / "ablation")
    )
    all_rows = rows(budget)
    names = [r.name for r in all_rows]
    if args.rows and (unknown := sorted(set(args.rows) - set(names))):
        parser.error(f"unknown rows {', '.join(unknown)}; rows: {', '.join(names)}")
    if not args.report_only:
        data = prepare(budget, work, progress=not args.quiet)
        check_manifest(results, budget, data, args.fresh)
        for row in all_rows:
            if args.rows and row.name not in args.rows:
                continue
            path = results / "rows" / f"{row.name}.json"
            if path.exists():
                print(f"{row.name}: done earlier ({path})", flush=True)
                continue
            stages = (
                "fine-tuning"
                if row.sentence_task is None
                else "pretraining, evaluating, fine-tuning"
            )
            print(f"{row.name}: {stages}", flush=True)
            record = run_row(budget, row, data, work, progress=not args.quiet)
            path.parent.mkdir(parents=True, exist_ok=True)
            with atomic_file(path) as tmp:
                tmp.write_text(json.dumps(record, indent=2) + "\n")
            print(
                f"{row.name}: test accuracy {record['finetune']['test_accuracy']:.4f} "
                f"({record['minutes_this_session']:.1f} min)",
                flush=True,
            )
    write_report(results, budget, all_rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
