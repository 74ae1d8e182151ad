"""A pretraining run forced to diverge, with and without the divergence guard (issue 44).

The tiny preset (vocabulary 16,000 to read albert_en_mini's data) on albert_en_mini's pretraining
records (run `albert_en_mini.py --prepare-only` first), batch 32 x 128 tokens, LAMB at a learning
rate above the stable one (the tiny preset was stable at 4e-3 and diverged at 1e-2 after 4,000
steps in experiments/README.md):

- `unguarded`: `--spike-factor inf` (only a non-finite loss or weight rolls back);
- `guarded`: the defaults (`--spike-factor 1.5 --max-rollbacks 3`: a loop whose mean loss is
  1.5x the lowest recent median rolls back to the last checkpoint, skips the batches since and
  halves the learning rate).

Both evaluate held-out MLM and SOP accuracy every `--eval-every` steps. Results:
`experiments/results/divergence_guard/TAG/{results.json,curves.png}` (the rollbacks, the
held-out curves, the end figures). A stopped arm resumes from its last checkpoint.

  nice -n 19 python -m experiments.divergence_guard                       # 5e-2, no warmup, 1,000 steps
  nice -n 19 python -m experiments.divergence_guard --learning-rate 0.01 --warmup-steps 1000 \
      --train-steps 24000 --minutes 40 --eval-every 1000 --tag lr0.01_warmup1000
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from experiments.albert_en_mini_package import _scalars

ROOT = Path(__file__).resolve().parents[1]

WORK = ROOT / "data" / "albert_en_mini"
OUT = ROOT / "data" / "divergence_guard"
RESULTS = ROOT / "experiments" / "results" / "divergence_guard"
ARMS = {"unguarded": ["--spike-factor", "inf"], "guarded": []}


def run_arm(name: str, extra: list[str], config: Path, args) -> dict:
    run = OUT / args.tag / name
    command = [
        sys.executable, "-m", "albert_tf.cli", "pretrain",
        "--data", str(WORK / "records_train" / "*.tfrecord"),
        "--eval", str(WORK / "records_heldout" / "*.tfrecord"),
        "--max-eval-examples", "1024", "--config", str(config),
        "--sp-model", str(WORK / "spm.model"), "--output", str(run),
        "--train-steps", str(args.train_steps), "--batch-size", "32",
        "--learning-rate", str(args.learning_rate), "--warmup-steps", str(args.warmup_steps),
        "--eval-every", str(args.eval_every), "--save-every", "100", "--log-every", "20",
        "--seed", "7", *extra,
    ]  # fmt: skip
    if args.minutes:
        command += ["--minutes", str(args.minutes)]
    completed = subprocess.run(command, capture_output=True, text=True)
    guard = run / "guard.json"
    lines = completed.stderr.replace("\r", "\n").splitlines()
    return {
        "exit_code": completed.returncode,
        "error_lines": [
            line[max(line.find("albert-tf"), 0) :] for line in lines if "error:" in line
        ],
        "warning_lines": [line for line in lines if line.startswith("warning:")],
        "checkpoints": _checkpoint_steps_all_finite(run),
        "rollbacks": json.loads(guard.read_text())["rollbacks"] if guard.is_file() else [],
        "eval": _scalars(run / "logs" / "eval"),
        "train_loss": _scalars(run / "logs" / "train").get("loss", []),
    }


def _checkpoint_steps_all_finite(run: Path) -> dict[str, bool]:
    """Each checkpoint left in `run` (by step) and whether every float in it is finite."""
    import numpy as np
    import tensorflow as tf

    found = {}
    for index in sorted(run.glob("ckpt-*.index")):
        reader = tf.train.load_checkpoint(str(index.with_suffix("")))
        values = (reader.get_tensor(name) for name in reader.get_variable_to_shape_map())
        found[index.stem.split("-")[1]] = all(
            bool(np.all(np.isfinite(v)))
            for v in values
            if np.issubdtype(np.asarray(v).dtype, np.floating)
        )
    return found


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    for name, arm in results["arms"].items():
        loss = arm["train_loss"]
        axes[0].plot([s for s, _ in loss], [v for _, v in loss], label=name)
        accuracy = arm["eval"].get("mlm_accuracy", [])
        axes[1].plot([s for s, _ in accuracy], [v for _, v in accuracy], "o-", label=name)
        for rollback in arm["rollbacks"]:
            axes[0].axvline(rollback["detected_step"], color="grey", linestyle=":", linewidth=1)
    axes[0].set(xlabel="step", ylabel="training loss", title="training loss (dotted: rollbacks)")
    axes[1].set(xlabel="step", ylabel="held-out MLM accuracy", title="held-out MLM accuracy")
    for axis in axes:
        axis.legend()
    fig.suptitle(
        f"tiny preset, LAMB at {results['learning_rate']:g} ({results['warmup_steps']} warmup "
        f"steps, schedule of {results['train_steps']}), batch 32 x 128"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--learning-rate", type=float, default=0.05)
    parser.add_argument("--warmup-steps", type=int, default=0)
    parser.add_argument("--train-steps", type=int, default=1000, help="the schedule's length")
    parser.add_argument("--minutes", type=float, help="stop each arm after this wall time")
    parser.add_argument("--eval-every", type=int, default=200)
    parser.add_argument("--tag", default="lr0.05_nowarmup", help="results subfolder")
    args = parser.parse_args(argv)
    config = OUT / "albert_config.json"
    OUT.mkdir(parents=True, exist_ok=True)
    from albert_tf.config import PRESETS

    PRESETS["tiny"].replace(vocab_size=16000).to_json_file(config)
    results = {
        "learning_rate": args.learning_rate,
        "warmup_steps": args.warmup_steps,
        "train_steps": args.train_steps,
        "minutes": args.minutes,
        "arms": {name: run_arm(name, extra, config, args) for name, extra in ARMS.items()},
    }
    target = RESULTS / args.tag
    target.mkdir(parents=True, exist_ok=True)
    (target / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    plot(results, target / "curves.png")
    for name, arm in results["arms"].items():
        end = {k: v[-1] for k, v in arm["eval"].items() if v}
        print(name, arm["exit_code"], len(arm["rollbacks"]), end, arm["error_lines"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
