"""Train an ALBERT SentencePiece vocabulary with the original recipe.

The original (google-research/albert README) ran `spm_train` with: unigram model, `<pad>`=0,
`<unk>`=1, no BOS/EOS, control symbols `[CLS]`, `[SEP]`, `[MASK]` (ids 2-4), user-defined symbols
`(`, `)`, `"`, `-`, `.`, `–`, `£`, `€` (ids 5-12), character coverage 0.99995, and a shuffled
sample of at most 10M input sentences. The training text goes through `preprocess_text` first,
so the vocabulary sees exactly what the tokenizer will feed it.
"""

from __future__ import annotations

import glob
import gzip
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

from albert_tf.errors import DataError, TokenizerError
from albert_tf.io_utils import atomic_file, check_can_create, check_output_path
from preprocess.normalize import preprocess_text
from preprocess.tokenizer import CLS, MASK, SEP, load_sp_model

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


def write_normalized_corpus(files: Sequence[Path], output: Path, do_lower_case: bool) -> int:
    """Writes `preprocess_text` of every non-empty line of `files` to `output`, one per line.

    Returns the number of lines written. Shows a tqdm progress bar (lines).
    """
    from tqdm import tqdm

    count = 0
    with (
        open(output, "w", encoding="utf-8") as out,
        # disable=None: no bar when stderr is not a terminal (logs, pipes, tests).
        tqdm(
            desc="normalizing", unit=" lines", unit_scale=True, mininterval=1.0, disable=None
        ) as bar,
    ):
        for path in files:
            for line in _read_lines(path):
                text = preprocess_text(line, lower=do_lower_case)
                bar.update()
                if text:
                    out.write(text + "\n")
                    count += 1
    return count


def _record_sources(model: Path, files: Sequence[Path], prefix: Path) -> None:
    """Replaces the temporary corpus and prefix the trainer stored in the model's TrainerSpec
    with the real input files and output prefix, so no temporary path is left in the model."""
    from sentencepiece import sentencepiece_model_pb2

    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(model.read_bytes())
    del proto.trainer_spec.input[:]
    proto.trainer_spec.input.extend(str(f) for f in files)
    proto.trainer_spec.model_prefix = str(prefix)
    model.write_bytes(proto.SerializeToString())


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
) -> Path:
    """Trains a SentencePiece model with ALBERT's recipe; returns the path of `PREFIX.model`.

    Writes `PREFIX.model` and `PREFIX.vocab` atomically. `inputs` are paths or globs of UTF-8
    text files (`.gz` read transparently), one sentence or paragraph per line. When the corpus
    holds more than `input_sentence_size` lines, a seeded shuffled sample of that many is used.

    Raises DataError (no file matches, empty corpus, vocabulary too large for the corpus),
    TokenizerError (vocab_size too small for ALBERT's special pieces), OutputError (output
    exists and not `overwrite`).
    """
    import sentencepiece as spm

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
    prefix = Path(output_prefix)
    targets = [prefix.with_name(prefix.name + ext) for ext in (".model", ".vocab")]
    for target in targets:
        check_output_path(target, overwrite)
        check_can_create(target)
    files = expand_inputs(inputs)
    with tempfile.TemporaryDirectory(prefix="albert-spm-") as work:
        corpus = Path(work) / "corpus.txt"
        if write_normalized_corpus(files, corpus, do_lower_case) == 0:
            raise DataError(f"the input holds no text: {', '.join(map(str, files))}")
        trained = Path(work) / "spm"
        print(f"training SentencePiece ({model_type}, vocab {vocab_size}) ...", flush=True)
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
                input_sentence_size=input_sentence_size,
                shuffle_input_sentence=True,
                num_threads=num_threads or os.cpu_count() or 1,
                minloglevel=0 if verbose else 2,
            )
        except RuntimeError as e:
            # e.g. "INTERNAL: src/trainer_interface.cc(744) [...] Vocabulary size too high ..."
            message = str(e).strip().splitlines()[-1].rsplit("] ", 1)[-1] if str(e) else "failed"
            raise DataError(f"SentencePiece training failed: {message}") from None
        load_sp_model(trained.with_suffix(".model"))
        _record_sources(trained.with_suffix(".model"), files, prefix)
        for target, ext in zip(targets, (".model", ".vocab"), strict=True):
            with atomic_file(target, overwrite=True) as tmp:
                shutil.copy(trained.with_suffix(ext), tmp)  # with the trainer's file mode
    return targets[0]
