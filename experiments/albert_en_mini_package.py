"""Stage 5 of albert_en_mini.py: the shipped model and the run's committed figures.

From the run directory's latest checkpoint:
- `albert_tf/pretrained/albert_en_mini/` (albert_tf.pretrained.write_shipped: float16 weights,
  config, SentencePiece model);
- `experiments/results/albert_en_mini/pretraining.json`: the held-out MLM and SOP accuracy of the
  float32 checkpoint and of the shipped float16 weights (every held-out example), the run's
  steps, time, CPU and settings, the guard's rollbacks, and the curves read back from the run's
  TensorBoard logs; `docs/assets/albert_en_mini/curves.png` draws them.
"""

from __future__ import annotations

import json
import platform
import time
from pathlib import Path

from albert_tf.benchmarking.machine import cpu_description

ROOT = Path(__file__).resolve().parents[1]


def _scalars(log_dir: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar of a TensorBoard log directory: {tag: [(step, value), ...]}."""
    import tensorflow as tf

    series: dict[str, list[tuple[int, float]]] = {}
    for path in sorted(log_dir.glob("events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            for value in event.summary.value:
                number = float(tf.make_ndarray(value.tensor)) if value.HasField("tensor") else None
                if number is None:
                    number = float(value.simple_value)
                series.setdefault(value.tag, []).append((int(event.step), number))
    return {tag: sorted(dict(points).items()) for tag, points in series.items()}


def plot(curves: dict, path: Path, title: str) -> None:
    import matplotlib
    import matplotlib.ticker

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # Two rows, 800 px wide: the docs page shows it at its content width (about 700 px at a
    # 1280 px window) with the labels still readable.
    fig = plt.figure(figsize=(8, 7))
    grid = fig.add_gridspec(2, 2)
    axes = [fig.add_subplot(grid[0, :]), fig.add_subplot(grid[1, 0]), fig.add_subplot(grid[1, 1])]
    for tag, label in (("loss", "total"), ("mlm_loss", "MLM"), ("sop_loss", "SOP")):
        points = curves["train"].get(tag, [])
        axes[0].plot([s for s, _ in points], [v for _, v in points], label=f"train {label}")
    points = curves["eval"].get("loss", [])
    axes[0].plot([s for s, _ in points], [v for _, v in points], "o--", label="held-out total")
    axes[0].set(xlabel="step", ylabel="loss", title="losses")
    for tag, label in (("mlm_accuracy", "MLM"), ("sop_accuracy", "SOP")):
        points = curves["eval"].get(tag, [])
        axes[1].plot(
            [s for s, _ in points], [v for _, v in points], "o-", label=f"held-out {label}"
        )
    axes[1].set(xlabel="step", ylabel="accuracy", title="held-out accuracy")
    points = curves["train"].get("learning_rate", [])
    axes[2].plot([s for s, _ in points], [v for _, v in points])
    axes[2].set(xlabel="step", ylabel="learning rate", title="LAMB learning rate")
    for axis in axes[:2]:
        axis.legend()
    for axis in axes[1:]:  # half-width panels: steps 0, 4000, 8000, 12000, not run together
        axis.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(4))
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def package(work: Path, results: Path) -> dict:
    from albert_tf.checkpoint import load_checkpoint_dir
    from albert_tf.config import SHIPPED_DIR, SP_MODEL_FILE
    from albert_tf.dtypes import resolve_dtype
    from albert_tf.pretrained import write_shipped
    from albert_tf.pretraining.evaluate import evaluate
    from albert_tf.run_record import RUN_LOG_FILE, RunLog

    run = work / "run"
    model = load_checkpoint_dir(run)
    model.sp_model_path = run / SP_MODEL_FILE
    name = "albert_en_mini"
    write_shipped(model, SHIPPED_DIR / name, overwrite=True)
    heldout = str(work / "records_heldout" / "*.tfrecord")
    scores = {
        "float32 checkpoint": evaluate(str(run), heldout, batch_size=64),
        "shipped float16 weights": evaluate(name, heldout, batch_size=64),
    }
    curves = {split: _scalars(run / "logs" / split) for split in ("train", "eval")}
    settings = json.loads((run / "pretrain_run.json").read_text())
    guard = run / "guard.json"
    seconds = [v for _, v in curves["train"].get("seconds_per_step", [])]
    log_every = 100
    record = {
        "name": name,
        "step": scores["float32 checkpoint"]["step"],
        "train_seconds_logged": round(sum(seconds) * log_every, 1),
        "cpu": cpu_description()["model"],
        # What ran, from the run's own log; a run from before the log: --dtype as this
        # machine resolves it, which is the run's only where the run ran here.
        "dtype": resolve_dtype(settings["dtype"], "CPU"),
        **({"ran": RunLog(run).summary()} if (run / RUN_LOG_FILE).is_file() else {}),
        "machine": f"{platform.machine()}, 2 cores, niced (nice 19) beside other work",
        "settings": {k: settings[k] for k in sorted(settings) if k not in ("overwrite",)},
        "heldout": {
            k: {m: v[m] for m in ("num_examples", "loss", "mlm_accuracy", "sop_accuracy")}
            for k, v in scores.items()
        },
        "rollbacks": json.loads(guard.read_text())["rollbacks"] if guard.is_file() else [],
        "curves": curves,
        "written": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    results.mkdir(parents=True, exist_ok=True)
    (results / "pretraining.json").write_text(json.dumps(record, indent=1) + "\n")
    assets = ROOT / "docs" / "assets" / name
    assets.mkdir(parents=True, exist_ok=True)
    draw_curves(record, assets / "curves.png")
    print(json.dumps(record["heldout"], indent=1))
    return record


def draw_curves(record: dict, path: Path) -> None:
    """`plot` of a pretraining.json record's curves, titled with its steps, batch and CPU."""
    settings = record["settings"]
    plot(
        record["curves"],
        path,
        f"albert_en_mini: {record['step']} steps x {settings['batch_size']} x "
        f"{settings['max_seq_length']} tokens ({record['cpu']}, 2 cores)",
    )


if __name__ == "__main__":  # redraw the chart from the committed record
    draw_curves(
        json.loads((ROOT / "experiments/results/albert_en_mini/pretraining.json").read_text()),
        ROOT / "docs/assets/albert_en_mini/curves.png",
    )
