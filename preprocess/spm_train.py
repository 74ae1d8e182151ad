"""Train an ALBERT SentencePiece vocabulary with the original recipe.

The original (google-research/albert README) ran `spm_train` with: unigram model, `<pad>`=0,
`<unk>`=1, no BOS/EOS, control symbols `[CLS]`, `[SEP]`, `[MASK]` (ids 2-4), user-defined symbols
`(`, `)`, `"`, `-`, `.`, `–`, `£`, `€` (ids 5-12), character coverage 0.99995, and a shuffled
sample of at most 10M input sentences. The training text goes through `preprocess_text` first,
so the vocabulary sees exactly what the tokenizer will feed it.

The sample is ours, not the trainer's: the `input_sentence_size` normalized lines with the
smallest seeded hash (`sample_key`), in hash order. A uniform sample for a given seed (identical
lines share a hash, so they are in or out together) that needs memory for the sample only and
does not depend on the order lines are read in, so an Apache Beam pipeline over a corpus too
large for one machine (`--runner beam`, `preprocess/spm_beam.py`) draws the same sample.
"""

from __future__ import annotations

import glob
import gzip
import hashlib
import heapq
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import sentencepiece as spm
from sentencepiece import sentencepiece_model_pb2

from albert_tf.environment import import_beam_module
from albert_tf.errors import DataError, TokenizerError
from albert_tf.io_utils import atomic_file, check_can_create, check_output_path
from albert_tf.preprocess.normalize import preprocess_text
from albert_tf.preprocess.tokenizer import CLS, MASK, SEP, load_sp_model
from albert_tf.progress import bar as progress_bar

CONTROL_SYMBOLS = (CLS, SEP, MASK)
USER_DEFINED_SYMBOLS = ("(", ")", '"', "-", ".", "–", "£", "€")
MIN_VOCAB_SIZE = 2 + len(CONTROL_SYMBOLS) + len(USER_DEFINED_SYMBOLS) + 1


def expand_inputs(patterns: Sequence[str]) -> list[Path]:
    """Files matched by each glob (`**` recursive), sorted, duplicates removed.

    Raises DataError if a pattern matches no file.
    """
    files: dict[Path, None] = {}
    for pattern in patterns:
        matches = sorted(p for p in glob.glob(os.path.expanduser(pattern), recursive=True))
        matches = [Path(m) for m in matches if Path(m).is_file()]
        if not matches:
            raise DataError(f"input {pattern!r} matches no files")
        files.update(dict.fromkeys(matches))
    return list(files)


def _read_lines(path: Path) -> Iterator[str]:
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as f:
            for number, raw in enumerate(f, 1):
                try:
                    yield raw.decode("utf-8")
                except UnicodeDecodeError as e:
                    raise DataError(
                        f"{path} is not UTF-8 text (line {number}: {e.reason})"
                    ) from None
    except (OSError, EOFError) as e:
        raise DataError(f"cannot read {path}: {e}") from None


def sample_key(text: str, seed: int) -> tuple[int, str]:
    """A normalized line's place in the seeded sample order: the sample of size N is the N
    lines with the smallest keys (a 64-bit keyed hash, the text itself breaking ties)."""
    digest = hashlib.blake2b(text.encode("utf-8"), digest_size=8, key=str(seed).encode())
    return int.from_bytes(digest.digest(), "big"), text


def smallest_keys(keys: Iterator[tuple[int, str]], size: int) -> list[tuple[int, str]]:
    """The `size` smallest keys (all, for size 0), sorted; memory for those only."""
    return sorted(keys) if size == 0 else heapq.nsmallest(size, keys)


def _normalized_lines(files: Sequence[Path], do_lower_case: bool) -> Iterator[str]:
    """`preprocess_text` of every line of `files` that is not empty after it, with a tqdm bar."""
    # No bar when stderr is not a terminal (logs, pipes, tests): albert_tf.progress.
    with progress_bar(desc="sampling", unit=" lines", unit_scale=True, mininterval=1.0) as bar:
        for path in files:
            for line in _read_lines(path):
                bar.update()
                text = preprocess_text(line, lower=do_lower_case)
                if text:
                    yield text


def sample_corpus(
    files: Sequence[Path], do_lower_case: bool, sample_size: int, seed: int
) -> list[str]:
    """The seeded sample (see the module docstring) of the normalized lines of `files`, in
    sample order: the trainer's input."""
    keys = (sample_key(text, seed) for text in _normalized_lines(files, do_lower_case))
    return [text for _, text in smallest_keys(keys, sample_size)]


def _beam_sample(
    inputs: Sequence[str],
    do_lower_case: bool,
    sample_size: int,
    seed: int,
    pipeline_args: Sequence[str] | None,
    num_workers: int | None,
) -> tuple[list[str], list[str]]:
    """(input files, sample) drawn by `spm_beam.sample_with_beam`; InstallError without Beam."""
    spm_beam: Any = import_beam_module("albert_tf.preprocess.spm_beam")
    return spm_beam.sample_with_beam(
        list(inputs),
        do_lower_case,
        sample_size,
        seed,
        list(pipeline_args or []),
        num_workers or os.cpu_count() or 1,
    )


def _record_sources(model: Path, files: Sequence, prefix: Path) -> None:
    """Replaces the temporary corpus and prefix the trainer stored in the model's TrainerSpec
    with the real input files and output prefix, so no temporary path is left in the model."""
    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(model.read_bytes())
    del proto.trainer_spec.input[:]
    proto.trainer_spec.input.extend(str(f) for f in files)
    proto.trainer_spec.model_prefix = str(prefix)
    model.write_bytes(proto.SerializeToString())


