"""Export our train step, compiled by XLA, for a GPU machine without TensorFlow.

The step is `albert-tf benchmark`'s train case (ALBERT-base, batch 16 x 128, 20 masked positions,
MLM + SOP loss, Adam), built by the same code (`benchmarking.tf_systems.train_function` over
`ours_train_forward`) with `jit_compile=True`. For each variant TensorFlow lowers the step to an
XLA HloModuleProto (before XLA's optimizations, so no device is baked in); the variables, the
optimizer's slots and the batch are its parameters, and the updated variables are outputs aliased
to them (the module's input_output_alias). `benchmarks/gpu/run_gpu_train.py` compiles the modules
with JAX's XLA on the GPU and feeds the outputs back as the next step's inputs.

Variants: `float32` (TensorFloat-32 off in TensorFlow, so every dot asks for HIGHEST precision),
`tf32` (TensorFlow's default, TF32 on: DEFAULT precision) and `bfloat16` (the `mixed_bfloat16`
policy).

Written to `--out` (default benchmarks/gpu/artifacts, git-ignored; ~25 MB for ALBERT-base):
  manifest.json     config (albert_tf's and the HF arguments), shape, model FLOPs, and per
                    variant: the module file, each parameter's source and shape, the aliases,
                    and TensorFlow's own XLA losses of the first two steps on this CPU
  train_<variant>.hlo.pb
  weights.npz       initial weights, rounded to bfloat16 and stored as their uint16 bits (the
                    float32 reference steps start from the same rounded values)
  batch.npz         `cases.make_batch`'s arrays

    python benchmarks/gpu/export_train_hlo.py [--tiny] [--out DIR] [--seed 0]
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import sys
from pathlib import Path

import numpy as np

VARIANTS = {
    "float32": {"policy": "float32", "tf32": False},
    "tf32": {"policy": "float32", "tf32": True},
    "bfloat16": {"policy": "mixed_bfloat16", "tf32": True},
}
HLO_DTYPES = {"f32": "float32", "s32": "int32", "s64": "int64"}


def bfloat16_bits(array: np.ndarray) -> np.ndarray:
    """float32 -> the uint16 bits of its bfloat16 rounding (to nearest, ties to even)."""
    bits = np.ascontiguousarray(array, np.float32).view(np.uint32)
    rounded = bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))
    return (rounded >> np.uint32(16)).astype(np.uint16)


def from_bfloat16_bits(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)


def entry_signature(hlo_text: str) -> tuple[list[tuple[str, list[int]]], dict[int, int]]:
    """The entry computation's parameters as (dtype, shape) and its aliases {output: parameter},
    read from the module's text."""
    entry = re.search(r"^ENTRY [^(]*\((.*?)\) ->", hlo_text, re.MULTILINE)
    params = [
        (HLO_DTYPES[t], [int(d) for d in dims.split(",") if d])
        for t, dims in re.findall(r"arg\d+\.\d+: ([a-z0-9]+)\[([0-9,]*)\]", entry.group(1))
    ]
    header = hlo_text.split("\n", 1)[0]
    aliases = {
        int(out): int(param)
        for out, param in re.findall(r"\{(\d+)\}: \((\d+), \{\}, may-alias\)", header)
    }
    return params, aliases


