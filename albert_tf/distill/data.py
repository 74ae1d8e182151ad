"""The unlabeled text `distill` reads, and the student's token ids of it.

`--unlabeled` takes files or globs: plain text (one sentence or text a line; blank lines are
skipped) or a `.tsv` / `.csv` with a header row, whose text column is `--text-column` or the
first of TEXT_COLUMNS the header has.
"""

from __future__ import annotations

import csv
import hashlib
from pathlib import Path

import numpy as np

from albert_tf.errors import DataError
from albert_tf.preprocess.pretraining_data.documents import resolve_inputs

TEXT_COLUMNS = ("text", "sentence", "sentence1", "review", "content")


def _table_texts(path: Path, text_column: str | None) -> list[str]:
    delimiter = "\t" if path.suffix.lower() == ".tsv" else ","
    with open(path, encoding="utf-8", newline="") as f:
        rows = csv.reader(f, delimiter=delimiter)
        header = next(rows, None)
        if header is None:
            return []
        names = [name.strip().lower() for name in header]
        wanted = [text_column.lower()] if text_column else list(TEXT_COLUMNS)
        found = [names.index(name) for name in wanted if name in names]
        if not found:
            raise DataError(
                f"--unlabeled {path}: no text column (header {header}; name one with "
                f"--text-column, default: the first of {', '.join(TEXT_COLUMNS)})"
            )
        column = found[0]
        return [row[column].strip() for row in rows if len(row) > column and row[column].strip()]


def read_unlabeled(patterns: list[str], text_column: str | None = None) -> list[str]:
    """Every text of the files `patterns` name, in file then line order.

    Raises DataError (one line) when a pattern matches no file, a file is not UTF-8, a table has
    no text column, or no text is found at all.
    """
    texts: list[str] = []
    for path in resolve_inputs(list(patterns)):
        try:
            if path.suffix.lower() in (".tsv", ".csv"):
                texts.extend(_table_texts(path, text_column))
            else:
                lines = path.read_text(encoding="utf-8").splitlines()
                texts.extend(line.strip() for line in lines if line.strip())
        except UnicodeDecodeError as e:
            raise DataError(f"--unlabeled {path} is not UTF-8 text: {e}") from None
    if not texts:
        raise DataError(f"--unlabeled {' '.join(patterns)} holds no text")
    return texts


def texts_digest(texts: list[str]) -> str:
    """SHA-256 of the texts in order (what a teacher cache was computed on)."""
    digest = hashlib.sha256()
    for text in texts:
        digest.update(text.encode("utf-8") + b"\n")
    return digest.hexdigest()


def token_ids(tokenizer, texts: list[str], max_seq_length: int) -> list[np.ndarray]:
    """int32 `[CLS] pieces [SEP]` of each text, cut to `max_seq_length` (pieces dropped from the
    end, [SEP] kept). `tokenizer` is an `AlbertTokenizer`."""
    keep = max_seq_length - 2
    cls, sep = tokenizer.cls_id, tokenizer.sep_id
    return [np.array([cls, *tokenizer.encode(t)[:keep], sep], np.int32) for t in texts]


def pad_batch(rows: list[np.ndarray], length: int | None = None) -> dict[str, np.ndarray]:
    """The encoder inputs of `rows` (int32 [B, S], S the longest row or `length`): ids padded with
    0, `input_mask` 1 on tokens, `input_type_ids` 0."""
    width = length or max(len(r) for r in rows)
    ids = np.zeros([len(rows), width], np.int32)
    mask = np.zeros([len(rows), width], np.int32)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = row
        mask[i, : len(row)] = 1
    return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": np.zeros_like(ids)}


def encode_texts(tokenizer, texts: list[str], max_seq_length: int) -> dict[str, np.ndarray]:
    """Encoder inputs of `texts` as one text each, int32 [N, max_seq_length]."""
    return pad_batch(token_ids(tokenizer, texts, max_seq_length), max_seq_length)
