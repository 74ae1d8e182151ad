"""Does the training step with compiled kernels (layers/compiled.py) learn as the plain one did?

The quickstart's setting: its embedded corpus, SentencePiece vocabulary and pretraining data
(`albert-tf quickstart`'s recipe: vocab 5,000, 128 tokens, 20 predictions, dupe factor 2 for
training), the `tiny` preset, LAMB at 1e-2 with 10% warmup, batch 32. Each arm pretrains for a
fixed number of steps (not a wall time: the arms must see the same batches) and is evaluated on
the held-out data: masked-LM and SOP accuracy. Arms: dtype (float32, bfloat16) x step
("compiled": today's; "plain": traced inside `compiled_training(False)`, the step before it) x
seed. Resumable: each finished arm is a line of the results file, and a rerun skips it; the
corpus, vocabulary and records are built once under --work.

The summary gives, per dtype and step, the mean over seeds with its standard error, the
compiled - plain difference of the seed-paired runs with its standard error, and the sampling
standard error of one accuracy (binomial, from the held-out counts).

    nice -n 10 python -m experiments.learning_compiled_step --work data/learning_compiled \\
        --steps 300 --seeds 1,2
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "experiments" / "results" / "learning_compiled_step.jsonl"
SUMMARY = ROOT / "experiments" / "results" / "learning_compiled_step.json"


def prepare(work: Path) -> tuple[Path, Path, Path]:
    """(training records glob, held-out records glob, sp model), built once."""
    from albert_tf import quickstart as qs
    from albert_tf.preprocess.corpus import build_default_corpus
    from albert_tf.preprocess.pretraining_data import create_pretraining_data
    from albert_tf.preprocess.spm_train import train_sentencepiece

    work.mkdir(parents=True, exist_ok=True)
    corpus = build_default_corpus(work / "corpus")
    sp_model = work / "spm.model"
    if not sp_model.exists():
        train_sentencepiece([str(corpus.train)], qs.VOCAB_SIZE, str(work / "spm"))
    for split, text, dupe in (("data", corpus.train, 2), ("heldout_data", corpus.heldout, 1)):
        if not (work / split).exists():
            create_pretraining_data(
                [str(text)],
                str(sp_model),
                str(work / split),
                max_seq_length=qs.SEQ_LENGTH,
                max_predictions_per_seq=qs.MAX_PREDICTIONS,
                dupe_factor=dupe,
                seed=qs.SEED,
                num_shards=2 if dupe > 1 else 1,
            )
    return work / "data" / "*.tfrecord", work / "heldout_data" / "*.tfrecord", sp_model


def run_arm(work: Path, dtype: str, step: str, seed: int, steps: int) -> dict:
    import shutil

    from albert_tf import quickstart as qs
    from albert_tf.config import PRESETS
    from albert_tf.layers.compiled import compiled_training
    from albert_tf.preprocess.tokenizer import AlbertTokenizer
    from albert_tf.pretraining.settings import PretrainSettings
    from albert_tf.pretraining.trainer import pretrain

    data, heldout, sp_model = prepare(work)
    config = PRESETS["tiny"].replace(vocab_size=AlbertTokenizer(sp_model).vocab_size)
    output = work / "runs" / f"{dtype}-{step}-{seed}"
    shutil.rmtree(output, ignore_errors=True)  # an arm killed midway starts again
    settings = PretrainSettings(
        data=str(data),
        eval=str(heldout),
        config=config,
        output=str(output),
        train_steps=steps,
        batch_size=qs.BATCH_SIZE,
        learning_rate=qs.LEARNING_RATE,
        warmup_steps=steps // 10,
        save_every=steps,
        eval_every=steps,
        log_every=max(steps // 10, 1),
        dtype=dtype,
        seed=seed,
        progress=False,
    )
    begin = time.monotonic()
    with compiled_training(step == "compiled"):
        result = pretrain(settings)
    final = result.eval_history[-1]
    return {
        "dtype": dtype,
        "step": step,
        "seed": seed,
        "steps": result.step,
        "mlm_accuracy": final["mlm_accuracy"],
        "sop_accuracy": final["sop_accuracy"],
        "loss": final["loss"],
        "train_seconds": time.monotonic() - begin,
    }


def _mean_se(values: list[float]) -> tuple[float, float | None]:
    if len(values) < 2:
        return values[0], None
    return statistics.fmean(values), statistics.stdev(values) / math.sqrt(len(values))


def summarize(rows: list[dict], heldout_counts: dict[str, int]) -> dict:
    summary: dict = {"arms": {}, "differences": {}, "sampling_se": {}}
    for metric, count in heldout_counts.items():
        accuracies = [r[metric] for r in rows]
        p = statistics.fmean(accuracies) if accuracies else 0.5
        summary["sampling_se"][metric] = math.sqrt(p * (1 - p) / count) if count else None
    for dtype in sorted({r["dtype"] for r in rows}):
        for step in ("plain", "compiled"):
            arm = [r for r in rows if r["dtype"] == dtype and r["step"] == step]
            if arm:
                summary["arms"][f"{dtype}/{step}"] = {
                    m: _mean_se([r[m] for r in arm]) for m in ("mlm_accuracy", "sop_accuracy")
                } | {"seeds": sorted(r["seed"] for r in arm)}
        by_seed = {
            (r["seed"], r["step"]): r for r in rows if r["dtype"] == dtype
        }  # seed-paired differences
        seeds = sorted(
            {s for s, _ in by_seed if (s, "plain") in by_seed and (s, "compiled") in by_seed}
        )
        if seeds:
            summary["differences"][dtype] = {
                m: _mean_se([by_seed[s, "compiled"][m] - by_seed[s, "plain"][m] for s in seeds])
                for m in ("mlm_accuracy", "sop_accuracy")
            } | {"seeds": seeds}
    return summary


def _heldout_counts(work: Path) -> dict[str, int]:
    """Masked tokens (MLM) and examples (SOP) of the held-out data, from its records."""
    import tensorflow as tf

    files = sorted(str(p) for p in (work / "heldout_data").glob("*.tfrecord"))
    features = {
        "masked_lm_weights": tf.io.VarLenFeature(tf.float32),
    }
    tokens = examples = 0
    for record in tf.data.TFRecordDataset(files):
        parsed = tf.io.parse_single_example(record, features)
        tokens += int(tf.reduce_sum(parsed["masked_lm_weights"].values))
        examples += 1
    return {"mlm_accuracy": tokens, "sop_accuracy": examples}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path("data/learning_compiled"))
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--seeds", default="1,2")
    parser.add_argument("--dtypes", default="float32,bfloat16")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    rows = []
    if RESULTS.exists():
        rows = [json.loads(line) for line in RESULTS.read_text(encoding="utf-8").splitlines()]
    # One row per arm: concurrent runs (one per dtype, say) may both have finished one.
    rows = list(
        {(r["dtype"], r["step"], r["seed"], r["steps"]): r for r in reversed(rows)}.values()
    )
    done = {(r["dtype"], r["step"], r["seed"]) for r in rows if r["steps"] == args.steps}
    for seed in seeds:
        for dtype in args.dtypes.split(","):
            for step in ("plain", "compiled"):
                if (dtype, step, seed) in done:
                    continue
                row = run_arm(args.work, dtype, step, seed, args.steps)
                print(json.dumps(row), flush=True)
                rows.append(row)
                RESULTS.parent.mkdir(parents=True, exist_ok=True)
                with RESULTS.open("a", encoding="utf-8") as f:
                    f.write(json.dumps(row) + "\n")
    rows = [r for r in rows if r["steps"] == args.steps]
    summary = summarize(rows, _heldout_counts(args.work)) | {"steps": args.steps}
    SUMMARY.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
