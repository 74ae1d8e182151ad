"""`create_pretraining_data`: corpus -> sharded TFRecords of n-gram MLM + SOP (or NSP) instances.

Streaming with bounded memory: the main process reads documents one at a time and sends batches
of about `BATCH_BYTES` of text, and at least two documents, to worker processes; at most
`2 * num_workers` batches are in flight, and results come back in corpus order. A batch's
composition depends only on the corpus, so the output is the same for any number of workers
(NSP takes its random next text from another document of the same batch, see `_batches`).
Memory is bounded by those batches, the shuffle buffer and the two largest documents (a
document is held whole: a file without blank lines is one document).

Shuffling. The original holds every instance in memory and shuffles them all; that does not
scale. Here each instance is assigned to a shard by a draw from its document's generator, and
each shard is written through a bounded shuffle buffer (`shuffle_buffer` records shared among the
shards; a full buffer writes a uniformly chosen record, the rest are written in random order at
the end). Neighbouring documents still tend to land near each other within a shard, so the
training input pipeline should interleave the shards and shuffle again.
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import json
import multiprocessing
import os
import random
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

from albert_tf.environment import import_beam_module
from albert_tf.errors import DataError
from albert_tf.io_utils import atomic_dir, check_output_path, is_remote
from albert_tf.preprocess.pretraining_data.documents import (
    input_size,
    iter_documents,
    resolve_inputs,
)
from albert_tf.preprocess.pretraining_data.format import (
    FORMAT,
    METADATA_FILE,
    SENTENCE_TASKS,
    feature_lengths,
    shard_name,
)
from albert_tf.preprocess.pretraining_data.generate import (
    Counters,
    DocumentProcessor,
    Settings,
    init_worker,
    process_in_worker,
)
from albert_tf.preprocess.pretraining_data.plan import closes, document_size
from albert_tf.preprocess.tokenizer import AlbertTokenizer
from albert_tf.progress import bar as progress_bar

RUNNERS = ("local", "beam")
BATCH_BYTES = 1 << 20  # text per worker task; CRCs are vectorized over a task's records


def _batches(documents: Iterable[tuple[list[str], int]]) -> Iterator[tuple[list, int]]:
    """Groups `(lines, bytes)` documents into `([(index, lines), ...], bytes)` batches; indices
    count non-empty documents from 0 in corpus order.

    A batch closes once it holds `BATCH_BYTES` of text and at least two documents, and a last
    batch of a single document joins the batch before it, so every batch but that of a
    one-document corpus offers NSP another document to draw random next text from. (A batch
    is held back until the next one closes, to know whether it is the last.)
    """
    batch: list[tuple[int, list[str]]] = []
    size = num_bytes = 0
    index = 0
    held: tuple[list, int] | None = None
    for lines, consumed in documents:
        num_bytes += consumed
        if lines:
            batch.append((index, lines))
            index += 1
            size += document_size(lines)
        if closes(size, len(batch), BATCH_BYTES):
            if held is not None:
                yield held
            held = (batch, num_bytes)
            batch, size, num_bytes = [], 0, 0
    if held is not None and len(batch) < 2:
        held = (held[0] + batch, held[1] + num_bytes)
        batch, num_bytes = [], 0
    if held is not None:
        yield held
    if batch or num_bytes:
        yield batch, num_bytes


def _ordered_map(
    items: Iterable[tuple[list, Any]], num_workers: int, settings: Settings
) -> Iterator[tuple[Any, tuple[list[tuple[int, bytes]], Counters]]]:
    """Yields `(tag, DocumentProcessor.process(batch))` in input order for `(batch, tag)` pairs,
    with at most `2 * num_workers` batches in flight (a huge corpus is never read ahead)."""
    if num_workers <= 1:
        processor = DocumentProcessor(settings)
        for item, tag in items:
            yield tag, processor.process(item)
        return
    # "spawn": the parent may have TensorFlow loaded, which must not be forked.
    context = multiprocessing.get_context("spawn")
    with context.Pool(num_workers, initializer=init_worker, initargs=(settings,)) as pool:
        pending: collections.deque = collections.deque()
        for item, tag in items:
            pending.append((tag, pool.apply_async(process_in_worker, (item,))))
            if len(pending) >= 2 * num_workers:
                tag, result = pending.popleft()
                yield tag, result.get()
        while pending:
            tag, result = pending.popleft()
            yield tag, result.get()


class _ShuffledShard:
    """Writes framed records to one TFRecord file through a seeded shuffle buffer."""

    def __init__(self, writer: Any, capacity: int, seed: str):
        self.writer = writer
        self.capacity = max(1, capacity)
        self.rng = random.Random(seed)
        self.buffer: list[bytes] = []
        self.count = 0

    def add(self, record: bytes) -> None:
        self.count += 1
        if len(self.buffer) < self.capacity:
            self.buffer.append(record)
            return
        j = self.rng.randrange(self.capacity)
        self.writer.write(self.buffer[j])
        self.buffer[j] = record

    def flush(self) -> None:
        """Writes what the buffer still holds, in random order."""
        self.rng.shuffle(self.buffer)
        for record in self.buffer:
            self.writer.write(record)
        self.buffer = []


def _fill(
    shards: list[_ShuffledShard],
    files: list[Path],
    total_bytes: int,
    num_workers: int,
    settings: Settings,
    totals: Counters,
    progress: bool,
) -> None:
    """Generates every instance of `files` into `shards`, adding statistics to `totals`."""
    bar = progress_bar(
        total=total_bytes,
        unit="B",
        unit_scale=True,
        unit_divisor=1024,
        desc="create-pretraining-data",
        enabled=progress,
        smoothing=0.1,
    )
    with bar:
        batches = _batches(iter_documents(files))
        for num_bytes, (records, counters) in _ordered_map(batches, num_workers, settings):
            for shard, record in records:
                shards[shard].add(record)
            totals.add(counters)
            bar.update(num_bytes)
            bar.set_postfix(instances=totals.num_instances, refresh=False)
    for shard in shards:
        shard.flush()


def _sha256(path: str | os.PathLike) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _recorded_path(sp_model_path: str | os.PathLike) -> str:
    """The SentencePiece model's path as metadata.json records it: absolute, or as given when
    remote (gs://...)."""
    model = os.fspath(sp_model_path)
    return model if is_remote(model) else str(Path(model).resolve())


def _validate(
    settings: Settings, num_workers: int, shuffle_buffer: int, runner: str, pipeline_args: Any
) -> None:
    """DataError naming the flag of the first setting out of range."""
    checks = [
        (settings.max_seq_length >= 5, "--max-seq-length must be at least 5"),
        (settings.max_predictions_per_seq >= 1, "--max-predictions-per-seq must be at least 1"),
        (0.0 <= settings.masked_lm_prob <= 1.0, "--masked-lm-prob must be in [0, 1]"),
        (settings.dupe_factor >= 1, "--dupe-factor must be at least 1"),
        (0.0 <= settings.short_seq_prob <= 1.0, "--short-seq-prob must be in [0, 1]"),
        (settings.ngram >= 1, "--ngram must be at least 1"),
        (settings.num_shards >= 1, "--num-shards must be at least 1"),
        (num_workers >= 1, "--workers must be at least 1"),
        (shuffle_buffer >= 1, "--shuffle-buffer must be at least 1"),
        (settings.seed >= 0, "--seed must be non-negative"),
        (
            settings.sentence_task in SENTENCE_TASKS,
            f"--sentence-task must be one of {', '.join(SENTENCE_TASKS)}",
        ),
        (runner in RUNNERS, f"--runner must be one of {', '.join(RUNNERS)}"),
        (
            not pipeline_args or runner == "beam",
            "Beam pipeline options (after --) need --runner beam",
        ),
    ]
    for ok, message in checks:
        if not ok:
            raise DataError(message)


def create_pretraining_data(
    input_patterns: list[str] | str,
    sp_model_path: str | os.PathLike,
    output_dir: str | os.PathLike,
    max_seq_length: int = 512,
    max_predictions_per_seq: int = 20,
    masked_lm_prob: float = 0.15,
    dupe_factor: int = 10,
    short_seq_prob: float = 0.1,
    ngram: int = 3,
    seed: int = 12345,
    num_shards: int = 1,
    num_workers: int = 1,
    do_lower_case: bool = True,
    overwrite: bool = False,
    mask: bool = True,
    shuffle_buffer: int = 10000,
    progress: bool = True,
    sentence_task: str = "sop",
    runner: str = "local",
    pipeline_args: list[str] | None = None,
) -> dict[str, Any]:
    """Writes n-gram MLM + SOP (or NSP, or no sentence task) instances as sharded TFRecords.

    Output (created atomically): `output_dir/data-NNNNN-of-NNNNN.tfrecord` holding
    `tf.train.Example`s with the features of `format.feature_lengths` (int64 `input_ids`,
    `input_mask`, `segment_ids` [max_seq_length]; int64 `masked_lm_positions`, `masked_lm_ids`
    and float `masked_lm_weights` [max_predictions_per_seq], padded with 0 / 0.0; int64
    `next_sentence_labels` [1], 1 = swapped or random next, see `sentence_task`), and
    `metadata.json` (sizes, vocab size, instance counts, `sentence_task`, SentencePiece checksum,
    settings, statistics) for training to validate.
    With `mask=False` the records hold unmasked `input_ids` and `token_boundary`, for
    `dynamic_masking`.

    Args:
      input_patterns, sp_model_path, output_dir: text files or globs (blank lines separate
        documents; ".gz" is read), the SentencePiece model, the directory to create.
      dupe_factor: how many times each document is used, with different masks and pairs.
      num_shards, num_workers: output files; tokenizing/masking processes.
      shuffle_buffer: records held for shuffling, shared among the shards.
      sentence_task: "sop" (ALBERT's sentence order, `[CLS] A [SEP] B [SEP]`, label 1 =
        swapped), "nsp" (BERT's next sentence, label 1 = B is random text from another
        document; see instances.create_nsp_pairs) or "none" (`[CLS] A [SEP]` of up to
        max_seq_length - 2 tokens, segment_ids all 0, label always 0: MLM alone).
      runner: "local" (this process and a pool of `num_workers`) or "beam" (an Apache Beam
        pipeline, `albert_tf.preprocess.pretraining_data.beam`: the same records as a multiset; inputs,
        model and output may then be on any Beam filesystem, gs:// included).
      pipeline_args: Beam pipeline options (runner "beam"); without a `--runner` among them,
        the DirectRunner with `num_workers` processes.

    The other arguments are those of the original create_pretraining_data.py. Returns the
    statistics dict also stored under "statistics" in metadata.json.

    Raises DataError (bad input, no instance), TokenizerError (bad model), OutputError (the
    output exists and `overwrite` is False), InstallError (runner "beam" without Apache Beam);
    nothing is left behind on error.
    """
    patterns = [input_patterns] if isinstance(input_patterns, str) else list(input_patterns)
    settings = Settings(
        sp_model_path=_recorded_path(sp_model_path),
        do_lower_case=do_lower_case,
        max_seq_length=max_seq_length,
        max_predictions_per_seq=max_predictions_per_seq,
        masked_lm_prob=masked_lm_prob,
        dupe_factor=dupe_factor,
        short_seq_prob=short_seq_prob,
        ngram=ngram,
        seed=seed,
        num_shards=num_shards,
        mask=mask,
        sentence_task=sentence_task,
    )
    _validate(settings, num_workers, shuffle_buffer, runner, pipeline_args)
    if runner == "beam":
        beam: Any = import_beam_module("albert_tf.preprocess.pretraining_data.beam")
        return beam.run_beam(
            patterns, settings, output_dir, overwrite, num_workers, list(pipeline_args or [])
        )
    local = (num_workers, shuffle_buffer, progress)
    return _run_local(patterns, sp_model_path, settings, output_dir, overwrite, *local)


def _run_local(
    patterns: list[str],
    sp_model_path: str | os.PathLike,
    settings: Settings,
    output_dir: str | os.PathLike,
    overwrite: bool,
    num_workers: int,
    shuffle_buffer: int,
    progress: bool,
) -> dict[str, Any]:
    """`create_pretraining_data` with the local runner: this process and `num_workers` workers
    write the shards and metadata.json of `settings` into `output_dir`; returns the statistics."""
    check_output_path(output_dir, overwrite)
    tokenizer = AlbertTokenizer(sp_model_path, settings.do_lower_case)
    files = resolve_inputs(patterns)
    total_bytes = sum(input_size(f) for f in files)

    start = time.perf_counter()
    totals = Counters(ngram_counts=[0] * (settings.ngram + 1))
    with atomic_dir(output_dir, overwrite=overwrite) as tmp:
        with contextlib.ExitStack() as files_open:
            shards = [
                _ShuffledShard(
                    files_open.enter_context(open(tmp / shard_name(i, settings.num_shards), "wb")),
                    -(-shuffle_buffer // settings.num_shards),
                    f"{settings.seed}/shard/{i}",
                )
                for i in range(settings.num_shards)
            ]
            _fill(shards, files, total_bytes, num_workers, settings, totals, progress)
        check_totals(totals, files)
        metadata = build_metadata(
            settings,
            tokenizer,
            totals,
            files=files,
            input_bytes=total_bytes,
            seconds=time.perf_counter() - start,
            shard_counts=[s.count for s in shards],
            sp_sha256=_sha256(sp_model_path),
            extra_settings={"runner": "local", "shuffle_buffer": shuffle_buffer},
        )
        (tmp / METADATA_FILE).write_text(metadata_json(metadata))
    return metadata["statistics"]


def check_totals(totals: Counters, files: list) -> None:
    """DataError if the corpus gave no document or no instance."""
    if totals.num_documents == 0:
        raise DataError(f"the input holds no text: {', '.join(map(str, files))}")
    if totals.num_instances == 0:
        raise DataError(
            f"no training instance: the corpus has {totals.num_documents} document(s) with "
            f"{totals.num_tokens} token(s) in all, and an instance needs a document of at "
            "least 2 tokens"
        )


def build_metadata(
    settings: Settings,
    tokenizer: Any,
    totals: Counters,
    *,
    files: list,
    input_bytes: int,
    seconds: float,
    shard_counts: list[int],
    sp_sha256: str,
    extra_settings: dict[str, Any],
) -> dict[str, Any]:
    """The contents of `metadata.json` (see `create_pretraining_data`), for either runner."""
    s = settings
    return {
        "format": FORMAT,
        "max_seq_length": s.max_seq_length,
        "max_predictions_per_seq": s.max_predictions_per_seq,
        "vocab_size": tokenizer.vocab_size,
        "num_instances": totals.num_instances,
        "masked": s.mask,
        "sentence_task": s.sentence_task,
        "features": {
            k: list(v)
            for k, v in feature_lengths(s.max_seq_length, s.max_predictions_per_seq, s.mask).items()
        },
        "files": [
            {"name": shard_name(i, len(shard_counts)), "num_instances": count}
            for i, count in enumerate(shard_counts)
        ],
        "special_ids": {
            "pad": tokenizer.pad_id,
            "unk": tokenizer.unk_id,
            "cls": tokenizer.cls_id,
            "sep": tokenizer.sep_id,
            "mask": tokenizer.mask_id,
        },
        "sp_model": {"path": s.sp_model_path, "sha256": sp_sha256},
        "settings": {
            **{k: v for k, v in asdict(s).items() if k != "sp_model_path"},
            **extra_settings,
            "inputs": [str(f) for f in files],
        },
        "statistics": _statistics(
            totals, s.sentence_task, files, input_bytes, seconds, shard_counts
        ),
    }


def metadata_json(metadata: dict[str, Any]) -> str:
    """`metadata.json`'s text."""
    return json.dumps(metadata, indent=2) + "\n"


def _label_statistics(totals: Counters, sentence_task: str) -> dict[str, Any]:
    """The sentence labels' balance, named by task: how many instances have label 1."""
    fraction = totals.label_ones / max(1, totals.num_instances)
    if sentence_task == "sop":
        return {"sop_swapped": totals.label_ones, "sop_swapped_fraction": fraction}
    if sentence_task == "nsp":
        return {
            "nsp_random_next": totals.label_ones,
            "nsp_random_next_fraction": fraction,
            # chunks whose batch had no other document: they got their true continuation
            "nsp_no_other_document": totals.no_other_document,
        }
    return {}


def _statistics(
    totals: Counters,
    sentence_task: str,
    files: list[Path],
    total_bytes: int,
    seconds: float,
    shard_counts: list[int],
) -> dict[str, Any]:
    ngrams = totals.ngram_counts[1:]
    masked = max(1, totals.masked_tokens)
    return {
        "num_files": len(files),
        "input_bytes": total_bytes,
        "num_documents": totals.num_documents,
        "num_sentences": totals.num_sentences,
        "num_tokens": totals.num_tokens,
        "num_instances": totals.num_instances,
        "shard_instances": shard_counts,
        "sentence_task": sentence_task,
        **_label_statistics(totals, sentence_task),
        "mean_instance_tokens": totals.instance_tokens / max(1, totals.num_instances),
        "masked_tokens": totals.masked_tokens,
        "masked_fraction": totals.masked_tokens / max(1, totals.instance_tokens),
        "mask_kind_fractions": {
            "mask": totals.mask_kinds[0] / masked,
            "random": totals.mask_kinds[1] / masked,
            "kept": totals.mask_kinds[2] / masked,
        },
        "ngram_counts": {str(n + 1): c for n, c in enumerate(ngrams)},
        "seconds": seconds,
        "mb_per_second": total_bytes / 1e6 / max(seconds, 1e-9),
    }
