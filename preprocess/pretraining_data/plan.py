"""The local path's document batches, planned ahead from document sizes, for a pipeline that
reads the corpus's files in parallel (`beam`) and so cannot batch while it reads.

`pipeline._batches` closes a batch as it streams the corpus (`closes`); `plan_batches` finds the
same batches from each file's `document_size`s, and `keyed_documents` tags every document of a
file with its batch and corpus index. Grouping the documents by batch and running
`generate.DocumentProcessor.process` on each gives the local path's records.
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass


def document_size(lines: list[str]) -> int:
    """A document's text size as batching counts it: characters of its stripped lines."""
    return sum(len(line) for line in lines)


def closes(size: int, count: int, batch_bytes: int) -> bool:
    """Whether a batch of `count` documents holding `size` characters is complete."""
    return size >= batch_bytes and count >= 2


def batch_starts(sizes: Iterable[int], batch_bytes: int) -> list[int]:
    """The index of each batch's first document, for the non-empty documents' sizes in corpus
    order: a batch closes once `closes`, and a last batch of a single document joins the batch
    before it (the rule of `pipeline._batches`)."""
    starts: list[int] = []
    size = count = 0
    for index, document in enumerate(sizes):
        if count == 0:
            starts.append(index)
        size += document
        count += 1
        if closes(size, count, batch_bytes):
            size = count = 0
    if 0 < count < 2 and len(starts) > 1:
        starts.pop()
    return starts


@dataclass(frozen=True)
class BatchPlan:
    """Where each file's documents go: 8 bytes per file and per batch."""

    offsets: array  # int64 [files + 1]: the corpus index of each file's first document
    starts: array  # int64 [batches]: the corpus index of each batch's first document


def plan_batches(sizes_by_file: list[array], batch_bytes: int) -> BatchPlan:
    """The plan for the files' document sizes (uint32 arrays, files in corpus order)."""
    offsets = array("q", [0])
    for sizes in sizes_by_file:
        offsets.append(offsets[-1] + len(sizes))
    starts = batch_starts((s for sizes in sizes_by_file for s in sizes), batch_bytes)
    return BatchPlan(offsets, array("q", starts))


def keyed_documents(
    documents: Iterable[list[str]], file_index: int, plan: BatchPlan
) -> Iterator[tuple[int, tuple[int, list[str]]]]:
    """(batch, (corpus index, lines)) for each non-empty document of file `file_index`."""
    index = plan.offsets[file_index]
    for lines in documents:
        yield bisect.bisect_right(plan.starts, index) - 1, (index, lines)
        index += 1