def _check_settings(
    vocab_size: int,
    character_coverage: float,
    input_sentence_size: int,
    num_threads: int | None,
    runner: str,
) -> None:
    """`train_sentencepiece`'s checks of its settings, each naming its flag."""
    if vocab_size < MIN_VOCAB_SIZE:
        raise TokenizerError(
            f"--vocab-size {vocab_size} is too small: ALBERT's special and user-defined symbols "
            f"alone take {MIN_VOCAB_SIZE - 1} ids"
        )
    # SentencePiece's own bounds, checked here so that the flag is named.
    if not 0.98 <= character_coverage <= 1.0:
        raise TokenizerError(f"--character-coverage must be in [0.98, 1], got {character_coverage}")
    if input_sentence_size < 0:
        raise TokenizerError(f"--input-sentence-size must be >= 0, got {input_sentence_size}")
    if num_threads is not None and num_threads < 1:
        raise TokenizerError(f"--threads must be positive, got {num_threads}")
    if runner not in ("local", "beam"):
        raise DataError(f"--runner must be local or beam, got {runner!r}")


def _train(
    corpus: Path,
    trained: Path,
    vocab_size: int,
    model_type: str,
    character_coverage: float,
    seed: int,
    num_threads: int | None,
    verbose: bool,
) -> None:
    """Runs the SentencePiece trainer on `corpus` (the sample) with ALBERT's recipe, writing
    `trained`.model and .vocab; DataError with the trainer's own last words when it fails."""
    spm.set_random_generator_seed(seed)
    try:
        spm.SentencePieceTrainer.train(
            input=str(corpus),
            model_prefix=str(trained),
            vocab_size=vocab_size,
            model_type=model_type,
            pad_id=0,
            unk_id=1,
            bos_id=-1,
            eos_id=-1,
            control_symbols=list(CONTROL_SYMBOLS),
            user_defined_symbols=list(USER_DEFINED_SYMBOLS),
            character_coverage=character_coverage,
            input_sentence_size=0,  # the corpus is the sample already
            shuffle_input_sentence=False,
            num_threads=num_threads or os.cpu_count() or 1,
            minloglevel=0 if verbose else 2,
        )
    except RuntimeError as e:
        # e.g. "INTERNAL: src/trainer_interface.cc(744) [...] Vocabulary size too high ..."
        message = str(e).strip().splitlines()[-1].rsplit("] ", 1)[-1] if str(e) else "failed"
        raise DataError(f"SentencePiece training failed: {message}") from None


def train_sentencepiece(
    inputs: Sequence[str],
    vocab_size: int,
    output_prefix: str | os.PathLike,
    do_lower_case: bool = True,
    model_type: str = "unigram",
    character_coverage: float = 0.99995,
    input_sentence_size: int = 10_000_000,
    seed: int = 12345,
    num_threads: int | None = None,
    overwrite: bool = False,
    verbose: bool = False,
    runner: str = "local",
    pipeline_args: Sequence[str] | None = None,
) -> Path:
    """Trains a SentencePiece model with ALBERT's recipe; returns the path of `PREFIX.model`.

    Writes `PREFIX.model` and `PREFIX.vocab` atomically. `inputs` are paths or globs of UTF-8
    text files (`.gz` read transparently), one sentence or paragraph per line. When the corpus
    holds more than `input_sentence_size` lines, a seeded sample of that many is used (see the
    module docstring). `runner` "beam" draws that sample with an Apache Beam pipeline
    (`pipeline_args` its options; DirectRunner without a --runner among them): the same sample,
    from inputs on any Beam filesystem.

    Raises DataError (no file matches, empty corpus, vocabulary too large for the corpus),
    TokenizerError (vocab_size too small for ALBERT's special pieces), OutputError (output
    exists and not `overwrite`), InstallError (runner "beam" without Apache Beam).
    """
    _check_settings(vocab_size, character_coverage, input_sentence_size, num_threads, runner)
    if pipeline_args and runner != "beam":
        raise DataError("Beam pipeline options (after --) need --runner beam")
    prefix = Path(output_prefix)
    targets = [prefix.with_name(prefix.name + ext) for ext in (".model", ".vocab")]
    for target in targets:
        check_output_path(target, overwrite)
        check_can_create(target)
    if runner == "beam":
        files, sample = _beam_sample(
            inputs, do_lower_case, input_sentence_size, seed, pipeline_args, num_threads
        )
    else:
        files = expand_inputs(inputs)
        sample = sample_corpus(files, do_lower_case, input_sentence_size, seed)
    if not sample:
        raise DataError(f"the input holds no text: {', '.join(map(str, files))}")
    with tempfile.TemporaryDirectory(prefix="albert-spm-") as work:
        corpus = Path(work) / "corpus.txt"
        corpus.write_text("".join(text + "\n" for text in sample), encoding="utf-8")
        del sample
        trained = Path(work) / "spm"
        print(f"training SentencePiece ({model_type}, vocab {vocab_size}) ...", flush=True)
        _train(
            corpus, trained, vocab_size, model_type, character_coverage, seed, num_threads, verbose
        )
        load_sp_model(trained.with_suffix(".model"))
        _record_sources(trained.with_suffix(".model"), files, prefix)
        for target, ext in zip(targets, (".model", ".vocab"), strict=True):
            with atomic_file(target, overwrite=True) as tmp:
                shutil.copy(trained.with_suffix(ext), tmp)  # with the trainer's file mode
    return targets[0]
