"""The sweep behind a row of `albert_tf.finetune.defaults` (issue 45): which learning rate and
how many epochs fine-tune a model of one size, chosen on dev data only.

  python -m experiments.finetune_defaults --name albert_en_mini --init data/albert_en_mini/run \\
      --train data/task/train.tsv --dev data/task/dev.tsv
  python -m experiments.finetune_defaults --name tiny --init albert_quickstart/pretrain \\
      --vader amazon

`--vader NAME` takes the data from VADER's ground truth (the vaderSentiment 3.3.2 sdist, fetched
as experiments/rotten_tomatoes.py does, under data/): NAME's review or editorial snippets with
their human rating's sign as the label, split 80/10/10 with seed 0; only train and dev are read.

Every (learning rate, epochs, seed) of the grid fine-tunes `--init` on `--train` (classify),
keeps its best epoch on `--dev` and appends one JSON line to
experiments/results/finetune_defaults/NAME.jsonl: the setting, the dev metric, the majority
class's score on dev, the time and the machine. Rerunning skips the lines already there, so a
sweep stopped midway (Ctrl-C, a preempted machine) resumes where it was. At the end, and with
`--report`, the script prints each setting's mean ± sd over its seeds and the setting with the
best mean: the candidate row. No test split is read: a row chosen on test would flatter it.
Warmup stays at 0.1 of the steps (the recipe's); the models' checkpoints go to a temporary
directory and are not kept.

Run it niced on a shared machine (`nice -n 19`); the tiny preset takes seconds a run on 2 cores
at a few thousand examples, albert_en_mini (H=256) a few times that.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "experiments" / "results" / "finetune_defaults"
LEARNING_RATES = (3e-5, 1e-4, 3e-4, 1e-3, 3e-3)
EPOCHS = (3, 5)
SEEDS = (1, 2, 3)


def _floats(text: str) -> tuple[float, ...]:
    return tuple(float(part) for part in text.split(","))


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(","))


def _key(record: dict) -> tuple:
    return (record["learning_rate"], record["epochs"], record["seed"])


def read_results(path: Path) -> list[dict]:
    """The runs recorded so far (none when the file does not exist)."""
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


VADER_SETS = ("amazon", "nyt", "movie", "tweets")
VADER_FILES = {
    "amazon": "amazonReviewSnippets",
    "nyt": "nytEditorialSnippets",
    "movie": "movieReviewSnippets",
    "tweets": "tweets",
}


def vader_split(name: str) -> tuple[str, str]:
    """(train, dev) TSVs of VADER's `name` snippets (fetched and split on first use)."""
    from experiments.rotten_tomatoes import TRUTH, VADER_DIR, fetch, split

    work = REPO / "data" / "finetune_defaults"
    snippets = fetch(work, f"{VADER_DIR}/{VADER_FILES[name]}{TRUTH}")
    paths = split(snippets, work / name)
    return str(paths["train"]), str(paths["dev"])


def run_one(args: argparse.Namespace, learning_rate: float, epochs: int, seed: int) -> dict:
    """Fine-tunes one setting and returns its record."""
    from albert_tf.benchmarking.machine import cpu_description
    from albert_tf.finetune.settings import FinetuneSettings
    from albert_tf.finetune.trainer import finetune

    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="finetune_defaults-") as work:
        settings = FinetuneSettings(
            task="classify",
            train=args.train,
            eval=args.dev,
            init=args.init,
            config=args.config,
            sp_model=args.sp_model,
            output=str(Path(work) / "model"),
            learning_rate=learning_rate,
            epochs=epochs,
            seed=seed,
            restarts=0,  # one draw per seed: these runs measure, not pick
            max_seq_length=args.max_seq_length,
            train_steps=args.train_steps,
            reinit_pooler=getattr(args, "reinit_pooler", None),
            export_serving=False,
        )
        result = finetune(settings, log=lambda line: None, progress=False)
    record = result.record
    return {
        "learning_rate": learning_rate,
        "epochs": epochs,
        "seed": seed,
        "reinit_pooler": record.settings.reinit_pooler,
        "metric": record.best_metric,
        "dev": record.best_value,
        "best_epoch": record.best_epoch,
        "floor": record.floor["value"],
        **record.ran(),
        "seconds": round(time.monotonic() - started, 1),
        "cpu": cpu_description(),
    }


def report(records: list[dict]) -> list[str]:
    """Each setting's mean ± sd on dev over its seeds, best mean last, and the pick."""
    settings: dict[tuple, list[float]] = {}
    for record in records:
        settings.setdefault((record["learning_rate"], record["epochs"]), []).append(record["dev"])
    rows = sorted(settings.items(), key=lambda item: np.mean(item[1]))
    lines = []
    for (learning_rate, epochs), values in rows:
        sd = float(np.std(values, ddof=1)) if len(values) > 1 else 0.0
        lines.append(
            f"learning rate {learning_rate:g}, {epochs} epochs: dev {np.mean(values):.4f} ± "
            f"{sd:.4f} ({len(values)} seeds)"
        )
    if rows:
        floor = records[0]["floor"]
        (learning_rate, epochs), values = rows[-1]
        lines.append(
            f"pick: learning rate {learning_rate:g}, {epochs} epochs (majority class on dev: "
            f"{floor:.4f})"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", required=True, help="the results file's name (a model size)")
    parser.add_argument("--init", help="the model to fine-tune (as `finetune --init`)")
    parser.add_argument("--config", help="with --init random: a preset or albert_config.json")
    parser.add_argument("--sp-model", help="SentencePiece model (default: the one with --init)")
    parser.add_argument("--train", help="training split (TSV/CSV/JSONL, classify)")
    parser.add_argument("--dev", help="dev split: the one the setting is chosen on")
    parser.add_argument("--vader", choices=VADER_SETS, help="instead of --train/--dev")
    parser.add_argument("--learning-rates", type=_floats, default=LEARNING_RATES)
    parser.add_argument("--epochs", type=_ints, default=EPOCHS)
    parser.add_argument("--seeds", type=_ints, default=SEEDS)
    parser.add_argument("--max-seq-length", type=int, default=128)
    parser.add_argument("--train-steps", type=int, help="cap per run (smoke tests only)")
    parser.add_argument("--results", type=Path, default=RESULTS, help="results directory")
    parser.add_argument("--report", action="store_true", help="only print the summary")
    args = parser.parse_args(argv)
    path = args.results / f"{args.name}.jsonl"
    records = read_results(path)
    if args.vader and not args.report:
        args.train, args.dev = vader_split(args.vader)
    if not args.report:
        if not (args.init and args.train and args.dev):
            parser.error("--init, --train and --dev are needed to run the sweep")
        done = {_key(record) for record in records}
        path.parent.mkdir(parents=True, exist_ok=True)
        for learning_rate in args.learning_rates:
            for epochs in args.epochs:
                for seed in args.seeds:
                    if (learning_rate, epochs, seed) in done:
                        continue
                    record = run_one(args, learning_rate, epochs, seed)
                    with open(path, "a", encoding="utf-8") as f:
                        f.write(json.dumps(record) + "\n")
                    records.append(record)
                    print(
                        f"lr {learning_rate:g} x {epochs} epochs, seed {seed}: dev "
                        f"{record['dev']:.4f} ({record['seconds']:.0f} s)",
                        flush=True,
                    )
    for line in report(records):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
