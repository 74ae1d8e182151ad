"""Issue 45's check: `albert-tf finetune --task classify` with its default settings, from the
quickstart's model and from `albert_en_mini`, on a data set no choice of the project was made on.

The data: VADER's New York Times editorial snippets (vaderSentiment 3.3.2 sdist, MIT; the
rating's sign is the label, 0 dropped; the seeded 80/10/10 split of experiments/rotten_tomatoes.py),
train and dev only. The defaults by model size (`albert_tf.finetune.defaults`) were swept on
VADER's Amazon snippets; the experiments score Rotten Tomatoes; neither is this one.

Each model fine-tunes once (and random init of the quickstart model's shape and vocabulary, to
see what its weights add), seed 0, with no setting passed but the data and the output; the run's
summary (best dev epoch against the majority class) is kept in
experiments/results/defaults_unseen/NAME.json. The quickstart's model is the one `albert-tf
quickstart` builds (run first if data/quickstart does not exist).

  nice -n 10 python experiments/defaults_unseen.py
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "experiments"))
from finetune_defaults import vader_split  # noqa: E402

RESULTS = ROOT / "experiments" / "results" / "defaults_unseen"
WORK = ROOT / "data" / "defaults_unseen"
QUICKSTART = ROOT / "data" / "quickstart"


def albert_tf(*args: str) -> str:
    print("+ albert-tf " + " ".join(args), flush=True)
    done = subprocess.run(
        [sys.executable, "-m", "albert_tf.cli", *args], capture_output=True, text=True, check=True
    )
    return done.stdout + done.stderr


def main() -> int:
    from albert_tf.benchmarking.machine import cpu_description

    if not (QUICKSTART / "pretrain").is_dir():
        albert_tf("quickstart", "--output", str(QUICKSTART))
    train, dev = vader_split("nyt")
    RESULTS.mkdir(parents=True, exist_ok=True)
    # Each pretrained model, then random init of its shape and vocabulary: what the weights add.
    for name, init in (
        ("quickstart", [str(QUICKSTART / "pretrain")]),
        ("albert_en_mini", ["albert_en_mini"]),
        ("quickstart-random", ["random", "--config", "tiny", "--sp-model", str(QUICKSTART / "spm.model")]),
    ):  # fmt: skip
        if (RESULTS / f"{name}.json").is_file():
            continue
        output = WORK / name
        started = time.monotonic()
        args = ["finetune", "--task", "classify", "--init", *init, "--train", train]
        log = albert_tf(*args, "--eval", dev, "--output", str(output), "--overwrite", "--quiet")
        metadata = json.loads((output / "finetune.json").read_text())
        record = {
            "init": name,
            "data": "VADER nytEditorialSnippets, train/dev of the seed-0 80/10/10 split",
            "settings": {k: metadata["settings"][k] for k in ("learning_rate", "epochs")},
            "dev_accuracy": metadata["best_value"],
            "floor": metadata["floor"],
            "summary": [line for line in log.splitlines() if line.startswith(("best", "warning"))],
            "minutes": (time.monotonic() - started) / 60,
            "cpu": cpu_description(),
        }
        (RESULTS / f"{name}.json").write_text(json.dumps(record, indent=1) + "\n")
        print(json.dumps(record, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
