"""The teacher's outputs on disk: computed once, in shards, resumable.

A cache directory holds `cache.json` (what the outputs are of: the teacher's kind and digest,
the texts' digest and count, the shard size and the output width) and `shard-NNNNN.npy`, float32
[shard_size, width] (the last one shorter), shard i holding texts [i * size, (i + 1) * size).
Each shard is written to a temporary name and renamed, so a run stopped at any moment leaves
only whole shards, and the next run computes only the missing ones.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from albert_tf.distill.data import texts_digest
from albert_tf.errors import OutputError
from albert_tf.progress import bar as progress_bar

CACHE_FILE = "cache.json"
SHARD_SIZE = 4096


def teacher_digest(path: str | os.PathLike) -> str:
    """SHA-256 over the teacher directory's weight and config files (names and bytes)."""
    digest = hashlib.sha256()
    path = Path(path)
    names = ("*.safetensors", "*.json", "*.index", "*.data-*", "vocab.txt", "spm.model")
    files = sorted({f for pattern in names for f in path.glob(pattern) if f.is_file()})
    for file in files:
        digest.update(file.name.encode() + b"\0")
        with open(file, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def _shard(directory: Path, index: int) -> Path:
    return directory / f"shard-{index:05d}.npy"


def fill_cache(
    directory: str | os.PathLike,
    identity: dict,
    texts: list[str],
    compute: Callable[[list[str]], np.ndarray],
    shard_size: int = SHARD_SIZE,
    log: Callable[[str], None] = print,
    progress: bool = True,
) -> np.ndarray:
    """The teacher outputs of `texts`, float32 [N, width]: shards already in `directory` are read,
    missing ones computed with `compute` (texts -> [n, width]) and written.

    `identity` (the teacher's kind and digest) with the texts' digest must equal what made the
    cache; OutputError (one line) when the directory holds another teacher's or corpus's outputs.
    """
    directory = Path(directory)
    record = {
        **identity,
        "texts": texts_digest(texts),
        "count": len(texts),
        "shard_size": shard_size,
    }
    record_file = directory / CACHE_FILE
    if record_file.is_file():
        found = json.loads(record_file.read_text(encoding="utf-8"))
        differs = [k for k in record if found.get(k) != record[k]]
        if differs:
            raise OutputError(
                f"teacher cache {directory} was made with another {', '.join(differs)}: "
                "remove it or name another directory"
            )
    else:
        directory.mkdir(parents=True, exist_ok=True)
        record_file.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    shards = range((len(texts) + shard_size - 1) // shard_size)
    missing = [i for i in shards if not _shard(directory, i).is_file()]
    if missing:
        log(f"teacher: {len(missing)} of {len(shards)} shards to compute into {directory}")
    started, done = time.monotonic(), 0
    bar = progress_bar(
        total=len(missing) * shard_size, unit="text", desc="teacher", enabled=progress
    )
    for i in missing:
        chunk = texts[i * shard_size : (i + 1) * shard_size]
        values = np.asarray(compute(chunk), np.float32)
        tmp = directory / f".shard-{i:05d}.{os.getpid()}.npy"
        np.save(tmp, values)
        os.replace(tmp, _shard(directory, i))
        done += len(chunk)
        bar.update(len(chunk))
    bar.close()
    if missing:
        rate = done / max(time.monotonic() - started, 1e-9)
        log(f"teacher: {done} texts at {rate:.0f} texts/s")
    return np.concatenate([np.load(_shard(directory, i)) for i in shards])
