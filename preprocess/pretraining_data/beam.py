"""`create-pretraining-data --runner beam`: the same instances as the local path, as an Apache
Beam pipeline (DirectRunner locally; Dataflow, Flink or Spark with their pipeline options).

The local path batches documents while it reads the corpus in order; a Beam pipeline reads its
files in parallel, so it plans the same batches first and then groups documents by batch:

1. `DocumentSizes`: each file (in parallel) -> the `document_size` of its non-empty documents.
2. `PlanBatches`: one step over all sizes in corpus order -> each file's first document index
   and the first document of every batch (`plan.plan_batches`, the rule of the local path).
3. `ReadDocuments`: each file again -> `(batch, (document index, lines))`.
4. `GroupBatches` + `MakeInstances`: each batch, its documents in corpus order, through
   `generate.DocumentProcessor.process` as one local worker would.
5. `WriteShards`: Beam's TFRecord sink, files named `format.shard_name`.

Every random draw depends only on the seed, the duplication round and the document's corpus
index (see `generate`), and NSP's random next text only on the batch, so the records equal the
local path's as a multiset for any runner and number of workers. Which shard a record lands in
and the order within a shard are the sink's. The statistics of `metadata.json` come from the
pipeline's counters.

Memory per worker: one batch (`pipeline.BATCH_BYTES` of text and at least two documents, a
document held whole as in the local path) and its records; the planning step holds four bytes
per document of the corpus (24 MB for Wikipedia's six million articles) and every worker the
plan, eight bytes per batch. (The DirectRunner keeps the data between steps in memory; a
distributed runner shuffles it through its own storage.)
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import tempfile
import time
from array import array
from collections.abc import Iterator
from typing import Any

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics

from albert_tf.errors import OutputError
from albert_tf.io_utils import atomic_dir, check_output_path, is_remote
from albert_tf.preprocess.beam_io import (
    NAMESPACE,
    counter_values,
    match_files,
    pipeline_options,
    read_text_lines,
    run,
)
from albert_tf.preprocess.pretraining_data import pipeline
from albert_tf.preprocess.pretraining_data.documents import resolve_inputs, split_documents
from albert_tf.preprocess.pretraining_data.format import METADATA_FILE, shard_name
from albert_tf.preprocess.pretraining_data.generate import Counters, DocumentProcessor, Settings
from albert_tf.preprocess.pretraining_data.plan import (
    BatchPlan,
    document_size,
    keyed_documents,
    plan_batches,
)
from albert_tf.preprocess.tokenizer import AlbertTokenizer


def _document_sizes(item: tuple[int, str]) -> tuple[int, array]:
    """(file index, path) -> (file index, uint32 sizes of its non-empty documents)."""
    index, path = item
    documents = split_documents(read_text_lines(path, count_bytes=True))
    return index, array("I", map(document_size, documents))


def _plan(sizes: list[tuple[int, array]], batch_bytes: int) -> BatchPlan:
    """All files' (file index, document sizes) -> the batch plan."""
    return plan_batches([s for _, s in sorted(sizes, key=lambda item: item[0])], batch_bytes)


def _keyed_documents(
    item: tuple[int, str], plan: BatchPlan
) -> Iterator[tuple[int, tuple[int, list[str]]]]:
    """(file index, path) -> (batch, (document index, lines)) per non-empty document."""
    file_index, path = item
    return keyed_documents(split_documents(read_text_lines(path)), file_index, plan)


class _MakeInstances(beam.DoFn):
    """One batch of documents -> its serialized Examples, statistics into the counters."""

    def __init__(self, settings: Settings, sp_model: bytes):
        self.settings = settings
        self.sp_model = sp_model
        self.processor: DocumentProcessor | None = None

    def setup(self) -> None:
        with tempfile.NamedTemporaryFile(suffix=".model", delete=False) as f:
            f.write(self.sp_model)
        try:
            settings = dataclasses.replace(self.settings, sp_model_path=f.name)
            self.processor = DocumentProcessor(settings)  # the model is loaded: file unneeded
        finally:
            os.unlink(f.name)

    def process(self, batch: tuple[int, Any]) -> Iterator[bytes]:
        _, documents = batch
        assert self.processor is not None, "setup was not called"
        records, counters = self.processor.process(sorted(documents), frame=False)
        for name, value in _counter_values(counters).items():
            if value:
                Metrics.counter(NAMESPACE, name).inc(value)
        for _, record in records:
            yield record


def _counter_values(counters: Counters) -> dict[str, int]:
    """Counters as flat metric names: scalars by name, list entries as NAME_I."""
    values = {}
    for field in dataclasses.fields(counters):
        value = getattr(counters, field.name)
        if isinstance(value, list):
            values.update({f"{field.name}_{i}": v for i, v in enumerate(value)})
        else:
            values[field.name] = value
    return values


