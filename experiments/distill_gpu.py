"""`albert-tf distill`'s sentence-encoder recipe in transformers' ALBERT under torch, so the
student trains on a lent GPU machine (torch and transformers there, no TensorFlow; a call runs
at most 10 minutes and carries 64 MiB each way, the working tree included). Issue 60, item 1.

  pack  (here, TensorFlow)  a bundle folder: the student as `albert-tf distill` starts it with
        the same settings (its init's encoder and heads, the projection drawn from the same
        seed) in transformers' `AlbertForPreTraining` layout, float16 where that is lossless;
        the student's token ids of the texts; the teacher's outputs from distill's teacher
        cache (float16 by default, int8 per row or float32 on request); `bundle.json` (the
        settings, the warmup resolved as distill resolves it, the files' sizes).
  train (there, or here: torch alone)  runs the steps left, within a wall budget, and writes
        the checkpoint folder: `config.json` + `model.safetensors` (float32, an HF ALBERT
        directory `albert-tf convert --hf-checkpoint` reads exactly), `head.safetensors` (the
        projection), `adam_m.safetensors` / `adam_v.safetensors` (the optimizer's moments),
        `state.json` (the step, the logged losses, and one record per call: where it ran, on
        what, for how long). `--resume` continues from such a folder, on either machine.
  then  (here) `albert-tf convert --hf-checkpoint CHECKPOINT --sp-model SPM --output DIR`, and
        `record BUNDLE CHECKPOINT`: results/albert_en_mini_distill/distill_gpu.json, the run's
        record without its weights (settings, sizes, losses, where each call ran and how long).

What `train` computes is `albert_tf.distill.trainer`'s step, transcribed (tests/finetune/
test_distill_gpu.py holds the two to the same losses over their first steps):
- batches: epoch e visits the texts in `default_rng([seed, e]).permutation(N)` order; step s
  masks with `default_rng([seed, 1 << 20, s])` (`albert_tf.distill.masking`);
- loss: mean over the batch of sum((projection(pooled) - target)²), plus `mlm_weight` times the
  masked-LM cross-entropy at the masked positions;
- optimizer: tf-models-official's AdamWeightDecay as `albert_tf.optimizer` builds it: the
  gradients clipped to global norm 1.0 (`global_norm` below), decay `weight_decay * lr * w` on
  every weight but LayerNorm and biases, Adam with beta 0.9/0.999 and epsilon 1e-6 added to
  sqrt(v) before bias correction (TensorFlow's ResourceApplyAdam); learning rate: linear warmup
  from 0 to the decayed rate at `warmup_steps`, linear decay to 0 at `train_steps`.

Nothing here imports TensorFlow or albert_tf's model code at module level: `train` runs where
neither is installed (it imports `albert_tf.distill.masking`, NumPy alone).

Usage (see experiments/README.md, "albert_en_mini's distillation on a GPU"):
  python -m experiments.distill_gpu pack --teacher T --unlabeled train.txt --teacher-cache C \\
      --init albert_en_mini --bundle data/distill/gpu_bundle [--texts N] [--targets int8]
  python3 -m experiments.distill_gpu train data/distill/gpu_bundle --output $OUT/checkpoint \\
      [--resume CHECKPOINT] --budget 480
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from pathlib import Path

import numpy as np

from albert_tf.distill.masking import mask_tokens

BUNDLE_FILE, DATA_FILE, INIT_DIR = "bundle.json", "data.npz", "init"
HEAD_FILE, STATE_FILE = "head.safetensors", "state.json"
MOMENT_FILES = {"m": "adam_m.safetensors", "v": "adam_v.safetensors"}
HF_CONFIG, HF_WEIGHTS = "config.json", "model.safetensors"
RECORD = Path(__file__).resolve().parent / "results" / "albert_en_mini_distill" / "distill_gpu.json"
# albert_tf.optimizer's constants (AdamWeightDecay as tf-models-official builds it).
BETA_1, BETA_2, EPSILON, CLIP_NORM = 0.9, 0.999, 1e-6, 1.0
NO_DECAY = ("LayerNorm", "layer_norm", "bias")  # EXCLUDE_FROM_WEIGHT_DECAY, searched in names
# What `pack` copies from the distill settings into bundle.json (train reads nothing else).
SETTINGS = ("batch_size", "max_seq_length", "train_steps", "warmup_steps", "learning_rate",
            "weight_decay", "mlm_weight", "mlm_probability", "seed", "log_every")  # fmt: skip


# === pack (here: TensorFlow and the teacher cache) ===


def _lossless_float16(tensors: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """`tensors` as float16 when every value survives the trip (the shipped albert_en_mini is
    stored in float16), else unchanged (float32)."""
    halves = {k: v.astype(np.float16) for k, v in tensors.items()}
    same = all(np.array_equal(halves[k].astype(np.float32), v) for k, v in tensors.items())
    return halves if same else tensors


def _encode_targets(targets: np.ndarray, kind: str) -> dict[str, np.ndarray]:
    """The teacher's outputs [N, W] as the bundle stores them: float32, float16, or int8 per row
    (x = q * scale / 127, scale the row's max |x|)."""
    if kind == "int8":
        scale = np.maximum(np.abs(targets).max(1), 1e-12).astype(np.float32)
        return {"targets_q": np.round(targets / scale[:, None] * 127).astype(np.int8),
                "targets_scale": scale}  # fmt: skip
    return {"targets": targets.astype(np.float16 if kind == "float16" else np.float32)}


def pack(args: argparse.Namespace) -> dict:
    """Writes the bundle `args.bundle` (see the module docstring); returns bundle.json."""
    import tf_keras as keras
    from safetensors.numpy import save_file

    from albert_tf.convert.hf import hf_config
    from albert_tf.distill.cache import fill_cache
    from albert_tf.distill.data import read_unlabeled, token_ids
    from albert_tf.distill.settings import DistillSettings
    from albert_tf.distill.student import build_student
    from albert_tf.distill.teachers import SENTENCE, load_teacher
    from albert_tf.dtypes import keras_policy
    from albert_tf.export.hf import hf_tensors, special_token_ids
    from albert_tf.io_utils import atomic_dir
    from albert_tf.pretrained import resolve
    from albert_tf.weights import variables_by_name

    settings = DistillSettings(
        teacher=args.teacher, unlabeled=tuple(args.unlabeled), output_dir=str(args.bundle),
        init=args.init, teacher_cache=str(args.teacher_cache), mlm_weight=args.mlm_weight,
        **{k: getattr(args, k) for k in SETTINGS if k not in ("mlm_weight", "train_steps",
                                                              "warmup_steps")},
    )  # fmt: skip
    corpus = read_unlabeled(list(settings.unlabeled))
    texts = corpus if args.texts is None else corpus[: args.texts]  # a shuffled corpus: a sample
    teacher = load_teacher(settings.teacher)
    if teacher.kind != SENTENCE:
        sys.exit("error: distill_gpu trains from a sentence-encoder teacher")
    started = time.monotonic()
    # A shipped init is written to albert-tf's cache on first use, drawing random numbers (a
    # model is built before its weights are read): resolved before the seed, the projection is
    # the one distill() draws once that cache is filled.
    resolve(settings.init)
    keras.utils.set_random_seed(settings.seed)  # as distill() seeds the projection
    with keras_policy("float32"):
        model = build_student(settings, teacher)
    if model.mlm_head is None or model.sop_head is None:
        sys.exit(f"error: --init {args.init} lacks the masked-LM or sentence-order head")
    targets = fill_cache(args.teacher_cache, teacher.identity(), texts,
                         lambda chunk: teacher.embed(chunk, settings.teacher_batch_size))  # fmt: skip
    rows = token_ids(model.tokenizer, texts, settings.max_seq_length)
    total = args.train_steps or math.ceil(len(texts) / settings.batch_size)
    warmup = int(0.06 * total) if args.warmup_steps is None else args.warmup_steps
    values = {k: getattr(settings, k) for k in SETTINGS if hasattr(settings, k)}
    values |= {"train_steps": total, "warmup_steps": min(warmup, max(total - 1, 0))}
    with atomic_dir(Path(args.bundle), overwrite=args.overwrite) as tmp:
        (tmp / INIT_DIR).mkdir()
        config = hf_config(model.config, "AlbertForPreTraining", special_token_ids(model.tokenizer))
        (tmp / INIT_DIR / HF_CONFIG).write_text(json.dumps(config, indent=2) + "\n")
        variables = variables_by_name(_as_checkpoint(model))
        save_file(_lossless_float16(hf_tensors(variables)), str(tmp / INIT_DIR / HF_WEIGHTS),
                  metadata={"format": "pt"})  # fmt: skip
        kernel, bias = (np.asarray(w.numpy(), np.float32) for w in model.head.weights)
        save_file({"weight": np.ascontiguousarray(kernel.T), "bias": bias},
                  str(tmp / INIT_DIR / HEAD_FILE))  # fmt: skip
        np.savez_compressed(
            tmp / DATA_FILE,
            ids=np.concatenate(rows).astype(np.uint16),
            lengths=np.array([len(r) for r in rows], np.uint16),
            **_encode_targets(targets, args.targets),
        )
        record = {
            "settings": values,
            "mask_id": model.tokenizer.mask_id,
            "vocab_size": model.tokenizer.vocab_size,
            "texts": len(texts),
            "corpus_texts": len(corpus),
            "targets": args.targets,
            "teacher": teacher.identity(),
            "init": settings.init,
            "packed": {
                "host": platform.node(),
                "hardware": cpu_name(),
                "seconds": round(time.monotonic() - started, 1),
            },
        }
        sizes = {str(p.relative_to(tmp)): p.stat().st_size for p in tmp.rglob("*") if p.is_file()}
        record["bytes"] = sizes | {"total": sum(sizes.values())}
        (tmp / BUNDLE_FILE).write_text(json.dumps(record, indent=2) + "\n")
    return record


def _as_checkpoint(student):
    """The student's encoder and pretraining heads shaped as a CheckpointDir for
    `variables_by_name` (the projection is written apart)."""
    from albert_tf.checkpoint import CheckpointDir

    return CheckpointDir(student.config, student.encoder, student.mlm_head, student.sop_head,
                         student.sp_model_path)  # fmt: skip


# === train (there or here: torch, transformers, NumPy) ===


def learning_rate(step: int, settings: dict) -> float:
    """albert_tf.optimizer's schedule at optimizer step `step` (0 for the first update)."""
    total, warmup, peak = (
        settings["train_steps"],
        settings["warmup_steps"],
        settings["learning_rate"],
    )

    def decayed(s: int) -> float:
        return peak * (1 - min(s, total) / total)

    return step / warmup * decayed(warmup) if step < warmup else decayed(step)


def decays(name: str) -> bool:
    """Whether weight decay applies to the parameter `name` (AdamWeightDecay's regex search of
    EXCLUDE_FROM_WEIGHT_DECAY in the variable's name; HF and albert-tf names agree on it)."""
    return not any(part in name for part in NO_DECAY)


def load_data(bundle: Path) -> tuple[list[np.ndarray], np.ndarray]:
    """The bundle's token-id rows (int64) and the teacher's outputs (float32 [N, W])."""
    with np.load(bundle / DATA_FILE) as data:
        ends = np.cumsum(data["lengths"].astype(np.int64))
        rows = np.split(data["ids"].astype(np.int64), ends[:-1])
        if "targets_q" in data.files:
            targets = data["targets_q"].astype(np.float32) * data["targets_scale"][:, None] / 127
        else:
            targets = data["targets"].astype(np.float32)
    return rows, targets


def batch(step: int, rows: list[np.ndarray], targets: np.ndarray, record: dict) -> dict:
    """Training step `step`'s inputs, as `albert_tf.distill.trainer._batch` draws them."""
    settings = record["settings"]
    size, seed = settings["batch_size"], settings["seed"]
    epoch, index = divmod(step, math.ceil(len(rows) / size))
    order = np.random.default_rng([seed, epoch]).permutation(len(rows))
    chosen = order[index * size : (index + 1) * size]
    width = max(len(rows[i]) for i in chosen)
    ids = np.zeros([len(chosen), width], np.int64)
    mask = np.zeros([len(chosen), width], np.int64)
    for i, row in enumerate(rows[j] for j in chosen):
        ids[i, : len(row)], mask[i, : len(row)] = row, 1
    positions = labels = np.zeros([len(ids), 1], np.int64)
    weights = np.zeros([len(ids), 1], np.float32)
    if settings["mlm_weight"] > 0:
        rng = np.random.default_rng([seed, 1 << 20, step])
        ids, positions, labels, weights = mask_tokens(
            ids, mask.sum(1), rng, mask_id=record["mask_id"], vocab_size=record["vocab_size"],
            probability=settings["mlm_probability"],
        )  # fmt: skip
    ids, positions, labels = (x.astype(np.int64) for x in (ids, positions, labels))
    return {"ids": ids, "mask": mask, "positions": positions, "labels": labels,
            "weights": weights, "targets": targets[chosen]}  # fmt: skip


class Trainer:
    """The student (transformers' AlbertForPreTraining and a projection), its optimizer state
    and step, on `device`."""

    def __init__(self, bundle: Path, device: str, resume: Path | None = None):
        import torch
        from safetensors.torch import load_file
        from transformers import AlbertConfig, AlbertForPreTraining

        self.torch, self.device = torch, torch.device(device)
        self.record = json.loads((bundle / BUNDLE_FILE).read_text())
        self.settings = self.record["settings"]
        source = resume or bundle / INIT_DIR
        self.config_text = (source / HF_CONFIG).read_text()
        config = AlbertConfig.from_dict(json.loads(self.config_text))
        self.model = AlbertForPreTraining(config)
        weights = {k: v.float() for k, v in load_file(str(source / HF_WEIGHTS)).items()}
        missing, unexpected = self.model.load_state_dict(weights, strict=False)
        tied = {"predictions.decoder.weight", "predictions.decoder.bias"}
        if set(missing) - tied or unexpected:
            raise ValueError(f"{source}: missing {missing}, unexpected {unexpected}")
        decoder = self.model.predictions.decoder  # tied, as transformers loads it
        assert decoder.weight is self.model.albert.embeddings.word_embeddings.weight
        head = load_file(str(source / HEAD_FILE))
        self.projection = torch.nn.Linear(config.hidden_size, head["weight"].shape[0])
        self.projection.load_state_dict({k: v.float() for k, v in head.items()})
        self.model.to(self.device).train()
        self.projection.to(self.device).train()
        self.params = {f"albert.{k}": p for k, p in self.model.albert.named_parameters()}
        self.params |= {f"projection.{k}": p for k, p in self.projection.named_parameters()}
        if self.settings["mlm_weight"] > 0:
            for key, p in self.model.predictions.named_parameters():
                if not key.startswith("decoder."):  # tied to the word embeddings and the bias
                    self.params[f"predictions.{key}"] = p
        self.step, self.history, self.calls = 0, [], []
        self.moments = {k: {n: torch.zeros_like(p) for n, p in self.params.items()}
                        for k in MOMENT_FILES}  # fmt: skip
        if resume is not None:
            state = json.loads((resume / STATE_FILE).read_text())
            self.step, self.history, self.calls = state["step"], state["history"], state["calls"]
            for key, name in MOMENT_FILES.items():
                self.moments[key] = {n: v.to(self.device) for n, v in
                                     load_file(str(resume / name)).items()}  # fmt: skip
        # TensorFlow's gradient of a gather is one row per token (IndexedSlices), and
        # clip_by_global_norm sums the squares of those rows, not of the table's summed rows:
        # the norm needs the gradient at each token of the embeddings' sum.
        self._embedded = None
        self.model.albert.embeddings.LayerNorm.register_forward_pre_hook(self._keep_embedded)

    def _keep_embedded(self, module, inputs):
        if inputs[0].requires_grad:
            inputs[0].retain_grad()
            self._embedded = inputs[0]

    def losses(self, inputs: dict) -> dict:
        """The step's losses (tensors): `loss`, `distill_loss`, `cosine` and with masked-LM
        `mlm_loss`, `mlm_accuracy`; as trainer._Loop._losses computes them."""
        torch, settings = self.torch, self.settings
        t = {k: torch.as_tensor(v, device=self.device) for k, v in inputs.items()}
        out = self.model.albert(input_ids=t["ids"], attention_mask=t["mask"],
                                token_type_ids=torch.zeros_like(t["ids"]))  # fmt: skip
        projected = self.projection(out.pooler_output).float()
        target = t["targets"]
        main = ((projected - target) ** 2).sum(-1).mean()
        unit = torch.nn.functional.normalize
        cosine = (unit(projected, dim=-1, eps=1e-6) * unit(target, dim=-1, eps=1e-6)).sum(-1)
        result = {"distill_loss": main, "cosine": cosine.mean(), "loss": main}
        if settings["mlm_weight"] > 0:
            sequence = out.last_hidden_state  # [B, S, H]
            index = t["positions"][..., None].expand(-1, -1, sequence.shape[-1])  # [B, P, H]
            logits = self.model.predictions(torch.gather(sequence, 1, index)).float()  # [B, P, V]
            entropy = torch.nn.functional.cross_entropy(
                logits.transpose(1, 2), t["labels"], reduction="none"
            )  # [B, P]
            weights = t["weights"]
            total = weights.sum().clamp(min=1.0)
            right = (logits.argmax(-1) == t["labels"]).float()
            mlm = (entropy * weights).sum() / total
            result |= {"mlm_loss": mlm, "mlm_accuracy": (right * weights).sum() / total}
            result["loss"] = main + settings["mlm_weight"] * mlm
        return result

    def global_norm(self) -> object:
        """The gradients' global norm as albert_tf's optimizer computes it: the word (without
        masked-LM, which reads the table whole) and token-type tables count one row per token."""
        squares = sum((p.grad.double() ** 2).sum() for p in self.params.values())
        per_token = (self._embedded.grad.double() ** 2).sum()
        gathered = ["albert.embeddings.token_type_embeddings.weight"]
        if self.settings["mlm_weight"] == 0:
            gathered.append("albert.embeddings.word_embeddings.weight")
        for name in gathered:
            squares = squares - (self.params[name].grad.double() ** 2).sum() + per_token
        return squares.sqrt()

    def train_step(self, inputs: dict) -> dict[str, float]:
        """One optimizer step on `inputs` (see `batch`); returns the losses before it."""
        torch, settings = self.torch, self.settings
        torch.manual_seed(settings["seed"] * 1_000_003 + self.step)  # dropout, if any
        for p in self.params.values():
            p.grad = None
        out = self.losses(inputs)
        out["loss"].backward()
        norm = self.global_norm()
        scale = float(CLIP_NORM / max(float(norm), CLIP_NORM))
        lr = learning_rate(self.step, settings)
        t = self.step + 1
        alpha = lr * math.sqrt(1 - BETA_2**t) / (1 - BETA_1**t)
        with torch.no_grad():
            for name, p in self.params.items():
                g = p.grad * scale
                m, v = self.moments["m"][name], self.moments["v"][name]
                if decays(name):
                    p.sub_(lr * settings["weight_decay"] * p)
                m.mul_(BETA_1).add_(g, alpha=1 - BETA_1)
                v.mul_(BETA_2).addcmul_(g, g, value=1 - BETA_2)
                p.sub_(alpha * m / (v.sqrt() + EPSILON))
        self.step += 1
        return {k: float(v.detach()) for k, v in out.items()} | {"grad_norm": float(norm), "lr": lr}

    def run(self, rows, targets, budget: float, steps: int | None = None, log=print) -> None:
        """Steps until `train_steps`, `steps` more, or the next step would pass `budget`
        seconds; one call record (where, on what, how long, which steps) is appended."""
        settings, started, first = self.settings, time.monotonic(), self.step
        last = (
            settings["train_steps"]
            if steps is None
            else min(first + steps, settings["train_steps"])
        )
        sums: dict[str, float] = {}
        count = 0
        while self.step < last:
            elapsed = time.monotonic() - started
            if self.step > first and elapsed / (self.step - first) + elapsed > budget:
                break
            out = self.train_step(batch(self.step, rows, targets, self.record))
            for key, value in out.items():
                sums[key] = sums.get(key, 0.0) + value
            count += 1
            if self.step % settings["log_every"] == 0 or self.step == settings["train_steps"]:
                means = {k: v / count for k, v in sums.items()}
                seconds = round(time.monotonic() - started, 2)  # since this call began
                self.history.append({"step": self.step, **means, "seconds": seconds})
                log(json.dumps(self.history[-1]))
                sums, count = {}, 0
        self.calls.append({**machine(self.torch, self.device), "from_step": first,
                           "to_step": self.step, "seconds": round(time.monotonic() - started, 1),
                           "budget_seconds": budget})  # fmt: skip

    def save(self, target: Path) -> None:
        """The checkpoint folder `target` (replaced files; see the module docstring)."""
        from safetensors.torch import save_file

        target.mkdir(parents=True, exist_ok=True)
        (target / HF_CONFIG).write_text(self.config_text)
        state = {k: v.detach().float().cpu().contiguous()
                 for k, v in self.model.state_dict().items()
                 if not k.startswith("predictions.decoder.")}  # fmt: skip
        save_file(state, str(target / HF_WEIGHTS), metadata={"format": "pt"})
        head = {k: v.detach().cpu().contiguous() for k, v in self.projection.state_dict().items()}
        save_file(head, str(target / HEAD_FILE))
        for key, name in MOMENT_FILES.items():
            moments = {n: v.cpu().contiguous() for n, v in self.moments[key].items()}
            save_file(moments, str(target / name))
        values = {"step": self.step, "settings": self.settings, "bundle": {
            k: self.record[k] for k in ("texts", "corpus_texts", "targets", "teacher", "init")},
            "history": self.history, "calls": self.calls}  # fmt: skip
        (target / STATE_FILE).write_text(json.dumps(values, indent=1) + "\n")


def cpu_name() -> str:
    """The processor's model name (Linux's /proc/cpuinfo), else what `platform` knows."""
    cpuinfo = Path("/proc/cpuinfo")
    lines = cpuinfo.read_text().splitlines() if cpuinfo.is_file() else []
    names = [line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")]
    return names[0] if names else platform.processor() or platform.machine()


def machine(torch, device) -> dict:
    """Where a call ran: the device and its name, torch's version, the host."""
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else cpu_name()
    return {"device": device.type, "hardware": name, "torch": torch.__version__,
            "host": platform.node()}  # fmt: skip


def train(args: argparse.Namespace) -> dict:
    """Runs `args.bundle`'s steps left (from `args.resume` if given) for at most `args.budget`
    seconds and writes the checkpoint `args.output`; returns its state.json."""
    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False  # float32 as the CPU computes it
        torch.backends.cudnn.allow_tf32 = False
    trainer = Trainer(Path(args.bundle), device, Path(args.resume) if args.resume else None)
    rows, targets = load_data(Path(args.bundle))
    trainer.run(rows, targets, args.budget, args.max_steps)
    trainer.save(Path(args.output))
    return json.loads((Path(args.output) / STATE_FILE).read_text())


def record(bundle: Path, checkpoint: Path, target: Path) -> dict:
    """The run's record (no weights) at `target`: the bundle's settings, sizes and where it was
    packed, and the checkpoint's step, logged losses and calls (where each ran, how long)."""
    packed = json.loads((bundle / BUNDLE_FILE).read_text())
    state = json.loads((checkpoint / STATE_FILE).read_text())
    sizes = {p.name: p.stat().st_size for p in sorted(checkpoint.iterdir()) if p.is_file()}
    values = {"bundle": packed, "step": state["step"], "calls": state["calls"],
              "checkpoint_bytes": sizes | {"total": sum(sizes.values())},
              "history": state["history"]}  # fmt: skip
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(values, indent=1) + "\n")
    return values


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    p = commands.add_parser("pack", help="write the bundle (here: TensorFlow)")
    p.add_argument("--teacher", required=True, help="the sentence-encoder teacher directory")
    p.add_argument("--unlabeled", nargs="+", required=True)
    p.add_argument(
        "--teacher-cache",
        type=Path,
        required=True,
        help="distill's cache of the teacher's outputs on the texts packed (filled "
        "where missing; one folder per --texts)",
    )
    p.add_argument("--init", default="albert_en_mini")
    p.add_argument("--bundle", type=Path, required=True)
    p.add_argument("--texts", type=int, help="the first N texts only (what a call can carry)")
    p.add_argument("--targets", choices=("float16", "int8", "float32"), default="float16")
    p.add_argument("--batch-size", type=int, default=512)
    p.add_argument("--max-seq-length", type=int, default=64)
    p.add_argument("--train-steps", type=int, help="default: one epoch")
    p.add_argument("--warmup-steps", type=int, help="default: 6%% of the steps")
    p.add_argument("--learning-rate", type=float, default=5e-4)
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--mlm-weight", type=float, default=0.0)
    p.add_argument("--mlm-probability", type=float, default=0.15)
    p.add_argument("--seed", type=int, default=60)
    p.add_argument("--log-every", type=int, default=50)
    p.add_argument("--overwrite", action="store_true")
    t = commands.add_parser("train", help="run the steps left (torch; no TensorFlow needed)")
    t.add_argument("bundle", type=Path)
    t.add_argument("--output", type=Path, required=True, help="the checkpoint folder to write")
    t.add_argument("--resume", type=Path, help="a checkpoint folder train wrote")
    t.add_argument("--budget", type=float, default=480.0, help="seconds of training at most")
    t.add_argument("--max-steps", type=int, help="steps in this call at most")
    t.add_argument("--device", help="default: cuda when there is one, else cpu")
    r = commands.add_parser("record", help="write the run's record (no weights)")
    r.add_argument("bundle", type=Path)
    r.add_argument("checkpoint", type=Path)
    r.add_argument("--output", type=Path, default=RECORD, help="default: %(default)s")
    args = parser.parse_args(argv)
    if args.command == "pack":
        print(json.dumps(pack(args), indent=1))
    elif args.command == "record":
        values = record(args.bundle, args.checkpoint, args.output)
        print(json.dumps(values["calls"], indent=1))
    else:
        state = train(args)
        print(json.dumps({"step": state["step"], "calls": state["calls"][-1:]}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
