"""Stage 3 of albert_en_mini_distill.py: the distilled student under the original objective again.

Distillation trains the encoder and the masked-LM head on single sentences of at most 64 pieces;
the sentence-order head is carried along untrained. Measured on the pretraining run's held-out
records (the 6,708 sequences of the card's figures), the stage-2 student's sentence-order
accuracy is 0.501, chance. Stage 3 therefore trains the heads again with the encoder: it
continues `albert-tf pretrain` (n-gram MLM + SOP, sequences of 128) from the stage-2 student for
STAGE3's steps, on records of the pretraining corpus (experiments/albert_en_mini.py's corpus,
rebuilt from the same sources and checked against its committed manifest).

`heads_check` gives the held-out masked-LM and sentence-order accuracy of each model on those
records with `albert_tf.pretraining.evaluate`, the computation the card's figures come from.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path

from experiments import albert_en_mini as pretraining

# Chosen before it ran, not tuned: a continuation, so a third of the original run's LAMB rate
# (3e-3) with a tenth of the steps as warmup; 1,000 steps of 32 (32k sequences, half a pass over
# the training split's records) to bring the heads back without replacing what distillation
# taught; a new masking of the training split (seed 12346, dupe factor 1).
STAGE3 = {
    "train_steps": 1000,
    "batch_size": 32,
    "learning_rate": 1e-3,
    "warmup_steps": 100,
    "eval_every": 500,
    "save_every": 250,
    "max_eval_examples": 4096,
    "log_every": 50,
    "seed": 53,
}
TRAIN_RECORDS_SEED = 12346


@functools.cache  # stage 3 and its report both need them: check the corpus once
def pretraining_records(work: Path) -> dict[str, Path]:
    """`work/pretraining/records_{train,heldout}`, built when missing: the pretraining corpus from
    the sources in `work/sources` (its text checked against albert_en_mini's manifest), the
    shipped vocabulary, held-out records as the pretraining run's (seed 12345), training records
    with TRAIN_RECORDS_SEED."""
    from albert_tf.pretrained import model_dir

    folder = work / "pretraining"
    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / "sources").exists():
        (folder / "sources").symlink_to(Path("..") / "sources")
    train, heldout = pretraining.build_corpus(folder)
    texts = {"train": train, "heldout": heldout}
    manifest = json.loads((pretraining.RESULTS / "manifest.json").read_text())["sha256"]
    for split, text in texts.items():
        if pretraining.sha256(text) != manifest[f"{split}_txt"]:
            sys.exit(f"error: {text} differs from albert_en_mini's committed corpus")
    run = pretraining.RUN
    records = {}
    for split, seed, shards in (("train", TRAIN_RECORDS_SEED, 2), ("heldout", run["seed"], 1)):
        records[split] = folder / f"records_{split}"
        if not records[split].exists():
            pretraining.albert_tf(
                "create-pretraining-data", "--input", str(texts[split]), "--sp-model",
                str(model_dir(pretraining.NAME) / "spm.model"), "--output", str(records[split]),
                "--max-seq-length", str(run["seq_length"]),
                "--max-predictions-per-seq", str(run["max_predictions"]), "--dupe-factor", "1",
                "--seed", str(seed), "--num-shards", str(shards), "--workers", "2",
            )  # fmt: skip
    return records


def stage3(work: Path, init: Path, output: Path) -> Path:
    """Runs (or resumes) STAGE3's `albert-tf pretrain` from `init` into `output`."""
    records = pretraining_records(work)
    run_albert_tf(
        ["pretrain", "--data", str(records["train"] / "*.tfrecord"),
         "--eval", str(records["heldout"] / "*.tfrecord"), "--init", str(init),
         "--output", str(output)],
        STAGE3,
    )  # fmt: skip
    return output


def run_albert_tf(args: list[str], settings: dict) -> None:
    """Runs `albert-tf ARGS` with each of `settings` as a flag (`train_steps` -> --train-steps),
    printing the command; CalledProcessError if it fails."""
    for key, value in settings.items():
        args = [*args, f"--{key.replace('_', '-')}", str(value)]
    print("+ albert-tf " + " ".join(args), flush=True)
    subprocess.run([sys.executable, "-m", "albert_tf.cli", *args], check=True)


def heads_check(models: dict[str, str | Path], work: Path) -> dict:
    """Held-out loss, masked-LM and sentence-order accuracy of each model (a checkpoint directory
    or a shipped name) on every held-out pretraining record."""
    from albert_tf.pretraining.evaluate import evaluate

    heldout = str(pretraining_records(work)["heldout"] / "*.tfrecord")
    scores = {}
    for name, model in models.items():
        result = evaluate(str(model), heldout, batch_size=64)
        keys = ("num_examples", "loss", "mlm_accuracy", "sop_accuracy")
        scores[name] = {key: result[key] for key in keys}
    return scores
