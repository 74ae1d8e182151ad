"""`curves.png`: the quickstart's training loss and held-out masked-LM accuracy against steps.

matplotlib (half a second to import) is imported when the curves are drawn.
"""

from __future__ import annotations

from pathlib import Path

from albert_tf.io_utils import atomic_file


def plot_curves(
    train_history: list[dict],
    eval_history: list[dict],
    unigram_top1: float,
    random_top1: float,
    path: Path,
) -> Path:
    """Writes the two panels to `path` (PNG) and returns it: training loss (each log point's
    mean), and held-out MLM top-1 accuracy (each evaluation) with the unigram guess and the
    random-init model as horizontal lines. History rows are pretrain's (`step`, `loss`,
    `mlm_accuracy`)."""
    import matplotlib  # start-up: half a second, for the curves only

    matplotlib.use("Agg")  # no display needed; the quickstart only writes the file
    import matplotlib.pyplot as plt  # environment: after the backend is chosen

    figure, (loss_axes, accuracy_axes) = plt.subplots(
        1, 2, figsize=(10, 4), constrained_layout=True
    )
    loss_axes.plot([r["step"] for r in train_history], [r["loss"] for r in train_history])
    loss_axes.set(xlabel="step", ylabel="MLM + SOP loss", title="training loss")
    steps = [r["step"] for r in eval_history]
    accuracy_axes.plot(
        steps, [100 * r["mlm_accuracy"] for r in eval_history], "o-", label="trained (held out)"
    )
    accuracy_axes.axhline(100 * unigram_top1, color="gray", ls="--", label="unigram guess")
    accuracy_axes.axhline(100 * random_top1, color="gray", ls=":", label="random weights")
    accuracy_axes.set(
        xlabel="step", ylabel="top-1 accuracy (%)", title="held-out masked-LM accuracy"
    )
    accuracy_axes.set_ylim(bottom=0)
    accuracy_axes.legend()
    with atomic_file(path) as tmp:
        figure.savefig(tmp, format="png", dpi=100)
    plt.close(figure)
    return path
