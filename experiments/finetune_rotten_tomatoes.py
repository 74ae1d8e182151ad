"""Rotten Tomatoes sentiment: fine-tuning a pretrained ALBERT vs the same architecture from
random initialization, 3 seeds each; test accuracy mean and spread.

Data and split: `rotten_tomatoes.py` (the vaderSentiment sdist's movie sentences, seeded
80/10/10).

The pretrained model is a checkpoint directory written by `albert-tf pretrain` (with its
`spm.model`). The random baseline uses its config and tokenizer. Each run keeps the epoch with
the best dev accuracy; the test split is scored once per run. The recipe measured (general
English plus WordNet, then task-adaptive pretraining on unlabeled text; about 100 minutes of
pretraining on 2 cores; experiments/README.md has the figures):

  python -m experiments.pretrain_real_run --corpus english-wordnet --seq-length 64 \
      --max-predictions 10 --learning-rate 0.004 --warmup-steps 1000 --train-steps 24000 \
      --eval-every 2000 --save-every 2000 --minutes 55
  cd data/pretrain_english-wordnet
  albert-tf pretrain --data 'records_train/*.tfrecord' --eval 'records_heldout/*.tfrecord' \
      --max-eval-examples 2048 --config run/albert_config.json --init run \
      --output run_cont2 --train-steps 22000 --batch-size 32 --learning-rate 0.002 \
      --warmup-steps 500 --save-every 2000 --eval-every 4000 --seed 4
  cd ../..
  python -m experiments.finetune_rotten_tomatoes --task-text data/rt_task/text.txt
  albert-tf create-pretraining-data --input data/rt_task/text.txt \
      --sp-model data/pretrain_english-wordnet/spm.model --output data/rt_task/records \
      --max-seq-length 64 --max-predictions-per-seq 10 --dupe-factor 20 --seed 11
  albert-tf pretrain --data 'data/rt_task/records/*.tfrecord' \
      --config data/pretrain_english-wordnet/run_cont2/albert_config.json \
      --sp-model data/pretrain_english-wordnet/spm.model \
      --init data/pretrain_english-wordnet/run_cont2 --output data/rt_task/run \
      --train-steps 4000 --batch-size 32 --learning-rate 0.002 --warmup-steps 300 --seed 3
  for setting in "3e-4 3" "1e-3 3" "1e-3 5"; do  # learning rate, epochs
    set -- $setting
    python -m experiments.finetune_rotten_tomatoes --pretrained data/rt_task/run \
        --learning-rate $1 --epochs $2 --runs data/rotten_tomatoes/runs_lr$1_e$2 \
        --results experiments/results/finetune_rotten_tomatoes_lr$1_e$2.json
  done

The task text (`--task-text`) is the training split's sentences and VADER's Amazon, NYT and
tweet snippets: no dev or test sentence and no label. Each init then takes the setting with the
higher mean dev accuracy.

Results: printed, and JSON in `--results` (default experiments/results/finetune_rotten_tomatoes.json).
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from albert_tf.config import CONFIG_FILE, SP_MODEL_FILE
from experiments.rotten_tomatoes import fetch, finetune_and_score, split, write_task_text

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "experiments" / "results"


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
            output = runs_dir / f"{init}-seed{seed}"
            done = runs_dir / f"{init}-seed{seed}.json"
            if done.is_file() and not args.rerun:
                runs.append(json.loads(done.read_text()))
                print(f"{init} seed {seed}: kept earlier result {done}", flush=True)
                continue
            run = {
                "init": init,
                **finetune_and_score(
                    paths,
                    output,
                    init=str(pretrained) if init == "pretrained" else "random",
                    config=pretrained / CONFIG_FILE if init == "random" else None,
                    sp_model=pretrained / SP_MODEL_FILE,
                    seed=seed,
                    epochs=args.epochs,
                    learning_rate=args.learning_rate,
                    batch_size=args.batch_size,
                    max_seq_length=args.max_seq_length,
                    dtype=args.dtype,
                ),
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
