"""Keeps start-up notices (TensorFlow's about CUDA and oneDNN, TFLite's, Beam's) off the terminal.

On a CPU machine with CUDA libraries but no driver, TensorFlow logs at ERROR level
`failed call to cuInit: INTERNAL: CUDA error`, and oneDNN logs `oneDNN supports DT_INT64 only on
platforms with AVX-512` even on CPUs that have AVX-512 (for any integer op its layout pass looks
at: here the int64 row-splits arithmetic of tensorflow_text's `combine_segments` in the
preprocess model, a few values per batch, which Eigen runs as it always would). Neither is a
failure, but both read like one. Nor are the notices that TFLite's converter and interpreter
print during `export --tflite` and `predict --runtime tflite`: options it ignores, an MLIR pass
it skips, the XNNPACK delegate it creates, and absl's line about logging before its
initialization. Nor are the two lines Apache Beam logs while it is imported by
`--runner beam` without its GCP extra (no GCS file system, no BigQuery client): neither is used
on the DirectRunner; nor SentencePiece's two lines about the normalizer `export --keras-hub`
compiles; nor XLA's line on compiling its first kernel (a training step's, in `pretrain`,
`finetune` and the quickstart). TF_CPP_MIN_LOG_LEVEL=3 would hide the C++ notices, and every
real error with them.

So `albert-tf` runs each command with file descriptor 2 (where the C++ logs, Python and child
processes write) fed through a pipe, and a thread copies everything on except complete C++ log
lines whose message is one of NOISE. Everything else, other C++ errors included, passes unchanged;
text without a newline (progress bars) passes as soon as it arrives. `--verbose`, or a
TF_CPP_MIN_LOG_LEVEL the user set, turns the filter off.
"""

from __future__ import annotations

import os
import re
import sys
import threading

# A C++ log line's start: TensorFlow's own format, or absl's (`E0000 00:00:1732000000.123456  123 file.cc:45]`).
LOG_START = re.compile(
    rb"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: [IWEF] \S+:\d+\] "
    rb"|[IWEF]\d{4} \d\d:\d\d:\d+\.\d+\s+\d+ \S+:\d+\] "
)
# The messages dropped: start-up notices about CUDA and oneDNN's capabilities, never failures of
# the work a command does.
NOISE = re.compile(
    rb"failed call to cuInit"
    rb"|Could not find cuda drivers"
    rb"|Unable to register cu(DNN|FFT|BLAS) factory"
    rb"|TF-TRT Warning: Could not find TensorRT"
    rb"|oneDNN supports DT_\w+ only on platforms with"
    rb"|Ignored (output_format|drop_control_dependency)\.$"
    rb"|MLIR V1 optimization pass is not enabled$"
    # SentencePiece compiling the keras-hub tokenizer's normalizer (`export --keras-hub`)
    rb"|Loading CharsMap of size=\d+$"
    rb"|Generated normalizer blob\. size=\d+$"
    # XLA announcing its first compiled kernel (the training step's, layers/compiled.py)
    rb"|Compiled cluster using XLA!  This line is logged at most once for the lifetime of the "
    rb"process\.$"
)
# Whole lines printed without a C++ log prefix, dropped as they are.
PLAIN_NOISE = frozenset(
    {
        b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
        b"INFO: Created TensorFlow Lite XNNPACK delegate for CPU.",
    }
)
# Whole lines Apache Beam logs through Python's logging when imported without apache-beam[gcp]
# (with or without the logger's prefix: that depends on whether logging was configured before).
# Only the GCS message carries a variable part, the ImportError that Beam caught.
PYTHON_NOISE = re.compile(
    rb"(WARNING:apache_beam\.io\.filesystems:)?Failed to import GCSFileSystem; loading of this "
    rb"filesystem will be skipped\. Error details: [^\n]*"
    rb"|(WARNING:root:)?apitools not found, and bigquery client libraries are not available "
    rb"despite the import not raising an ImportError\."
)
# What a partial line must look like to be held back as a possible C++ log line ("9" = a digit).
_PREFIXES = (b"9999-99-99 99:99:99.", b"E9999 99:99:9")


def is_noise(line: bytes) -> bool:
    """True for one complete line that is a C++ log line carrying a NOISE message, one of
    PLAIN_NOISE, or a whole PYTHON_NOISE line."""
    bare = line.rstrip(b"\r\n")
    if bare in PLAIN_NOISE or PYTHON_NOISE.fullmatch(bare):
        return True
    start = LOG_START.search(line)
    return start is not None and NOISE.search(line, start.end()) is not None


def _could_be_log_start(partial: bytes) -> bool:
    """Whether `partial` (text after the last newline) may still grow into a C++ log line."""
    for template in _PREFIXES:
        head = partial[: len(template)]
        if all(
            (t == ord("9") and 48 <= c <= 57) or (t == ord("E") and c in b"IWEF") or t == c
            for c, t in zip(head, template, strict=False)
        ):
            return True
    return False


def filter_chunk(pending: bytes) -> tuple[bytes, bytes]:
    """(bytes to pass on now, bytes to hold) for `pending` text: complete lines pass unless
    `is_noise`; a trailing partial line is held only while it may become a C++ log line."""
    lines = pending.split(b"\n")
    partial = lines.pop()
    kept = b"".join(line + b"\n" for line in lines if not is_noise(line + b"\n"))
    if (partial and not _could_be_log_start(partial)) or len(partial) > 65536:
        return kept + partial, b""
    return kept, partial


class NoiseFilter:
    """While active, file descriptor `fd` goes through a pipe that drops `is_noise` lines."""

    def __init__(self, fd: int = 2):
        self.fd = fd
        self.saved: int | None = None
        self.thread: threading.Thread | None = None

    def __enter__(self) -> NoiseFilter:
        sys.stderr.flush()
        self.saved = os.dup(self.fd)
        read_end, write_end = os.pipe()
        os.dup2(write_end, self.fd)
        os.close(write_end)
        self.thread = threading.Thread(target=self._copy, args=(read_end,), daemon=True)
        self.thread.start()
        return self

    def _copy(self, read_end: int) -> None:
        pending = b""
        while chunk := os.read(read_end, 65536):
            out, pending = filter_chunk(pending + chunk)
            if out:
                os.write(self.saved, out)
        if pending and not is_noise(pending):
            os.write(self.saved, pending)
        os.close(read_end)

    def __exit__(self, *exc) -> None:
        sys.stderr.flush()
        os.dup2(self.saved, self.fd)  # closes this process's write end of the pipe
        # A child process still holding the pipe keeps it open: do not wait for it for long.
        self.thread.join(timeout=2)
        if not self.thread.is_alive():
            os.close(self.saved)


def wanted(verbose: bool, environ=os.environ) -> bool:
    """Whether to filter: not with --verbose, nor when the user set TF_CPP_MIN_LOG_LEVEL."""
    return not verbose and "TF_CPP_MIN_LOG_LEVEL" not in environ
