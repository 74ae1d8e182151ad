"""What the quickstart prints: the held-out table, the demos' margins, and what to run next."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import albert_tf
from albert_tf.quickstart.evaluation import RARE_RANK

NOTEBOOK = "01_sentiment_hub_keraslayer.ipynb"  # the one the quickstart's modules feed
_ROWS = (("MLM top-1", "mlm_top1"), ("MLM top-5", "mlm_top5"), ("top-5, rare answers", "rare_top5"))


def print_scores(scores: dict, log: Callable[[str], None]) -> None:
    """The held-out table: each metric for trained, random weights and the unigram guess, and
    the trained model's margin over the better baseline."""
    trained, random, unigram = scores["trained"], scores["random_init"], scores["unigram"]
    log(f"      {'held out':<22}{'trained':>9}{'random init':>13}{'unigram':>9}   margin")
    for label, key in (*_ROWS, ("SOP (chance 50%)", "sop")):
        t, r, u = (getattr(s, key) for s in (trained, random, unigram))
        log(f"      {label:<22}{t:>9.1%}{r:>13.1%}{u:>9.1%}   {100 * (t - max(r, u)):+.1f} points")
    log(
        f"      (rare: answers outside the {RARE_RANK} most frequent training pieces, which the "
        "unigram guess never names; unigram SOP: the more frequent training label)"
    )


def print_demo_margins(demos, log: Callable[[str], None]) -> None:
    """Median ranks of each demo by predictor and the trained model's margin (x better)."""
    for name, ranks in (("fill in the blank", demos.blanks), ("neighbours", demos.neighbours)):
        if not ranks:
            continue
        best_baseline = min(v for k, v in ranks.items() if k != "trained")
        shown = ", ".join(f"{k} {v:g}" for k, v in ranks.items())
        margin = best_baseline / ranks["trained"]
        verdict = (
            f"trained ranks the answer {margin:.1f}x higher than the best baseline"
            if margin > 1
            else f"trained does not beat the best baseline ({margin:.1f}x): not learned yet"
        )
        log(f"      {name}: median rank {shown}; {verdict}")


def print_next_steps(result, log: Callable[[str], None]) -> None:
    out = result.out_dir
    log(
        f"""
Done in {result.seconds / 60:.1f} min ({result.pretrain_steps} pretraining steps). \
Every figure, with its baselines: {out}/results.json
Training loss and held-out accuracy against steps: {result.curves}

TF-Hub modules (hub.KerasLayer / hub.load / keras.layers.TFSMLayer):
  encoder:    {result.encoder_dir}
  preprocess: {result.preprocess_dir}
Checkpoint directory (for pretrain --init, finetune --init, export --checkpoint): \
{result.checkpoint_dir}

Next:"""
    )
    for line in next_steps(result):
        log(f"  {line}")


def next_steps(result, cwd: Path | None = None) -> list[str]:
    """The commands the quickstart suggests next, each of which runs after the README's install
    (`pip install -e ".[test]"` in a clone, in whose root the quickstart ran): the examples and
    notebooks of the clone are named relative to `cwd` (default: the working directory), and
    lines that need them are left out when albert-tf is installed without its repository."""
    out, checkpoint = result.out_dir, result.checkpoint_dir
    repository = _repository(cwd or Path.cwd())
    lines = [
        f"tensorboard --logdir {out}/pretrain",
        "albert-tf params --config base",
        f"albert-tf pretrain --data '{out}/data/*.tfrecord' --init {checkpoint} "
        "--train-steps 200 --batch-size 32 --output my_run   # pretraining continued",
        f"albert-tf export --checkpoint {checkpoint} --output my_hub",
    ]
    if repository is None:
        return lines
    examples = repository / "examples" / "sentiment"
    data = f"--train {examples}/train.tsv --eval {examples}/dev.tsv"
    return [
        *lines,
        f"albert-tf finetune --task classify {data} --init albert_en_mini "
        "--output my_classifier   # the shipped pretrained English model",
        f"albert-tf finetune --task classify {data} --init {checkpoint} --output my_tiny_classifier",
        f"ALBERT_TF_MODULES={Path(out).absolute() / 'hub'} jupyter execute "
        f"{repository / 'colab' / NOTEBOOK}"
        "   # sentiment with hub.KerasLayer (colab/ has three more notebooks)",
    ]


def _repository(cwd: Path) -> Path | None:
    """The albert-tf clone this package was installed from (`pip install -e`), relative to
    `cwd` when inside it; None for an install without one."""
    root = Path(albert_tf.__file__).resolve().parent.parent  # the folder that holds albert_tf/
    if not (root / "examples" / "sentiment").is_dir() or not (root / "colab").is_dir():
        return None
    try:
        return root.relative_to(cwd.resolve())
    except ValueError:
        return root
