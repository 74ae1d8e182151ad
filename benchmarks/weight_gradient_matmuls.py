"""The training step's weight-gradient matmuls against forward-shaped ones of the same FLOPs.

For each weight of ALBERT-base's shared block that the train case multiplies by [B*S, K] rows
(the FFN's [768, 3072] and [3072, 768], the fused QKV's [768, 2304]; B*S = 16 x 128), the script
times in one process, in interleaved blocks of calls:

- `X W`, the forward matmul ([B*S, K] x [K, N]), and two other kernels for it: XLA's (the
  matmul alone in a `jit_compile=True` function) and oneDNN's convolution (`X W` as a 1 x 1
  Conv2D over a [1, 1, B*S, K] image);
- `X^T dY` as TensorFlow's MatMul gradient computes it (`tf.matmul(x, dy, transpose_a=True)`);
- `(dY^T X)^T` (`tf.transpose(tf.matmul(dy, x, transpose_a=True))`);
- `transpose(X) dY` (the transpose first, then a plain matmul);
- `X^T dY` as the 1 x 1 convolution's filter gradient (`Conv2DBackpropFilter`).

Each form's time is divided by the forward matmul's of the same block round; the table shows the
mean ratio with its standard error over the rounds. The forward forms are checked to give the
same [B*S, N] product, and the gradient forms the same [K, N] product, before anything is timed;
every form has the same FLOPs.

A second table takes the shared block's view: twelve layers apply the same weight, so its
gradient is the sum of twelve `X^T dY` (today's step: each product cast to float32, then summed)
or one matmul over the twelve layers' stacked rows (`--layers`, [K, 12 B*S] x [12 B*S, N]),
with the stacking (two concats) and without it (rows already stacked, the matmul alone). Time
relative to the summed form, same rounds.

    python benchmarks/weight_gradient_matmuls.py --dtype bfloat16 --json benchmarks/results/weight-gradient-matmuls-bfloat16.json
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from albert_tf.benchmarking.machine import cpu_description  # noqa: E402
from albert_tf.benchmarking.worker import time_steps  # noqa: E402
from albert_tf.io_utils import write_json  # noqa: E402

ROWS = 16 * 128
WEIGHTS = ((768, 3072), (3072, 768), (768, 2304))
_xla_matmul = tf.function(tf.matmul, jit_compile=True)


def _image(t: tf.Tensor) -> tf.Tensor:
    return t[tf.newaxis, tf.newaxis]  # [R, C] as a [1, 1, R, C] image or 1 x 1 filter


def _conv_filter_gradient(x: tf.Tensor, dy: tf.Tensor) -> tf.Tensor:
    filter_sizes = [1, 1, x.shape[1], dy.shape[1]]
    gradient = tf.raw_ops.Conv2DBackpropFilter(
        input=_image(x),
        filter_sizes=filter_sizes,
        out_backprop=_image(dy),
        strides=[1, 1, 1, 1],
        padding="VALID",
    )
    return gradient[0, 0]


# name: (the product it computes, how)
FORMS = {
    "X W (forward)": ("forward", lambda x, w, dy: tf.matmul(x, w)),
    "X W, XLA": ("forward", lambda x, w, dy: _xla_matmul(x, w)),
    "X W as 1x1 Conv2D": (
        "forward",
        lambda x, w, dy: tf.nn.conv2d(_image(x), _image(w), 1, "VALID")[0, 0],
    ),
    "X^T dY (transpose_a)": ("gradient", lambda x, w, dy: tf.matmul(x, dy, transpose_a=True)),
    "(dY^T X)^T": ("gradient", lambda x, w, dy: tf.transpose(tf.matmul(dy, x, transpose_a=True))),
    "transpose(X) dY": ("gradient", lambda x, w, dy: tf.matmul(tf.transpose(x), dy)),
    "X^T dY as Conv2DBackpropFilter": ("gradient", lambda x, w, dy: _conv_filter_gradient(x, dy)),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="bfloat16")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--calls", type=int, default=4, help="calls per block (median taken)")
    parser.add_argument("--layers", type=int, default=12, help="layers sharing the weight")
    parser.add_argument("--rows", type=int, default=ROWS, help="rows of X, B*S (default 16 x 128)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.rounds < 2 or args.calls < 1 or args.layers < 2 or args.rows < 1:
        parser.error("--rounds and --layers must be at least 2, --calls and --rows at least 1")
    tf.config.threading.set_inter_op_parallelism_threads(1)
    dtype = tf.bfloat16 if args.dtype == "bfloat16" else tf.float32
    rng = np.random.default_rng(0)

    def tensor(*shape: int) -> tf.Tensor:
        return tf.cast(tf.constant(rng.standard_normal(shape, np.float32)), dtype)

    # The forms of each product must agree (float32 accumulation in all).
    tolerance = 2e-2 if args.dtype == "bfloat16" else 1e-4
    functions = {}
    for k, n in WEIGHTS:
        x, w, dy = tensor(args.rows, k), tensor(k, n), tensor(args.rows, n)
        for product in ("forward", "gradient"):
            computes = [compute for kind, compute in FORMS.values() if kind == product]
            _check_agree(
                [c(x, w, dy) for c in computes], tolerance, f"[{k}, {n}]: the {product} forms"
            )
        for form, (_, compute) in FORMS.items():
            function = tf.function(lambda c=compute, x=x, w=w, dy=dy: c(x, w, dy)[:1, :1])
            functions[(f"[{k}, {n}]", form)] = function
        stacked = _stacked_forms(
            [tensor(args.rows, k) for _ in range(args.layers)],
            [tensor(args.rows, n) for _ in range(args.layers)],
            tolerance,
        )
        for form, function in stacked.items():
            functions[(f"[{k}, {n}]", form)] = function
    # Each step waits for its (one-element) result.
    steps = {key: lambda f=function: f().numpy() for key, function in functions.items()}
    for step in steps.values():
        time_steps(step, 3, 0)
    seconds: dict[tuple[str, str], list[float]] = {key: [] for key in steps}
    for round_index in range(args.rounds):
        keys = list(steps) if round_index % 2 == 0 else list(reversed(steps))
        for key in keys:
            seconds[key].append(statistics.median(time_steps(steps[key], 0, args.calls)))
    rows = []
    for title, forms, reference in (
        ("time / forward's", FORMS, "X W (forward)"),
        (f"time / {args.layers} summed", STACKED_FORMS, STACKED_FORMS[0]),
    ):
        print(f"\n| weight | form | {title}, mean +- s.e. | median ms |\n|---|---|---|---|")
        rows += _table(seconds, forms, reference)
    if args.json:
        settings = dict(dtype=args.dtype, rows_of_x=args.rows, layers=args.layers)
        write_json(args.json, dict(cpu=cpu_description(), **settings, results=rows))
    return 0


STACKED_FORMS = (
    "L x (X^T dY), summed in float32",
    "stacked rows, one X^T dY",
    "one X^T dY, rows stacked before",
)


def _stacked_forms(xs: list[tf.Tensor], dys: list[tf.Tensor], tolerance: float) -> dict:
    """The shared weight's gradient over len(xs) layers, three ways, checked to agree."""
    x_stacked, dy_stacked = tf.concat(xs, 0), tf.concat(dys, 0)

    def summed():
        return tf.add_n(
            [
                tf.cast(tf.matmul(x, dy, transpose_a=True), tf.float32)
                for x, dy in zip(xs, dys, strict=True)
            ]
        )

    def stacked():
        return tf.cast(tf.matmul(tf.concat(xs, 0), tf.concat(dys, 0), transpose_a=True), tf.float32)

    def prestacked():
        return tf.cast(tf.matmul(x_stacked, dy_stacked, transpose_a=True), tf.float32)

    _check_agree(
        [f() for f in (summed, stacked, prestacked)],
        tolerance,
        "the stacked and summed weight gradients",
    )
    return {
        form: tf.function(lambda f=f: f()[:1, :1])
        for form, f in zip(STACKED_FORMS, (summed, stacked, prestacked), strict=True)
    }


def _check_agree(products: list[tf.Tensor], tolerance: float, what: str) -> None:
    """Stops the script unless every product is within `tolerance` of the first's largest
    magnitude from the first."""
    values = [p.numpy().astype(np.float32) for p in products]
    scale = float(np.abs(values[0]).max())
    if any(np.abs(v - values[0]).max() > tolerance * scale for v in values[1:]):
        raise SystemExit(f"{what} disagree")


def _table(seconds: dict, forms, reference: str) -> list[dict]:
    rows = []
    for (weight, form), times in seconds.items():
        if form not in forms:
            continue
        reference_times = seconds[(weight, reference)]
        ratios = [a / b for a, b in zip(times, reference_times, strict=True)]
        row = dict(
            weight=weight,
            form=form,
            seconds=times,
            ratio_mean=statistics.mean(ratios),
            ratio_se=statistics.stdev(ratios) / len(ratios) ** 0.5,
        )
        rows.append(row)
        print(
            f"| {weight} | {form} | {row['ratio_mean']:.3f} +- {row['ratio_se']:.3f} | "
            f"{statistics.median(times) * 1e3:.2f} |"
        )
    return rows


if __name__ == "__main__":
    sys.exit(main())
