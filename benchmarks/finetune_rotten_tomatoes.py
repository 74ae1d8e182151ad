"""Rotten Tomatoes sentiment: fine-tuning a pretrained ALBERT vs the same architecture from
random initialization, 3 seeds each; test accuracy mean and spread.

Data: the 10,605 movie-review sentences with human ratings shipped in the vaderSentiment 3.3.2
sdist (`additional_resources/hutto_ICWSM_2014.tar.gz`, `movieReviewSnippets_GroundTruth.txt`,
TSV id/rating/text, latin-1). Rating > 0 is positive, < 0 negative, 0 (37 sentences) dropped;
a seeded 80/10/10 train/dev/test split. Fetched with `pip download` when missing (the only
download), kept under data/ (git-ignored).

The pretrained model is a checkpoint directory written by `albert-tf pretrain` (with its
`spm.model`). The random baseline uses its config and tokenizer. Each run keeps the epoch with
the best dev accuracy; the test split is scored once per run. The recipe measured (general
English plus WordNet, then task-adaptive pretraining on unlabeled text; about 100 minutes of
pretraining on 2 cores; benchmarks/README.md has the figures):

  python benchmarks/pretrain_real_run.py --corpus english-wordnet --seq-length 64 \
      --max-predictions 10 --learning-rate 0.004 --warmup-steps 1000 --train-steps 24000 \
      --eval-every 2000 --save-every 2000 --minutes 55
  cd data/pretrain_english-wordnet
  albert-tf pretrain --data 'records_train/*.tfrecord' --eval-data 'records_heldout/*.tfrecord' \
      --max-eval-examples 2048 --config run/albert_config.json --init-checkpoint run \
      --output run_cont2 --train-steps 22000 --batch-size 32 --learning-rate 0.002 \
      --warmup-steps 500 --save-every 2000 --eval-every 4000 --seed 4
  cd ../..
  python benchmarks/finetune_rotten_tomatoes.py --task-text data/rt_task/text.txt
  albert-tf create-pretraining-data --input data/rt_task/text.txt \
      --sp-model data/pretrain_english-wordnet/spm.model --output data/rt_task/records \
      --max-seq-length 64 --max-predictions-per-seq 10 --dupe-factor 20 --seed 11
  albert-tf pretrain --data 'data/rt_task/records/*.tfrecord' \
      --config data/pretrain_english-wordnet/run_cont2/albert_config.json \
      --sp-model data/pretrain_english-wordnet/spm.model \
      --init-checkpoint data/pretrain_english-wordnet/run_cont2 --output data/rt_task/run \
      --train-steps 4000 --batch-size 32 --learning-rate 0.002 --warmup-steps 300 --seed 3
  for setting in "3e-4 3" "1e-3 3" "1e-3 5"; do  # learning rate, epochs
    set -- $setting
    python benchmarks/finetune_rotten_tomatoes.py --pretrained data/rt_task/run \
        --learning-rate $1 --epochs $2 --runs data/rotten_tomatoes/runs_lr$1_e$2 \
        --results benchmarks/results/finetune_rotten_tomatoes_lr$1_e$2.json
  done

The task text (`--task-text`) is the training split's sentences and VADER's Amazon, NYT and
tweet snippets: no dev or test sentence and no label. Each init then takes the setting with the
higher mean dev accuracy.

Results: printed, and JSON in `--results` (default benchmarks/results/finetune_rotten_tomatoes.json).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tarfile
import time
from pathlib import Path

from albert_tf.io_utils import atomic_file

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
VADER_DIR = "hutto_ICWSM_2014"
TRUTH = "_GroundTruth.txt"
SNIPPETS = f"{VADER_DIR}/movieReviewSnippets{TRUTH}"


def fetch(work: Path, name: str = SNIPPETS) -> Path:
    """A file of the VADER ground truth (the movie sentences by default), fetched from the
    vaderSentiment sdist if not there yet."""
    target = work / name
    if target.is_file():
        return target
    work.mkdir(parents=True, exist_ok=True)
    sdist = work / "vaderSentiment-3.3.2.tar.gz"
    if not sdist.is_file():
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--no-binary",
                ":all:",
                "vaderSentiment==3.3.2",
                "-d",
                str(work),
            ],
            check=True,
        )
    with tarfile.open(sdist) as outer:
        member = outer.getmember(
            "vaderSentiment-3.3.2/additional_resources/hutto_ICWSM_2014.tar.gz"
        )
        with tarfile.open(fileobj=outer.extractfile(member)) as inner:
            inner.extract(name, work, filter="data")
    return target


def snippet_rows(path: Path) -> list[tuple[str, float, str]]:
    """`(id, rating, text)` of a VADER ground-truth TSV (latin-1), whitespace normalized."""
    rows = []
    for line in path.read_text(encoding="latin-1").splitlines():
        fields = line.split("\t")
        if len(fields) >= 3:
            rows.append((fields[0], float(fields[1]), " ".join("\t".join(fields[2:]).split())))
    return rows


def write_task_text(work: Path, train: Path, out: Path) -> int:
    """Unlabeled text for task-adaptive pretraining; returns the number of documents.

    The training split's sentences (one document each; no dev or test sentence, no label) and
    VADER's other snippets: Amazon reviews and NYT editorials grouped into their documents
    (ids `doc_sentence`), tweets one per document. Blank lines separate documents, the format
    `albert-tf create-pretraining-data` reads.
    """
    lines = train.read_text(encoding="utf-8").splitlines()[1:]
    documents = [line.rsplit("\t", 1)[0] for line in lines]
    for name in ("amazonReviewSnippets", "nytEditorialSnippets"):
        grouped: dict[str, list[str]] = {}
        for snippet_id, _, text in snippet_rows(fetch(work, f"{VADER_DIR}/{name}{TRUTH}")):
            grouped.setdefault(snippet_id.split("_")[0], []).append(text)
        documents += ["\n".join(sentences) for sentences in grouped.values()]
    documents += [text for _, _, text in snippet_rows(fetch(work, f"{VADER_DIR}/tweets{TRUTH}"))]
    with atomic_file(out) as tmp:
        tmp.write_text("\n\n".join(documents) + "\n", encoding="utf-8")
    return len(documents)


def split(snippets: Path, out: Path, seed: int = 0) -> dict[str, Path]:
    """Seeded 80/10/10 split into GLUE-style TSVs (`sentence`, `label`)."""
    rows = [
        (text, "positive" if rating > 0 else "negative")
        for _, rating, text in snippet_rows(snippets)
        if rating != 0
    ]
    random.Random(seed).shuffle(rows)
    n = len(rows)
    parts = {
        "train": rows[: int(0.8 * n)],
        "dev": rows[int(0.8 * n) : int(0.9 * n)],
        "test": rows[int(0.9 * n) :],
    }
    out.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, part in parts.items():
        paths[name] = out / f"{name}.tsv"
        text = "sentence\tlabel\n" + "".join(f"{t}\t{label}\n" for t, label in part)
        if paths[name].is_file() and paths[name].read_text(encoding="utf-8") == text:
            continue  # runs started side by side read it while it is being written otherwise
        with atomic_file(paths[name]) as tmp:
            tmp.write_text(text, encoding="utf-8")
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pretrained", help="checkpoint dir from `albert-tf pretrain`")
    parser.add_argument(
        "--task-text",
        metavar="PATH",
        help="only write the unlabeled task-adaptive pretraining text (training split plus "
        "VADER's Amazon, NYT and tweet snippets) to PATH and exit",
    )
    parser.add_argument("--work", default=str(ROOT / "data" / "rotten_tomatoes"))
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--learning-rate", type=float, default=3e-4)
    parser.add_argument("--max-seq-length", type=int, default=64)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument(
        "--inits", nargs="+", default=["pretrained", "random"], choices=["pretrained", "random"]
    )
    parser.add_argument(
        "--runs", help="directory of per-run outputs and results (default WORK/runs)"
    )
    parser.add_argument(
        "--results", default=str(RESULTS / "finetune_rotten_tomatoes.json"), help="summary JSON"
    )
    parser.add_argument("--rerun", action="store_true", help="redo runs that already have results")
    args = parser.parse_args()

    from albert_tf.finetune.predict import load_finetuned, predict_file
    from albert_tf.finetune.tasks import TaskSettings
    from albert_tf.finetune.trainer import FinetuneSettings, TrainSettings, finetune

    work = Path(args.work)
    paths = split(fetch(work), work / "split")
    if args.task_text:
        count = write_task_text(work, paths["train"], Path(args.task_text))
        print(f"{args.task_text}: {count} documents")
        return
    if not args.pretrained:
        parser.error("--pretrained is required (unless --task-text)")
    pretrained = Path(args.pretrained)
    runs_dir = Path(args.runs) if args.runs else work / "runs"
    runs = []
    for init in args.inits:
        for seed in args.seeds:
            started = time.time()
            output = runs_dir / f"{init}-seed{seed}"
            done = runs_dir / f"{init}-seed{seed}.json"
            if done.is_file() and not args.rerun:
                runs.append(json.loads(done.read_text()))
                print(f"{init} seed {seed}: kept earlier result {done}", flush=True)
                continue
            result = finetune(
                FinetuneSettings(
                    train_path=str(paths["train"]),
                    output_dir=str(output),
                    init=str(pretrained) if init == "pretrained" else "random",
                    task=TaskSettings("classify", max_seq_length=args.max_seq_length),
                    train=TrainSettings(
                        epochs=args.epochs,
                        batch_size=args.batch_size,
                        learning_rate=args.learning_rate,
                        seed=seed,
                        dtype=args.dtype,
                    ),
                    eval_path=str(paths["dev"]),
                    config=str(pretrained / "albert_config.json") if init == "random" else None,
                    sp_model=str(pretrained / "spm.model"),
                    overwrite=True,
                    export_serving=False,
                )
            )
            _, scores, _ = predict_file(load_finetuned(output), str(paths["test"]))
            run = {
                "init": init,
                "seed": seed,
                "dev_accuracy": result.metadata["best_value"],
                "best_epoch": result.metadata["best_epoch"],
                "test_accuracy": scores["accuracy"],
                "test_f1": scores["f1"],
                "minutes": (time.time() - started) / 60,
            }
            print(json.dumps(run), flush=True)
            done.write_text(json.dumps(run) + "\n")
            runs.append(run)
    summary = {}
    for init in args.inits:
        accuracies = [r["test_accuracy"] for r in runs if r["init"] == init]
        summary[init] = {
            "test_accuracy_mean": statistics.mean(accuracies),
            "test_accuracy_std": statistics.stdev(accuracies) if len(accuracies) > 1 else 0.0,
            "runs": len(accuracies),
        }
        print(
            f"{init:10s} test accuracy {summary[init]['test_accuracy_mean']:.4f} "
            f"± {summary[init]['test_accuracy_std']:.4f} (n={len(accuracies)})"
        )
    Path(args.results).parent.mkdir(parents=True, exist_ok=True)
    settings = dict(vars(args))
    counts = {
        name: len(p.read_text(encoding="utf-8").splitlines()) - 1 for name, p in paths.items()
    }
    Path(args.results).write_text(
        json.dumps(
            {"settings": settings, "split_sizes": counts, "runs": runs, "summary": summary},
            indent=2,
        )
        + "\n"
    )


if __name__ == "__main__":
    main()
