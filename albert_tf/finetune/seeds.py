"""`finetune --seeds N` and `--restarts N`: several runs that differ only in their seed, one
loop for both, the run best on --eval kept (`summary.improves`: NaN never beats a number).

Fine-tuning a small data set from one seed is a draw: ALBERT's and BERT's users could not
reproduce GLUE figures from one run (google-research/albert#56, #120), and the paper reports
the median of 5. `--seeds N` runs N seeds and reports the mean and standard deviation of each
run's best-epoch metric on --eval, the figure to quote; the model kept is the run best on
--eval, the one to deploy. Its own dev score is the maximum of N draws, so it overstates what a
new run would score: judge it on data that chose nothing (a test split).

`--restarts N` runs again with the next seed while a run's best epoch does not beat its floor
(finetune.json's "learned"), up to N more times. Devlin et al. (2019) restarted BERT-large's
unstable fine-tuning on small data sets and kept the best on dev; Dodge et al. (2020) found that
runs which fail do so from the seed (weight initialization and data order) and are cheaper to
restart than to wait for. A run that learns at once costs nothing more.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable

import numpy as np

from albert_tf.errors import ConfigError
from albert_tf.finetune.predict import FinetunedModel
from albert_tf.finetune.settings import FinetuneSettings
from albert_tf.finetune.summary import duration, improves
from albert_tf.io_utils import atomic_dir

Log = Callable[[str], None]

SEEDS_DIR = ".seeds"  # inside the output's temporary directory, removed at the end


def _run_seeds(
    settings: FinetuneSettings,
    finetune: Callable[..., FinetunedModel],
    log: Log,
    progress: bool,
    restarts: bool,
) -> tuple[FinetunedModel, list[dict], list[str]]:
    """The one loop: runs `finetune` with seeds `settings.seed`, +1, ... (all `settings.seeds`
    of them, or with `restarts` until one learns, at most `settings.restarts` + 1), each in its
    own directory under the output's temporary one; moves the kept run (`improves`) into the
    output. Returns (the kept run, every run's figures, the kept run's closing lines)."""
    count = settings.restarts + 1 if restarts else settings.seeds
    runs, kept = [], None
    with atomic_dir(settings.output, overwrite=settings.overwrite) as tmp:
        for attempt in range(count):
            seed = settings.seed + attempt
            if not restarts:
                log(f"seed {seed} (run {attempt + 1} of {count})")
            directory = tmp / SEEDS_DIR / f"seed-{seed}"
            one = settings.replace(
                seed=seed, seeds=1, restarts=0, output=str(directory), overwrite=False
            )
            closing: list[str] = []
            result = finetune(
                one, log, progress, closing=closing.append, shown_output=settings.output
            )
            record = result.record
            if restarts:
                runs.append({"seed": seed, "value": record.best_value, "learned": record.learned})
            else:
                runs.append(
                    {"seed": seed, "value": record.best_value, "best_epoch": record.best_epoch}
                )
                for line in closing[1:]:  # the run's summary; "wrote" comes once, at the end
                    log(line)
            best = None if kept is None else kept[1].record.best_value
            if improves(record.best_value, best, first=kept is None):
                kept = (directory, result, closing)
            if restarts and record.learned:
                break
            if restarts and attempt < settings.restarts:
                log(
                    f"seed {seed} learned nothing ({closing[1]}); restart {attempt + 1} of "
                    f"{settings.restarts} with seed {seed + 1}"
                )
        directory, result, closing = kept
        if restarts:
            result.record.restarts = {"runs": runs, "kept_seed": result.settings.seed}
        else:
            values = np.asarray([run["value"] for run in runs], np.float64)
            result.record.seeds = {
                "metric": result.record.best_metric,
                "runs": runs,
                "mean": float(values.mean()),
                "sd": float(values.std(ddof=1)),
                "kept_seed": result.settings.seed,
            }
        result.record.write(directory)
        for child in directory.iterdir():
            os.replace(child, tmp / child.name)
        shutil.rmtree(tmp / SEEDS_DIR)
    return result, runs, closing


def finetune_seeds(
    settings: FinetuneSettings,
    finetune: Callable[..., FinetunedModel],
    log: Log = print,
    progress: bool = True,
) -> FinetunedModel:
    """Runs `settings.seeds` fine-tunings with seeds `settings.seed`, +1, ..., each by
    `finetune(settings, log, progress, closing=..., shown_output=...)` (one run of
    `trainer.finetune`); writes the one best on --eval to `settings.output`, its
    finetune.json holding every run's figure under "seeds". ConfigError without --eval."""
    if settings.eval is None:
        raise ConfigError("--seeds needs --eval: the model kept is the run best on it")
    result, _, _ = _run_seeds(settings, finetune, log, progress, restarts=False)
    seeds = result.record.seeds
    log(
        f"{seeds['metric']} over {len(seeds['runs'])} seeds: mean {seeds['mean']:.4f} ± "
        f"{seeds['sd']:.4f} (sd); kept seed {seeds['kept_seed']} "
        f"({result.record.best_value:.4f}, the best on {settings.eval}) in "
        f"{settings.output}"
    )
    return result


def finetune_restarts(
    settings: FinetuneSettings,
    finetune: Callable[..., FinetunedModel],
    log: Log = print,
    progress: bool = True,
) -> FinetunedModel:
    """`finetune --restarts N` with --eval (see the module docstring): writes the run best on
    --eval to `settings.output`, with every run's figure under "restarts" in its
    finetune.json, and logs its closing lines last."""
    started = time.monotonic()
    result, runs, closing = _run_seeds(settings, finetune, log, progress, restarts=True)
    if len(runs) > 1:
        log(
            f"kept seed {result.settings.seed} of {len(runs)} runs (the best on "
            f"{settings.eval}; {duration(time.monotonic() - started)} in all)"
        )
    for line in closing:
        log(line)
    return result
