"""What albert-tf's Apache Beam pipelines share: reading text on any Beam filesystem, the
pipeline options (the DirectRunner in multi-process mode by default) and running a pipeline
with its failure as one line. Imported only with `--runner beam` (the `.[beam]` extra)."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

# Beam warns at import about each filesystem whose client is not installed (GCS without the
# [gcp] extra); a path on one fails with its own error when it is used.
logging.getLogger("apache_beam.io.filesystems").setLevel(logging.ERROR)

import apache_beam as beam  # noqa: E402
from apache_beam.io.filesystems import FileSystems  # noqa: E402
from apache_beam.metrics import Metrics  # noqa: E402
from apache_beam.metrics.metric import MetricsFilter  # noqa: E402
from apache_beam.options.pipeline_options import (  # noqa: E402
    DirectOptions,
    PipelineOptions,
    StandardOptions,
    WorkerOptions,
)

from albert_tf.errors import AlbertError, DataError  # noqa: E402

NAMESPACE = "albert_tf"  # of the pipelines' metrics


def read_text_lines(path: str, count_bytes: bool = False) -> Iterator[str]:
    """The lines of a UTF-8 text file on any Beam filesystem (".gz" decompressed); with
    `count_bytes`, the bytes read are added to the "input_bytes" metric (count each file once).
    DataError naming the line if it is not UTF-8."""
    read = Metrics.counter(NAMESPACE, "input_bytes") if count_bytes else None
    with FileSystems.open(path) as f:
        number = 0
        while raw := f.readline():
            number += 1
            if read is not None:
                read.inc(len(raw))
            try:
                yield raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise DataError(f"{path} is not UTF-8 text (line {number}: {e.reason})") from None


def match_files(patterns: list[str]) -> list[str]:
    """Sorted, de-duplicated files matching `patterns` on Beam's filesystems; DataError if a
    pattern matches nothing."""
    files: set[str] = set()
    for pattern in patterns:
        try:
            matches = FileSystems.match([pattern])[0].metadata_list
        except Exception as e:  # each filesystem raises its own error kind
            raise DataError(f"cannot list {pattern}: {e}") from None
        if not matches:
            raise DataError(f"input {pattern!r} matches no files")
        files.update(m.path for m in matches)
    return sorted(files)


def pipeline_options(pipeline_args: list[str], num_workers: int) -> PipelineOptions:
    """Options from the user's `pipeline_args`; unless they say otherwise, the DirectRunner in
    multi-process mode with `num_workers` processes, whose workers log nothing: their warnings
    (no persistent directory, a slow CRC) are noise here, and a failure reaches the user as the
    one line of `run`."""
    options = PipelineOptions(pipeline_args)

    def given(flag: str) -> bool:
        return any(a.startswith(flag) for a in pipeline_args)

    if not given("--runner") and not given("--default_sdk_harness_log_level"):
        options.view_as(WorkerOptions).default_sdk_harness_log_level = "CRITICAL"
    direct = options.view_as(DirectOptions)
    if not given("--direct_num_workers"):
        direct.direct_num_workers = num_workers
    if not given("--direct_running_mode"):
        direct.direct_running_mode = "multi_processing"
    return options


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Beam's log off, and this process's stderr (file descriptor 2, which the DirectRunner's
    worker processes inherit and print their tracebacks to) sent to a discarded file."""
    logger = logging.getLogger("apache_beam")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with tempfile.TemporaryFile() as sink:
            os.dup2(sink.fileno(), 2)
            try:
                yield
            finally:
                os.dup2(saved, 2)
    finally:
        os.close(saved)
        logger.setLevel(level)


def run(root: beam.Pipeline) -> Any:
    """Runs the pipeline to the end; returns its result (for the metrics). A failure, which a
    runner wraps in its own exception, becomes a DataError with the last line of its message.
    The DirectRunner's own log (a failing worker's traceback, repeated) is silenced: the error
    says it in one line. Other runners log as they do (Dataflow's job link, for one)."""
    runner = root.options.view_as(StandardOptions).runner
    direct = runner is None or "Direct" in str(runner)
    try:
        with _quiet() if direct else contextlib.nullcontext():
            result = root.run()
            result.wait_until_finish()
    except AlbertError:
        raise
    except Exception as e:  # a worker's error arrives wrapped by the runner
        lines = [line.strip() for line in str(e).strip().splitlines() if line.strip()]
        raise DataError(
            f"the Beam pipeline failed: {lines[-1] if lines else type(e).__name__}"
        ) from None
    return result


def counter_values(result: Any) -> dict[str, int]:
    """The pipeline's counters in NAMESPACE, by name (committed values where the runner has
    them)."""
    found: dict[str, int] = {}
    for counter in result.metrics().query(MetricsFilter().with_namespace(NAMESPACE))["counters"]:
        value = counter.committed if counter.committed is not None else counter.attempted
        found[counter.key.metric.name] = found.get(counter.key.metric.name, 0) + value
    return found
