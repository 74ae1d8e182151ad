"""A pretraining run forced to diverge, with and without the divergence guard (issue 44).

The tiny preset (vocabulary 16,000 to read albert_en_mini's data) on albert_en_mini's pretraining
records (run `albert_en_mini.py --prepare-only` first), batch 32 x 128 tokens, LAMB at a learning
rate far above the stable one (the tiny preset was stable at 4e-3 and diverged at 1e-2 after
4,000 steps in experiments/README.md; here 5e-2 without warmup, so it blows up early):

- `unguarded`: `--spike-factor inf` (only a non-finite loss or weight rolls back);
- `guarded`: the defaults (`--spike-factor 1.5 --max-rollbacks 3`: a loop whose mean loss is
  1.5x the lowest recent median rolls back to the last checkpoint, skips the batches since and
  halves the learning rate).

Both evaluate held-out MLM and SOP accuracy every EVAL_EVERY steps. Results:
`experiments/results/divergence_guard/{results.json,curves.png}` (the rollbacks, the held-out
curves, the end figures). Resumable: a finished arm is kept, a stopped one resumes.

  nice -n 19 python experiments/divergence_guard.py
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from albert_en_mini_package import _scalars  # noqa: E402

WORK = ROOT / "data" / "albert_en_mini"
OUT = ROOT / "data" / "divergence_guard"
RESULTS = ROOT / "experiments" / "results" / "divergence_guard"
LEARNING_RATE = 0.05
STEPS = 1500
EVAL_EVERY = 250
ARMS = {"unguarded": ["--spike-factor", "inf"], "guarded": []}


def run_arm(name: str, extra: list[str], config: Path) -> dict:
    run = OUT / name
    args = [
        sys.executable, "-m", "albert_tf.cli", "pretrain",
        "--data", str(WORK / "records_train" / "*.tfrecord"),
        "--eval-data", str(WORK / "records_heldout" / "*.tfrecord"),
        "--max-eval-examples", "1024", "--config", str(config),
        "--sp-model", str(WORK / "spm.model"), "--output", str(run),
        "--train-steps", str(STEPS), "--batch-size", "32",
        "--learning-rate", str(LEARNING_RATE), "--warmup-steps", "0",
        "--eval-every", str(EVAL_EVERY), "--save-every", "100", "--log-every", "20",
        "--seed", "7", *extra,
    ]  # fmt: skip
    completed = subprocess.run(args, capture_output=True, text=True)
    guard = run / "guard.json"
    return {
        "exit_code": completed.returncode,
        "last_error_line": completed.stderr.strip().splitlines()[-1] if completed.stderr else "",
        "rollbacks": json.loads(guard.read_text())["rollbacks"] if guard.is_file() else [],
        "eval": _scalars(run / "logs" / "eval"),
        "train_loss": _scalars(run / "logs" / "train").get("loss", []),
    }


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
    fig.suptitle(f"tiny preset, LAMB at {LEARNING_RATE:g} without warmup, batch 32 x 128")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main() -> int:
    config = OUT / "albert_config.json"
    OUT.mkdir(parents=True, exist_ok=True)
    from albert_tf.config import PRESETS

    PRESETS["tiny"].replace(vocab_size=16000).to_json_file(config)
    RESULTS.mkdir(parents=True, exist_ok=True)
    results = {
        "learning_rate": LEARNING_RATE,
        "steps": STEPS,
        "arms": {name: run_arm(name, extra, config) for name, extra in ARMS.items()},
    }
    (RESULTS / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    plot(results, RESULTS / "curves.png")
    for name, arm in results["arms"].items():
        end = {k: v[-1] for k, v in arm["eval"].items() if v}
        print(name, arm["exit_code"], len(arm["rollbacks"]), end, arm["last_error_line"][:200])
    return 0


if __name__ == "__main__":
    sys.exit(main())