def _counters_from_metrics(result: Any, ngram: int) -> tuple[Counters, int]:
    """The pipeline's summed Counters and input bytes, from its metrics."""
    found = counter_values(result)
    totals = Counters(ngram_counts=[0] * (ngram + 1))
    for field in dataclasses.fields(totals):
        value = getattr(totals, field.name)
        if isinstance(value, list):
            value[:] = [found.get(f"{field.name}_{i}", 0) for i in range(len(value))]
        else:
            setattr(totals, field.name, found.get(field.name, 0))
    return totals, found.get("input_bytes", 0)


def _resolve(patterns: list[str]) -> list[str]:
    """Input files in corpus order: sorted paths, as `documents.resolve_inputs` for local ones
    (so that both runners index the documents alike), `FileSystems.match` for URLs."""
    local = [p for p in patterns if not is_remote(p)]
    files = [str(f) for f in resolve_inputs(local)] if local else []
    remote = [p for p in patterns if is_remote(p)]
    return sorted(dict.fromkeys(files + (match_files(remote) if remote else [])))


def _count_records(path: str) -> int:
    """Records in a TFRecord file, from the frame headers alone."""
    count = 0
    with FileSystems.open(path, compression_type="uncompressed") as f:
        while header := f.read(12):  # uint64 length + masked CRC of the length
            f.seek(int.from_bytes(header[:8], "little") + 4, os.SEEK_CUR)
            count += 1
    return count


def _build(root: Any, files: list[str], settings: Settings, sp_model: bytes, output: str) -> None:
    """The pipeline's transforms, from the file list to the shards under `output`."""
    indexed = (
        root | "Files" >> beam.Create(list(enumerate(files))) | "SpreadFiles" >> beam.Reshuffle()
    )
    plan = (
        indexed
        | "DocumentSizes" >> beam.Map(_document_sizes)
        | "CollectSizes" >> beam.combiners.ToList()
        | "PlanBatches" >> beam.Map(_plan, pipeline.BATCH_BYTES)
    )
    _ = (
        indexed
        | "ReadDocuments" >> beam.FlatMap(_keyed_documents, beam.pvalue.AsSingleton(plan))
        | "GroupBatches" >> beam.GroupByKey()
        | "MakeInstances" >> beam.ParDo(_MakeInstances(settings, sp_model))
        | "WriteShards"
        >> beam.io.WriteToTFRecord(
            FileSystems.join(output, "data"),
            file_name_suffix=".tfrecord",
            num_shards=settings.num_shards,
            shard_name_template="-SSSSS-of-NNNNN",
        )
    )


def run_beam(
    patterns: list[str],
    settings: Settings,
    output_dir: str | os.PathLike,
    overwrite: bool,
    num_workers: int,
    pipeline_args: list[str],
) -> dict[str, Any]:
    """Runs the pipeline for validated `settings` and writes `output_dir` as the local path does
    (shards and `metadata.json`); returns the statistics. A local output is created atomically;
    on a remote filesystem the directory is complete once `metadata.json` is there, written last.
    """
    output = os.fspath(output_dir)
    remote = is_remote(output)
    if remote and not overwrite and FileSystems.exists(FileSystems.join(output, METADATA_FILE)):
        raise OutputError(f"{output} already exists (pass --overwrite to replace it)")
    if not remote:
        check_output_path(output, overwrite)
    files = _resolve(patterns)
    # the model's bytes go to the workers, which may not see this machine's files
    tokenizer = AlbertTokenizer(settings.sp_model_path, settings.do_lower_case)  # checks it
    with FileSystems.open(settings.sp_model_path, compression_type="uncompressed") as f:
        sp_model = f.read()

    start = time.perf_counter()
    writing = contextlib.nullcontext(output) if remote else atomic_dir(output, overwrite=overwrite)
    with writing as out:
        root = beam.Pipeline(options=pipeline_options(pipeline_args, num_workers))
        _build(root, files, settings, sp_model, str(out))
        result = run(root)
        totals, input_bytes = _counters_from_metrics(result, settings.ngram)
        pipeline.check_totals(totals, files)
        shards = [
            FileSystems.join(str(out), shard_name(i, settings.num_shards))
            for i in range(settings.num_shards)
        ]
        metadata = pipeline.build_metadata(
            settings,
            tokenizer,
            totals,
            files=files,
            input_bytes=input_bytes,
            seconds=time.perf_counter() - start,
            shard_counts=[_count_records(s) for s in shards],
            sp_sha256=hashlib.sha256(sp_model).hexdigest(),
            extra_settings={"runner": "beam"},
        )
        with FileSystems.create(FileSystems.join(str(out), METADATA_FILE)) as f:
            f.write(pipeline.metadata_json(metadata).encode())
    return metadata["statistics"]
