"""`finetune --seeds N`: N runs that differ only in their seed, the best on --eval kept.

Fine-tuning a small data set from one seed is a draw: ALBERT's and BERT's users could not
reproduce GLUE figures from one run (google-research/albert#56, #120), and the paper reports
the median of 5. The runs here are reported as the mean and standard deviation of each run's
best-epoch metric on --eval, the figure to quote; the model kept is the run best on --eval, the
one to deploy. Its own dev score is the maximum of N draws, so it overstates what a new run
would score: judge it on data that chose nothing (a test split).
"""

from __future__ import annotations

import math
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from albert_tf.errors import ConfigError
from albert_tf.finetune.directory import write_metadata
from albert_tf.finetune.predict import FinetunedModel
from albert_tf.finetune.settings import FinetuneSettings
from albert_tf.finetune.summary import duration
from albert_tf.io_utils import atomic_dir

Log = Callable[[str], None]

SEEDS_DIR = ".seeds"  # inside the output's temporary directory, removed at the end


def _better(value: float | None, best: float | None) -> bool:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return best is None
    return best is None or value > best


def _promote(directory: Path, result: FinetunedModel, tmp: Path) -> None:
    """Writes the kept run's finetune.json, moves its files from `directory` up into the
    output's temporary directory `tmp`, and removes the other runs."""
    write_metadata(directory, result.metadata)
    for child in directory.iterdir():
        os.replace(child, tmp / child.name)
    shutil.rmtree(tmp / SEEDS_DIR)


def finetune_seeds(
    settings: FinetuneSettings,
    finetune: Callable[[FinetuneSettings, Log, bool], FinetunedModel],
    log: Log = print,
    progress: bool = True,
) -> FinetunedModel:
    """Runs `settings.seeds` fine-tunings with seeds `settings.seed`, +1, ..., each by
    `finetune(settings, log, progress)` (one run of `trainer.finetune`); writes the one best on
    --eval to `settings.output_dir`, its finetune.json holding every run's figure under "seeds".
    ConfigError without --eval (nothing would choose)."""
    if settings.eval_path is None:
        raise ConfigError("--seeds needs --eval: the model kept is the run best on it")
    runs, kept = [], None
    with atomic_dir(settings.output_dir, overwrite=settings.overwrite) as tmp:
        for i in range(settings.seeds):
            seed = settings.seed + i
            log(f"seed {seed} (run {i + 1} of {settings.seeds})")
            directory = tmp / SEEDS_DIR / f"seed-{seed}"
            one = settings.replace(seed=seed, seeds=1, output_dir=str(directory), overwrite=False)
            result = finetune(one, log, progress)
            value = result.metadata["best_value"]
            runs.append({"seed": seed, "value": value, "best_epoch": result.metadata["best_epoch"]})
            if _better(value, None if kept is None else kept[1].metadata["best_value"]):
                kept = (directory, result)
        directory, result = kept
        values = np.asarray([r["value"] for r in runs], np.float64)
        metric = result.metadata["best_metric"]
        record = {
            "metric": metric,
            "runs": runs,
            "mean": float(values.mean()),
            "sd": float(values.std(ddof=1)),
            "kept_seed": result.settings.seed,
        }
        result.metadata["seeds"] = record
        _promote(directory, result, tmp)
    log(
        f"{metric} over {len(runs)} seeds: mean {record['mean']:.4f} ± {record['sd']:.4f} (sd); "
        f"kept seed {record['kept_seed']} ({result.metadata['best_value']:.4f}, the best on "
        f"{settings.eval_path}) in {settings.output_dir}"
    )
    return result


def finetune_restarts(
    settings: FinetuneSettings,
    finetune: Callable[..., FinetunedModel],
    log: Log = print,
    progress: bool = True,
) -> FinetunedModel:
    """`finetune --restarts N` with --eval: runs `finetune` with `settings.seed`; while a run's
    best epoch does not beat its floor (finetune.json's "learned"), runs again with the next
    seed, up to N more times. Writes the run best on --eval to `settings.output_dir`, with
    every run's figure under "restarts" in its finetune.json, and logs its closing lines.

    Devlin et al. (2019) restarted BERT-large's unstable fine-tuning on small data sets and kept
    the best on dev; Dodge et al. (2020) found that runs which fail do so from the seed (weight
    initialization and data order) and are cheaper to restart than to wait for. A run that learns
    at once costs nothing more. `finetune` is one run of `trainer.finetune`, called as
    `finetune(settings, log, progress, closing=..., shown_output=...)`.
    """
    runs, kept, started = [], None, time.monotonic()
    with atomic_dir(settings.output_dir, overwrite=settings.overwrite) as tmp:
        for attempt in range(settings.restarts + 1):
            seed = settings.seed + attempt
            directory = tmp / SEEDS_DIR / f"seed-{seed}"
            one = settings.replace(
                seed=seed, restarts=0, output_dir=str(directory), overwrite=False
            )
            closing: list[str] = []
            result = finetune(
                one, log, progress, closing=closing.append, shown_output=settings.output_dir
            )
            value, learned = result.metadata["best_value"], result.metadata["learned"]
            runs.append({"seed": seed, "value": value, "learned": learned})
            if _better(value, None if kept is None else kept[1].metadata["best_value"]):
                kept = (directory, result, closing)
            if learned:
                break
            if attempt < settings.restarts:
                log(
                    f"seed {seed} learned nothing ({closing[1]}); restart {attempt + 1} of "
                    f"{settings.restarts} with seed {seed + 1}"
                )
        directory, result, closing = kept
        result.metadata["restarts"] = {"runs": runs, "kept_seed": result.settings.seed}
        _promote(directory, result, tmp)
    if len(runs) > 1:
        log(
            f"kept seed {result.settings.seed} of {len(runs)} runs (the best on "
            f"{settings.eval_path}; {duration(time.monotonic() - started)} in all)"
        )
    for line in closing:
        log(line)
    return result
