"""The plain-Python reference tokenizer: the original ALBERT tokenization, id for id.

`AlbertTokenizer` = `preprocess_text` + SentencePiece + the original's re-split of pieces that
end in a digit followed by a comma. It is the reference the in-graph tokenizer is tested against
and what pretraining-data generation uses.
"""

from __future__ import annotations

import contextlib
import copy
import os
from pathlib import Path

import sentencepiece as spm

from albert_tf.errors import TokenizerError
from albert_tf.io_utils import gfile_errors, is_file, is_remote, path_str
from albert_tf.preprocess.normalize import preprocess_text

WORD_START = "▁"
PAD, UNK, CLS, SEP, MASK = "<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"
REQUIRED_PIECES = (PAD, CLS, SEP, MASK)


def load_sp_model(sp_model_path: str | os.PathLike, vocab_size: int | None = None):
    """Loads a SentencePiece model and checks it holds ALBERT's special pieces (and, given
    `vocab_size`, exactly that many pieces): the one check of a SentencePiece model.

    `sp_model_path` is a local path or a tf.io.gfile URL (gs://...). Returns a
    `sentencepiece.SentencePieceProcessor`. Raises `TokenizerError` (one line naming the
    problem) if the file is missing, is not a SentencePiece model, lacks one of `<pad>`,
    `[CLS]`, `[SEP]`, `[MASK]`, or has another number of pieces than `vocab_size`.
    """
    path = path_str(sp_model_path)
    # A local model must not import TensorFlow (gfile_errors does): data-generation workers
    # load one each, and TensorFlow costs them ~700 MB of RSS and seconds of start-up.
    local = not is_remote(path)
    with (
        contextlib.nullcontext()
        if local
        else gfile_errors(TokenizerError, f"cannot read SentencePiece model {path}")
    ):
        if not is_file(path):
            raise TokenizerError(f"SentencePiece model {path} not found")
        if not local:
            import tensorflow as tf

            source = {"model_proto": tf.io.gfile.GFile(path, "rb").read()}
        else:
            source = {"model_file": path}
    try:
        sp = spm.SentencePieceProcessor(**source)
    except (RuntimeError, OSError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise TokenizerError(
            f"SentencePiece model {path} is corrupt or not a SentencePiece model ({first})"
        ) from None
    missing = [p for p in REQUIRED_PIECES if sp.id_to_piece(sp.piece_to_id(p)) != p]
    if missing:
        raise TokenizerError(
            f"SentencePiece model {path} lacks ALBERT's special piece(s) {', '.join(missing)}"
            " (train it with `albert-tf train-tokenizer`)"
        )
    if vocab_size is not None:
        _check_vocab_size(sp, path, vocab_size)
    return sp


def _check_vocab_size(sp, path: str, vocab_size: int) -> None:
    if sp.get_piece_size() != vocab_size:
        raise TokenizerError(
            f"SentencePiece model {path} has {sp.get_piece_size()} pieces but the config has "
            f"vocab_size {vocab_size}"
        )


def is_digit_comma_piece(piece: str) -> bool:
    """True for the pieces the original re-splits: longer than 1, ending in digit + ","."""
    return len(piece) > 1 and piece[-1] == "," and piece[-2].isdigit()


def resplit_rows(sp) -> list[list[int]]:
    """For every vocabulary id of SentencePieceProcessor `sp`, the ids it becomes after the
    digit-comma re-split: itself, or for a digit-comma piece the tokenization of the piece
    without "," and "▁", then ","; the table the in-graph tokenizers look ids up in."""
    comma_id = sp.piece_to_id(",")
    rows = []
    for i in range(sp.get_piece_size()):
        piece = sp.id_to_piece(i)
        row = [i]
        if is_digit_comma_piece(piece):
            row = sp.encode(piece[:-1].replace(WORD_START, "")) + [comma_id]
        rows.append(row)
    return rows


class AlbertTokenizer:
    """ALBERT's tokenizer: `preprocess_text`, SentencePiece, digit-comma re-split.

    The re-split (original `encode_pieces`): a piece such as "▁1," or "0," becomes the
    SentencePiece tokenization of the piece without its comma and without any "▁", followed by
    ",". The original then meant to drop a leading "▁" the re-tokenization added to a piece that
    had none, but it compares `str` with `bytes` under Python 3, so that never happens; the
    reference ids (the original code run under Python 3) keep that "▁", and so do we:
    "value 1,000" -> "▁value", "▁", "▁1", ",", "0", "00".

    Args:
      sp_model_path: the SentencePiece `.model` file.
      do_lower_case: lowercase in `preprocess_text` (must match how the model was trained).
    """

    def __init__(self, sp_model_path: str | os.PathLike, do_lower_case: bool = True):
        self.sp_model_path = Path(sp_model_path)
        self.do_lower_case = do_lower_case
        self.sp_model = load_sp_model(sp_model_path)
        self.vocab_size: int = self.sp_model.get_piece_size()
        self.pad_id: int = self.sp_model.piece_to_id(PAD)
        self.unk_id: int = self.sp_model.unk_id()
        self.cls_id: int = self.sp_model.piece_to_id(CLS)
        self.sep_id: int = self.sp_model.piece_to_id(SEP)
        self.mask_id: int = self.sp_model.piece_to_id(MASK)

    @property
    def model_proto(self) -> bytes:
        """The SentencePiece model as serialized bytes (what the in-graph tokenizers embed)."""
        return self.sp_model.serialized_model_proto()

    def _surface_pieces(self, text: str | bytes) -> list[str]:
        """SentencePiece pieces after the re-split; unknown text keeps its surface form."""
        text = preprocess_text(text, lower=self.do_lower_case)
        pieces = []
        for piece in self.sp_model.encode(text, out_type=str):
            if is_digit_comma_piece(piece):
                pieces.extend(
                    self.sp_model.encode(piece[:-1].replace(WORD_START, ""), out_type=str)
                )
                pieces.append(piece[-1])
            else:
                pieces.append(piece)
        return pieces

    def encode(self, text: str | bytes) -> list[int]:
        """Token ids of `text` (no [CLS]/[SEP] added). `bytes` are decoded as UTF-8 with
        invalid sequences replaced by U+FFFD."""
        return [self.sp_model.piece_to_id(p) for p in self._surface_pieces(text)]

    def tokenize(self, text: str | bytes) -> list[str]:
        """Vocabulary pieces of `text`; text outside the vocabulary appears as `"<unk>"`, so
        `tokenize(t) == convert_ids_to_tokens(encode(t))`."""
        return self.convert_ids_to_tokens(self.encode(text))

    def convert_tokens_to_ids(self, tokens: list[str]) -> list[int]:
        """Vocabulary ids of pieces; a piece not in the vocabulary maps to `unk_id`."""
        return [self.sp_model.piece_to_id(t) for t in tokens]

    def convert_ids_to_tokens(self, ids: list[int]) -> list[str]:
        """Pieces of vocabulary ids; raises TokenizerError on an id outside [0, vocab_size)."""
        bad = [i for i in ids if not 0 <= int(i) < self.vocab_size]
        if bad:
            raise TokenizerError(
                f"token id {bad[0]} is outside the vocabulary [0, {self.vocab_size})"
            )
        return [self.sp_model.id_to_piece(int(i)) for i in ids]

    def is_word_start(self, token_id: int) -> bool:
        """True if the piece begins a word (starts with "▁"); used for whole-word masking."""
        return self.sp_model.id_to_piece(int(token_id)).startswith(WORD_START)

    def __repr__(self) -> str:
        return (
            f"AlbertTokenizer({str(self.sp_model_path)!r}, do_lower_case={self.do_lower_case}, "
            f"vocab_size={self.vocab_size})"
        )


def as_tokenizer(
    sp_model: str | os.PathLike | AlbertTokenizer,
    do_lower_case: bool = True,
    vocab_size: int | None = None,
) -> AlbertTokenizer:
    """An `AlbertTokenizer` with `do_lower_case`: `sp_model` itself when it is one (a copy
    sharing its loaded SentencePiece model when its `do_lower_case` differs), else one loaded
    from the path `sp_model`; so a caller loads the model once and passes it on. Given
    `vocab_size`, TokenizerError unless the model has exactly that many pieces (as
    `load_sp_model`)."""
    if not isinstance(sp_model, AlbertTokenizer):
        tokenizer = AlbertTokenizer(sp_model, do_lower_case)
    elif sp_model.do_lower_case == do_lower_case:
        tokenizer = sp_model
    else:
        tokenizer = copy.copy(sp_model)
        tokenizer.do_lower_case = do_lower_case
    if vocab_size is not None:
        _check_vocab_size(tokenizer.sp_model, str(tokenizer.sp_model_path), vocab_size)
    return tokenizer
