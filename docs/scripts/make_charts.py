"""Draws the docs' charts (docs/assets/charts/*.png) from the committed results files.

    python docs/scripts/make_charts.py [--output DIR]

Each chart reads one results file and nothing else; the pages show it beside a compact table of
the same figures. tests/docs/test_docs.py runs this script and checks every chart a page shows is
drawn.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent  # docs/scripts/ -> the repository
OUTPUT = REPO / "docs" / "assets" / "charts"
OURS, PEER = "#3f51b5", "#9e9e9e"  # the site's indigo; a peer in grey
PEERS = ("#9e9e9e", "#e0a458", "#6aa6a0")  # several peers, told apart


def _load(relative: str) -> dict:
    return json.loads((REPO / relative).read_text())


def _save(figure, path: Path) -> None:
    figure.tight_layout()
    # No date or software version in the file: the same data draws the same bytes here.
    figure.savefig(path, dpi=110, metadata={"Software": None})


def speed(plt, output: Path) -> None:
    """Inference and training throughput against the peers (benchmarks/results/model-*.json)."""
    data = _load("benchmarks/results/model-2026-11-22.json")
    systems = data["systems"]
    figure, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for ax, name in zip(axes, ("inference tokens/s", "training examples/s"), strict=True):
        figures = data["figures"][name]
        width = 0.8 / len(systems)
        for i, system in enumerate(systems):
            values = [figures[dtype][i] for dtype in figures]
            xs = [d + (i - (len(systems) - 1) / 2) * width for d in range(len(figures))]
            shown = [(x, v) for x, v in zip(xs, values, strict=True) if v is not None]
            if shown:
                ax.bar(
                    *zip(*shown, strict=True),
                    width=width,
                    label=system,
                    color=OURS if i == 0 else PEERS[i - 1],
                    edgecolor="white",
                )
        ax.set_xticks(range(len(figures)), list(figures))
        ax.set_title(f"ALBERT-base, {name} (higher is better)", fontsize=10)
        ax.spines[["top", "right"]].set_visible(False)
    axes[0].legend(fontsize=8, frameon=False)
    figure.suptitle(
        f"2-core {data['meta']['machine']['model']}, {data['meta']['date']}", fontsize=9
    )
    _save(figure, output / "speed.png")
    plt.close(figure)


def int8(plt, output: Path) -> None:
    """Int8 throughput and latency, ours against HF -> ONNX Runtime (serving-int8-*.json)."""
    data = _load("benchmarks/results/serving-int8-gelu1op-default.json")
    names = {
        "ours_tflite": "ours: TFLite",
        "ours_onnx": "ours: ONNX dynamic",
        "ours_onnx_static": "ours: ONNX static",
        "ort": "HF -> ONNX Runtime",
    }
    records = data["records"]

    def value(system: str, case: str, metric: str) -> float:
        return next(
            r["value"]
            for r in records
            if (r["system"], r["case"], r["metric"]) == (system, case, metric)
        )

    figure, axes = plt.subplots(1, 2, figsize=(10, 3.2))
    panels = (
        ("inference", "throughput", "batch 32 x 128, tokens/s (higher is better)"),
        ("latency", "latency", "batch 1 x 128, ms (lower is better)"),
    )
    for ax, (case, metric, title) in zip(axes, panels, strict=True):
        values = [value(system, case, metric) for system in names]
        colors = [PEER if system == "ort" else OURS for system in names]
        ax.barh(list(names.values()), values, color=colors)
        for y, v in enumerate(values):
            ax.text(v, y, f" {v:,.0f}" if v > 100 else f" {v:.1f}", va="center", fontsize=8)
        ax.invert_yaxis()
        ax.set_title(title, fontsize=10)
        ax.spines[["top", "right"]].set_visible(False)
        ax.set_xlim(0, max(values) * 1.18)
    machine = data["meta"]["machine"]
    figure.suptitle(f"ALBERT-base int8, {machine['cores']}-core {machine['model']}", fontsize=9)
    _save(figure, output / "int8.png")
    plt.close(figure)


def int8_accuracy(plt, output: Path) -> None:
    """Rotten Tomatoes test accuracy of each serving form, per seed (onnx_int8_rotten_tomatoes)."""
    folder = REPO / "experiments" / "results" / "onnx_int8_rotten_tomatoes"
    seeds = [json.loads(p.read_text()) for p in sorted(folder.glob("seed_*.json"))]
    forms = list(seeds[0]["scores"])
    figure, ax = plt.subplots(figsize=(8, 3.2))
    for i, form in enumerate(forms):
        values = [100 * s["scores"][form]["test_accuracy"] for s in seeds]
        ax.scatter(
            values, [i] * len(values), color=OURS, zorder=3, label="a seed" if i == 0 else None
        )
        ax.plot([statistics.mean(values)] * 2, [i - 0.3, i + 0.3], color="black", lw=1.5)
    ax.set_yticks(range(len(forms)), forms, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("test accuracy, % (1,057 sentences; bar = mean)")
    ax.set_title("Rotten Tomatoes classifiers: float32 against int8", fontsize=10)
    ax.spines[["top", "right"]].set_visible(False)
    ax.legend(fontsize=8, frameon=False, loc="lower right")
    _save(figure, output / "int8_accuracy.png")
    plt.close(figure)


def claims(plt, output: Path) -> None:
    """Each ablation claim's difference with two standard errors (ablation/results.json)."""
    data = _load("experiments/results/ablation/results.json")
    colors = {"holds": "#2e7d32", "does not hold": "#c62828", "within noise": "#757575"}
    rows = data["claims"]
    figure, ax = plt.subplots(figsize=(8, 0.42 * len(rows) + 1.2))
    for i, claim in enumerate(rows):
        color = colors[claim["verdict"]]
        ax.errorbar(claim["difference"], i, xerr=2 * claim["se"], fmt="o", color=color, capsize=3)
        ax.text(
            claim["difference"] + 2 * claim["se"] + 0.5,
            i,
            claim["verdict"],
            va="center",
            fontsize=8,
            color=color,
        )
    ax.axvline(0, color="black", lw=0.8)
    # "Table 5: sop vs nsp (held-out SOP accuracy)": the two rows compared, and on what.
    labels = [
        f"{c['table'].replace('(ours)', 'ours')}: {c['rows'][0]} vs {c['rows'][1]}\n{c['metric']}"
        for c in rows
    ]
    ax.set_yticks(range(len(rows)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("difference in the paper's direction, points (± 2 SE)")
    ax.spines[["top", "right"]].set_visible(False)
    _save(figure, output / "claims.png")
    plt.close(figure)


def long_documents(plt, output: Path) -> None:
    """Dev accuracy by window placement and task (long_documents.json)."""
    data = _load("experiments/results/long_documents.json")
    placements = ["head", "spread", "head-tail", "every-token"]
    tasks = list(data["tasks"])
    figure, ax = plt.subplots(figsize=(10, 3.4))
    width = 0.2
    shades = {"head": PEER, "spread": OURS, "head-tail": "#7986cb", "every-token": "#263238"}
    for i, placement in enumerate(placements):
        xs, means, errors = [], [], []
        for t, task in enumerate(tasks):
            result = data["tasks"][task].get(placement)
            if result:
                xs.append(t + (i - 1.5) * width)
                means.append(100 * result["mean"])
                errors.append(100 * result["se"])
        ax.bar(xs, means, width, yerr=errors, capsize=2, label=placement, color=shades[placement])
    ax.axhline(50, color="black", lw=0.6, ls="--")
    ax.set_xticks(range(len(tasks)), tasks)
    ax.set_ylabel("dev accuracy, % (± SE, 3 seeds)")
    ax.set_ylim(40, 100)
    ax.legend(fontsize=8, frameon=False, ncol=4, loc="upper left")
    ax.spines[["top", "right"]].set_visible(False)
    _save(figure, output / "long_documents.png")
    plt.close(figure)


def brown_windows(plt, output: Path) -> None:
    """Held-out accuracy with one window and with six, per seed (brown_windows.json)."""
    data = _load("experiments/results/brown_windows.json")
    figure, ax = plt.subplots(figsize=(6, 2.8))
    for s, seed in enumerate(data["seeds"]):
        for r, run in enumerate(seed["runs"]):
            ax.bar(
                s * 3 + r,
                100 * run["best_dev_accuracy"],
                color=OURS if run["max_windows"] > 1 else PEER,
                label=(f"{run['max_windows']} window" + "s" * (run["max_windows"] > 1))
                if s == 0
                else None,
            )
    ax.set_xticks(
        [s * 3 + 0.5 for s in range(len(data["seeds"]))],
        [f"seed {x['seed']}" for x in data["seeds"]],
    )
    ax.set_ylim(50, 100)
    ax.set_ylabel("held-out accuracy, %")
    ax.legend(fontsize=8, frameon=False)
    ax.spines[["top", "right"]].set_visible(False)
    _save(figure, output / "brown_windows.png")
    plt.close(figure)


CHARTS = (speed, int8, int8_accuracy, claims, long_documents, brown_windows)


def main(argv: list[str] | None = None) -> int:
    options = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    options.add_argument("--output", type=Path, default=OUTPUT, help="folder for the PNGs")
    args = options.parse_args(argv)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    args.output.mkdir(parents=True, exist_ok=True)
    for chart in CHARTS:
        chart(plt, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