def export_variant(
    name: str, config, batch: dict[str, np.ndarray], weights: dict[str, np.ndarray], out
) -> dict:
    """Writes `train_<name>.hlo.pb` and returns the variant's manifest entry."""
    import tensorflow as tf
    import tf_keras as keras

    from albert_tf.benchmarking.tf_systems import TRAIN_KEYS, ours_train_forward, train_function

    variant = VARIANTS[name]
    keras.mixed_precision.set_global_policy(variant["policy"])
    tf.config.experimental.enable_tensor_float_32_execution(variant["tf32"])
    tensors = {k: tf.constant(batch[k]) for k in TRAIN_KEYS}
    forward, variables = ours_train_forward(config)
    forward(tensors)  # creates the variables
    for v in variables:
        v.assign(from_bfloat16_bits(weights[v.name]))
    train = train_function(forward, variables, jit_compile=True)
    concrete = train.get_concrete_function(tensors)
    hlo_text = train.experimental_get_compiler_ir(tensors)(stage="hlo")
    module = train.experimental_get_compiler_ir(tensors)(stage="hlo_serialized")
    hlo_params, aliases = entry_signature(hlo_text)

    by_handle = {id(v.handle): v for v in concrete.variables}
    trainable = {v.name for v in variables}
    params = [{"source": "batch", "key": k} for k in sorted(tensors)]  # tf.nest order
    for handle in concrete.captured_inputs:
        v = by_handle[id(handle)]
        if v.name in trainable:
            params.append({"source": "weight", "name": v.name})
        else:  # optimizer state: the step counter, Adam's slots, the learning rate
            value = v.numpy()
            if value.size != 1 and np.any(value):
                raise ValueError(f"{v.name}: non-scalar optimizer state that is not zero")
            params.append({"source": "fill", "value": value.reshape(-1)[0].item()})
    if len(params) != len(hlo_params):
        raise ValueError(f"{len(hlo_params)} HLO parameters for {len(params)} inputs")
    for param, (dtype, dims) in zip(params, hlo_params, strict=True):
        param.update(dtype=dtype, shape=dims)
    if sorted(aliases) != list(range(1, len(aliases) + 1)):
        raise ValueError("the module's outputs after the loss are not all aliased variables")

    # TensorFlow's own XLA step on this CPU: the losses the GPU run must reproduce.
    losses = [float(train(tensors).numpy()) for _ in range(2)]
    (out / f"train_{name}.hlo.pb").write_bytes(module)
    return {
        "hlo": f"train_{name}.hlo.pb",
        "dtype_policy": variant["policy"],
        "tensorflow_tf32": variant["tf32"],
        "params": params,
        "aliases": {str(k): v for k, v in aliases.items()},
        "reference_losses": losses,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(Path(__file__).parent / "artifacts"))
    parser.add_argument("--tiny", action="store_true", help="the benchmark's tiny config")
    parser.add_argument("--seed", type=int, default=0, help="initial weights' seed")
    args = parser.parse_args(argv)

    import tensorflow as tf
    import tf_keras as keras

    from albert_tf.benchmarking.cases import (
        benchmark_config,
        case_shape,
        make_batch,
        matmul_dims,
        step_flops,
    )
    from albert_tf.benchmarking.tf_systems import TRAIN_KEYS, ours_train_forward
    from albert_tf.benchmarking.torch_systems import hf_config_kwargs
    from albert_tf.io_utils import atomic_dir

    config = benchmark_config(args.tiny)
    shape = case_shape("train", args.tiny)
    batch = make_batch(config, shape)
    keras.utils.set_random_seed(args.seed)
    keras.mixed_precision.set_global_policy("float32")
    forward, variables = ours_train_forward(config)
    forward({k: tf.constant(batch[k]) for k in TRAIN_KEYS})
    weights = {v.name: bfloat16_bits(v.numpy()) for v in variables}

    with atomic_dir(args.out, overwrite=True) as out:
        np.savez(out / "weights.npz", **weights)
        np.savez(out / "batch.npz", **batch)
        variants = {}
        for name in VARIANTS:
            variants[name] = export_variant(name, config, batch, weights, out)
            print(f"{name}: reference losses {variants[name]['reference_losses']}", flush=True)
        m, k, n = matmul_dims(config, case_shape("matmul", args.tiny))
        manifest = {
            "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "tensorflow": tf.__version__,
            "tiny": args.tiny,
            "seed": args.seed,
            "config": config.to_dict(),
            "hf_config": hf_config_kwargs(config),
            "shape": {"batch": shape.batch, "seq": shape.seq, "predictions": shape.predictions},
            "train_step_flops": step_flops(config, "train", shape),
            "matmul": {"m": m, "k": k, "n": n},
            "reference_device": "CPU (TensorFlow's XLA, tf.function(jit_compile=True))",
            "variants": variants,
        }
        (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
