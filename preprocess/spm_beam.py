"""`train-tokenizer --runner beam`: the seeded line sample of `spm_train`, drawn by an Apache
Beam pipeline from a corpus on any Beam filesystem, however large.

Each file is read and normalized in parallel; every line gets its `spm_train.sample_key` and
`Top.Smallest` keeps the N smallest keys, combining partial results on the workers (memory for N
lines each); the sorted sample is written to one text file for the driver, which then trains
SentencePiece on it as the local path does. Same seed and corpus: the same sample, in the same
order, as the local path.
"""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Iterator

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import GoogleCloudOptions

from albert_tf.preprocess.beam_io import match_files, pipeline_options, read_text_lines, run
from albert_tf.preprocess.normalize import preprocess_text
from albert_tf.preprocess.spm_train import sample_key

# The whole corpus when no sample size is given: Top.Smallest needs a bound.
_ALL = 2**62


def _keyed_lines(path: str, do_lower_case: bool, seed: int) -> Iterator[tuple[int, str]]:
    """The sample keys of a file's lines that are not empty once normalized."""
    for line in read_text_lines(path):
        text = preprocess_text(line, lower=do_lower_case)
        if text:
            yield sample_key(text, seed)


def _write_sample(keys: list[tuple[int, str]], path: str) -> None:
    """Writes the sample (sorted keys) as UTF-8 lines to `path` on a Beam filesystem."""
    with FileSystems.create(path) as f:
        for _, text in keys:
            f.write(text.encode("utf-8") + b"\n")


def sample_with_beam(
    inputs: list[str],
    do_lower_case: bool,
    sample_size: int,
    seed: int,
    pipeline_args: list[str],
    num_workers: int = 2,
) -> tuple[list[str], list[str]]:
    """(input files, the seeded sample of their normalized lines in sample order), as
    `spm_train.sample_corpus` gives it. The sample passes through the pipeline's
    --temp_location when there is one (a cluster's workers cannot write to this machine),
    else through a local temporary directory."""
    files = match_files(list(inputs))
    options = pipeline_options(pipeline_args, num_workers)
    with tempfile.TemporaryDirectory(prefix="albert-spm-beam-") as work:
        shared = options.view_as(GoogleCloudOptions).temp_location
        directory = shared or work
        sample_file = FileSystems.join(directory, f"spm-sample-{uuid.uuid4().hex}.txt")
        root = beam.Pipeline(options=options)
        _ = (
            root
            | "Files" >> beam.Create(files)
            | "SpreadFiles" >> beam.Reshuffle()
            | "KeyedLines" >> beam.FlatMap(_keyed_lines, do_lower_case, seed)
            | "Sample" >> beam.combiners.Top.Smallest(sample_size or _ALL)
            | "WriteSample" >> beam.Map(_write_sample, sample_file)
        )
        run(root)
        try:
            with FileSystems.open(sample_file, compression_type="uncompressed") as f:
                sample = f.read().decode("utf-8").split("\n")[:-1]
        finally:
            if shared:
                FileSystems.delete([sample_file])
    return files, sample
