"""`albert-tf pretrain`: MLM + SOP pretraining on create-pretraining-data shards.

Every path may be local or a tf.io.gfile URL (gs://bucket/..., as Cloud TPUs need).

Exit codes: 0 done (or stopped by --minutes), 2 bad input or a divergence the guard could not
undo (guard.py), 75 preempted (SIGTERM or SIGINT: a
checkpoint of the step reached was written; the same command resumes), 69 a lost worker (the
same command on every worker resumes from the last checkpoint). See preemption.py.
"""

from __future__ import annotations

import argparse
import os
import sys

from albert_tf.errors import ConfigError
from albert_tf.pretraining.settings import (
    DEFAULT_STEPS_PER_LOOP,
    DTYPE_CHOICES,
    JIT_CHOICES,
    STRATEGY_CHOICES,
    PretrainSettings,
    cli_defaults,
)

HELP = "Pretrain (or resume pretraining) an ALBERT on TFRecord shards (MLM + SOP/NSP, LAMB)."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data",
        required=True,
        help="glob(s) of training TFRecords, comma-separated (local or gs://)",
    )
    parser.add_argument(
        "--config",
        help="preset name or albert_config.json (default with --init: the init checkpoint's)",
    )
    parser.add_argument(
        "--output",
        required=True,
        help="run directory (a checkpoint dir, local or gs://); resumed if it holds this run",
    )
    parser.add_argument(
        "--eval",
        "--eval-data",
        metavar="GLOB",
        help="glob(s) of held-out TFRecords, comma-separated",
    )
    parser.add_argument(
        "--max-eval-examples",
        type=int,
        metavar="N",
        help="evaluate on at most this many --eval examples",
    )
    parser.add_argument(
        "--init",
        "--init-checkpoint",
        metavar="DIR",
        help="checkpoint directory (or a shipped model's name, e.g. albert_en_mini) to continue "
        "pretraining from (default: random weights)",
    )
    parser.add_argument("--sp-model", help="SentencePiece model, copied into the output")
    parser.add_argument("--train-steps", type=int, required=True, help="optimizer steps in all")
    parser.add_argument("--batch-size", type=int, required=True, help="global batch size")
    parser.add_argument(
        "--learning-rate",
        type=float,
        help="LAMB's peak learning rate, decayed linearly to 0 (the original's for batch 4096)",
    )
    parser.add_argument("--warmup-steps", type=int, help="steps over which the rate rises from 0")
    parser.add_argument("--save-every", type=int, help="checkpoint interval (steps)")
    parser.add_argument("--keep", type=int, help="checkpoints to keep (at least 2)")
    parser.add_argument("--eval-every", type=int, help="evaluation interval (steps)")
    parser.add_argument("--log-every", type=int, help="summary interval (steps)")
    parser.add_argument(
        "--strategy",
        choices=STRATEGY_CHOICES,
        help="tf.distribute strategy (default: the one for the devices TensorFlow sees)",
    )
    parser.add_argument("--tpu", help="TPU name or grpc:// address (with --strategy tpu)")
    parser.add_argument(
        "--dtype",
        choices=DTYPE_CHOICES,
        help="compute dtype (auto: the machine's best)",
    )
    parser.add_argument("--seed", type=int, help="seed of the weights and the data order")
    parser.add_argument(
        "--minutes", type=float, help="stop after this much wall time (saving a checkpoint)"
    )
    _add_loop_arguments(parser)
    parser.set_defaults(**cli_defaults())


def _add_loop_arguments(parser: argparse.ArgumentParser) -> None:
    """How the loop runs: host loops, accumulation, XLA, determinism, preemption, the guard."""
    parser.add_argument(
        "--steps-per-loop",
        type=int,
        help="training steps per host loop (one compiled call, one metric read); default "
        + ", ".join(f"{n} on {kind}" for kind, n in DEFAULT_STEPS_PER_LOOP.items()),
    )
    parser.add_argument(
        "--grad-accum-steps",
        type=int,
        help="accumulate gradients over K micro-batches of batch-size/replicas/K per update",
    )
    parser.add_argument(
        "--jit-compile",
        choices=JIT_CHOICES,
        help="XLA for the replica step (auto: on for TPU and GPU, off on the CPU)",
    )
    parser.add_argument(
        "--deterministic", action="store_true", help="deterministic TF ops (exactly reproducible)"
    )
    parser.add_argument(
        "--preemption-grace",
        type=float,
        metavar="SECONDS",
        help="seconds between SIGTERM and the kill: loops are cut so that one loop and a "
        "checkpoint save fit in it (on SIGTERM the run saves at the end of its loop and exits "
        "with code 75)",
    )
    parser.add_argument(
        "--spike-factor",
        type=float,
        help="divergence guard: a loop whose mean loss exceeds this times the lowest recent "
        "median loss (or any non-finite loss or weight) rolls back to the last checkpoint, "
        "skips the batches since and halves the learning rate; inf checks only for non-finite "
        "values (default %(default)s)",
    )
    parser.add_argument(
        "--max-rollbacks",
        type=int,
        help="rollbacks allowed before a divergence stops the run with exit code 2 "
        "(default %(default)s)",
    )
    parser.add_argument("--overwrite", action="store_true", help="replace an existing output")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def run(args: argparse.Namespace) -> int:
    from albert_tf.pretraining.preemption import EXIT_PREEMPTED, EXIT_WORKER_LOST, WorkerLost
    from albert_tf.pretraining.trainer import pretrain

    if args.config is None:
        if not args.init:
            raise ConfigError("pretrain needs --config (a preset or albert_config.json) or --init")
        args.config = args.init  # a checkpoint directory or a shipped model's name
    try:
        result = pretrain(PretrainSettings.from_args(args))
    except WorkerLost as e:
        print(f"albert-tf pretrain: error: {e}", file=sys.stderr, flush=True)
        sys.stdout.flush()
        # Exit at once: TensorFlow's teardown waits on the dead peer for ~10 s more.
        os._exit(EXIT_WORKER_LOST)
    if result.preempted:
        print(f"preempted ({result.preempted}): step {result.step}, {result.seconds:.0f} s")
        print(
            f"albert-tf pretrain: preempted by {result.preempted} at step {result.step}: "
            f"checkpoint saved in {result.output_dir}; run the same command to resume "
            f"(exit code {EXIT_PREEMPTED})",
            file=sys.stderr,
        )
        return EXIT_PREEMPTED
    status = "stopped (time limit)" if result.stopped_early else "done"
    print(f"{status}: step {result.step}, {result.seconds:.0f} s, dtype {result.dtype}")
    if result.eval_history:
        final = result.eval_history[-1]
        accuracies = [f"{k} {v:.4f}" for k, v in final.items() if k.endswith("_accuracy")]
        print(f"held-out: {', '.join(accuracies)}, loss {final['loss']:.4f}")
    if result.stalled:
        print(f"warning: {result.stalled}", file=sys.stderr)
    print(f"checkpoints: {result.output_dir}")
    return 0
