"""Does a fresh pooler make fine-tuning from a briefly pretrained model work (issue 45)?

Why: on VADER's NYT editorials (experiments/defaults_unseen.py) the quickstart's model with its
size's defaults stayed at the majority class for 2 of 3 seeds, where random init of the same shape
learned. Its pooled output lies almost on one line: over 256 Amazon snippets the first principal
direction holds 99% of the variance (albert_en_mini: 72%, random init: 24%), because pretraining
fits the pooler to sentence order only. Zhang et al. (ICLR 2021, "Revisiting few-sample BERT
fine-tuning") re-initialize the pooler (and top layers) for stable fine-tuning; ALBERT's layers are
shared, so only the pooler can be fresh here (`finetune --reinit-pooler`).

The arms, on the development sets only (VADER's Amazon snippets and tweets, the seed-0 80/10/10
splits of experiments/finetune_defaults.py, on which the size defaults were already chosen):
each model with its row's learning rate and epochs, pooler kept or re-initialized, seeds 1-3.
NYT is not read here.

The rule, fixed before the first run: for each model, the re-initialized pooler becomes its row's
default when (a) its mean dev accuracy over both sets and all seeds is higher than the kept
pooler's, and (b) no more of its runs end within one point of the majority class. Then
experiments/defaults_unseen.py checks the defaults once on NYT.

Each run appends a line to experiments/results/pooler_reinit/MODEL.jsonl; a rerun skips the
lines there, so a stopped run resumes. `--report` prints the table and the rule's verdict.

  nice -n 19 python -m experiments.pooler_reinit --model quickstart
  nice -n 19 python -m experiments.pooler_reinit --model albert_en_mini
  nice -n 19 python -m experiments.pooler_reinit --model albert_en_mini_distilled
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from experiments.finetune_defaults import read_results, run_one, vader_split

ROOT = Path(__file__).resolve().parents[1]

RESULTS = ROOT / "experiments" / "results" / "pooler_reinit"
SETS = ("amazon", "tweets")
SEEDS = (1, 2, 3)
# The model, its init, and its size row's learning rate and epochs (finetune.defaults).
# `albert_en_mini` is the pretrain-only model its results were measured on (shipped until
# 2026-11-28); `albert_en_mini_distilled` is the distilled one shipped since.
MODELS = {
    "quickstart": (str(ROOT / "data" / "quickstart" / "pretrain"), 1e-3, 5),
    "albert_en_mini": (None, 3e-4, 3),
    "albert_en_mini_distilled": ("albert_en_mini", 3e-4, 3),
}


def _init(model: str) -> str:
    init = MODELS[model][0]
    if init is None:  # the pretrain-only weights, from git history once no longer shipped
        from experiments.albert_en_mini_distill import WORK, pretrain_only

        init = str(pretrain_only(WORK))
    return init


STALLED = 0.01  # a run within this of the majority class learned nothing


def _stalled(record: dict) -> bool:
    return record["dev"] <= record["floor"] + STALLED


def report(model: str, records: list[dict]) -> list[str]:
    """Each arm per set and overall, and the rule's verdict."""
    lines, overall = [], {}
    for reinit in (False, True):
        arm = [r for r in records if r["reinit_pooler"] is reinit]
        for data in SETS:
            values = [r["dev"] for r in arm if r["data"] == data]
            if values:
                floor = next(r["floor"] for r in arm if r["data"] == data)
                lines.append(
                    f"{model} {data:7s} pooler {'reinit' if reinit else 'kept  '}: dev "
                    f"{np.mean(values):.4f} ({', '.join(f'{v:.3f}' for v in values)}; majority "
                    f"{floor:.3f})"
                )
        overall[reinit] = (
            [r["dev"] for r in arm],
            sum(_stalled(r) for r in arm),
        )
    complete = all(len(overall[arm][0]) == len(SETS) * len(SEEDS) for arm in overall)
    if complete:
        (kept, kept_stalled), (fresh, fresh_stalled) = overall[False], overall[True]
        adopt = np.mean(fresh) > np.mean(kept) and fresh_stalled <= kept_stalled
        lines.append(
            f"{model}: mean {np.mean(kept):.4f} kept ({kept_stalled} stalled) against "
            f"{np.mean(fresh):.4f} reinit ({fresh_stalled} stalled): "
            + ("re-initialize by default" if adopt else "keep the pretrained pooler")
        )
        # The same (set, seed) pairs: the difference's mean and its standard error.
        paired = {(r["data"], r["seed"], r["reinit_pooler"]): r["dev"] for r in records}
        diffs = [paired[(d, s, True)] - paired[(d, s, False)] for d in SETS for s in SEEDS]
        se = np.std(diffs, ddof=1) / np.sqrt(len(diffs))
        lines.append(
            f"{model}: reinit minus kept, paired by set and seed: {100 * np.mean(diffs):+.2f} "
            f"+- {100 * se:.2f} points (SE, {len(diffs)} pairs)"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=sorted(MODELS), required=True)
    parser.add_argument("--report", action="store_true", help="only print the results")
    args = parser.parse_args(argv)
    path = RESULTS / f"{args.model}.jsonl"
    records = read_results(path)
    if not args.report:
        _, learning_rate, epochs = MODELS[args.model]
        init = _init(args.model)
        done = {(r["data"], r["reinit_pooler"], r["seed"]) for r in records}
        path.parent.mkdir(parents=True, exist_ok=True)
        for data in SETS:
            train, dev = vader_split(data)
            for seed in SEEDS:
                for reinit in (False, True):
                    if (data, reinit, seed) in done:
                        continue
                    run = argparse.Namespace(
                        init=init,
                        config=None,
                        sp_model=None,
                        train=train,
                        dev=dev,
                        max_seq_length=128,
                        train_steps=None,
                        reinit_pooler=reinit,
                    )
                    record = {"data": data, **run_one(run, learning_rate, epochs, seed)}
                    with open(path, "a", encoding="utf-8") as f:
                        f.write(json.dumps(record) + "\n")
                    records.append(record)
                    print(
                        f"{data} seed {seed} pooler {'reinit' if reinit else 'kept'}: dev "
                        f"{record['dev']:.4f} (majority {record['floor']:.4f}, "
                        f"{record['seconds']:.0f} s)",
                        flush=True,
                    )
    for line in report(args.model, records):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
