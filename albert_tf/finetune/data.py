"""Readers of the sentence (pair) file formats, and the example types the featurizers share.

Sentence (pair) classification and regression read TSV, CSV and JSONL (`read_text_file`); columns
chosen by name or 0-based index. A TSV is read the way its writer meant it (`quoting`): GLUE's
TSVs never quote (a `"` is text), files from Python's `csv` module or pandas quote fields that
hold a tab, a quote or a line break.

The other formats are read in their task's module or package: SQuAD v1.1 / v2.0 JSON
(`tasks.squad.data.read_squad`), RACE JSON (`tasks.multiple_choice.read_race`), CoNLL-2003 style
tagging (`tasks.tag.read_conll`). `ChoiceExample` and `TagExample` stay here: `features` and
`windows` encode them, and the tasks import those modules (the types in a task would close a
circle).

Every reader raises `DataError` naming the file and 1-based line of a malformed record.
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from albert_tf.errors import DataError
from albert_tf.finetune.settings import QUOTINGS

# Header names of the GLUE tasks' text and label columns, tried in order when none are given
# (docs/scripts/column_table.py writes them into the fine-tuning guide).
TEXT_COLUMNS = (
    ("sentence1", "sentence2"),
    ("question1", "question2"),
    ("#1 String", "#2 String"),
    ("question", "sentence"),
    ("text_a", "text_b"),
    ("premise", "hypothesis"),
    ("sentence", None),
    ("text", None),
)
LABEL_COLUMNS = ("label", "gold_label", "is_duplicate", "Quality", "score", "rating")
ID_COLUMNS = ("id", "idx", "index", "guid", "pairID")  # carried into `predict`'s records
JSONL_KEYS = ("text", "label")  # a JSONL file's text and label keys unless given


@dataclass(frozen=True)
class TextExample:
    """One sentence or sentence pair; `label` is a str (classify), float (regress) or None."""

    text_a: str
    text_b: str | None
    label: str | float | None
    source: str  # "file:line" for error messages
    id: str | None = None  # the record's id column (ID_COLUMNS), if the file has one


@dataclass(frozen=True)
class ChoiceExample:
    """One multiple-choice question (RACE); `label` is the index of the right option."""

    qid: str
    context: str
    question: str
    choices: tuple[str, ...]
    label: int | None
    source: str


@dataclass(frozen=True)
class TagExample:
    """One sentence of words with one tag per word (None for unlabelled input)."""

    words: tuple[str, ...]
    tags: tuple[str, ...] | None
    source: str


def check_file(path: str | os.PathLike) -> Path:
    """`path` as a Path; DataError if it is not an existing file."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"input file {path} does not exist")
    return path


def _column_index(header: list[str] | None, column: str | None, path: Path) -> int | None:
    """The 0-based index of `column` (a header name or an integer string)."""
    if column is None:
        return None
    if column.lstrip("-").isdigit():
        return int(column)
    if header is None or column not in header:
        raise DataError(f"{path}: no column {column!r} (columns: {header})")
    return header.index(column)


def _guess_columns(header: list[str], path: Path) -> tuple[str, str | None]:
    """The text (and pair) column names recognised in `header`."""
    for a, b in TEXT_COLUMNS:
        if a in header and (b is None or b in header):
            return a, b
    raise DataError(
        f"{path}: cannot tell the text column from the first line {header}; pass --text-column "
        "NAME (the recognised names are in the fine-tuning guide), or, if that line is data "
        "rather than a header, --no-header --text-column INDEX"
    )


def _guess_label(
    header: list[str] | None, width: int, used: list[int | None], require_labels: bool
) -> int | None:
    """The label column: a recognised header name, else, in a file that must have labels and
    has no header, the one column that is not text; None when neither tells."""
    if header is not None:
        name = next((c for c in LABEL_COLUMNS if c in header), None)
        return None if name is None else header.index(name)
    rest = [i for i in range(width) if i not in used]
    return rest[0] if len(rest) == 1 and require_labels else None


_CSV_WRITERS = [
    (ending, quoting) for ending in ("\n", "\r\n") for quoting in (csv.QUOTE_MINIMAL, csv.QUOTE_ALL)
]


def _plain_records(text: str, delimiter: str) -> list[tuple[int, list[str]]]:
    """(line number, fields) of every non-blank line; no quoting (GLUE: MNLI holds bare quotes)."""
    records = []
    for number, line in enumerate(io.StringIO(text, newline=""), 1):
        line = line.rstrip("\r\n")
        if line:
            records.append((number, line.split(delimiter)))
    return records


def _quoted_records(text: str, delimiter: str, path: Path) -> list[tuple[int, list[str]]]:
    """(first line, fields) of every record under standard quoting, blank lines as []."""
    # A long document can be one field past csv's default limit of 128 KiB (a guard against
    # runaway quotes, which `strict` and the field count check catch here).
    csv.field_size_limit(max(csv.field_size_limit(), 2**31 - 1))
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)
    records, line = [], 1
    try:
        for row in reader:
            records.append((line, row))
            line = reader.line_num + 1
    except csv.Error as e:
        raise DataError(f"{path}:{line}: malformed quoted field ({e}); see --quoting") from None
    return records


def _written_by_csv(rows: list[list[str]], text: str, delimiter: str) -> bool:
    """Whether Python's csv writer (as pandas uses it) gives back exactly `text` from `rows`."""
    for ending, quoting in _CSV_WRITERS:
        out = io.StringIO(newline="")
        csv.writer(out, delimiter=delimiter, lineterminator=ending, quoting=quoting).writerows(rows)
        if out.getvalue() in (text, text + ending):
            return True
    return False


def _delimited_records(path: Path, quoting: str) -> list[tuple[int, list[str]]]:
    """(line number, fields) of the records of a .csv (comma) or any other (tab) file.

    `quoting` "csv": standard quoting; "none": no quoting; "auto": standard quoting for .csv,
    and for a TSV exactly when a csv writer gives the file back from its quoted reading (so a
    GLUE file, whose bare quotes a writer would have escaped, reads as today).
    """
    if quoting not in QUOTINGS:
        raise DataError(f"quoting must be one of {', '.join(QUOTINGS)}, got {quoting!r}")
    delimiter = "," if path.suffix.lower() == ".csv" else "\t"
    with open(path, encoding="utf-8", newline="") as f:
        try:
            text = f.read()
        except UnicodeDecodeError:
            raise DataError(f"{path}: not UTF-8 text") from None
    if quoting == "auto" and delimiter == ",":
        quoting = "csv"
    if quoting == "none" or (quoting == "auto" and '"' not in text):
        return _plain_records(text, delimiter)
    try:
        records = _quoted_records(text, delimiter, path)
    except DataError:
        if quoting == "csv":
            raise
        return _plain_records(text, delimiter)
    if quoting == "auto" and not _written_by_csv([row for _, row in records], text, delimiter):
        return _plain_records(text, delimiter)
    return [(line, row) for line, row in records if row]


def _json_records(path: Path) -> Iterator[tuple[int, dict]]:
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise DataError(f"{path}:{number}: invalid JSON ({e.msg})") from None
            if not isinstance(row, dict):
                raise DataError(f"{path}:{number}: expected a JSON object per line")
            yield number, row


def read_text_file(
    path: str | os.PathLike,
    task: str = "classify",
    text_column: str | None = None,
    text_pair_column: str | None = None,
    label_column: str | None = None,
    has_header: bool = True,
    require_labels: bool = True,
    quoting: str = "auto",
) -> list[TextExample]:
    """Reads sentence (pair) examples from a TSV, CSV or JSONL file.

    Columns are header names or 0-based indices; without any, the GLUE header names are
    recognized (sentence, sentence1/sentence2, question/sentence, question1/question2, ...).
    `task` "regress" parses labels as floats. With `require_labels` a row without a label is an
    error; otherwise missing labels are None. `quoting` ("auto", "csv", "none") says how TSV/CSV
    fields are quoted (see `_delimited_records`). Every record must have as many fields as the
    header (or, without one, the first record); DataError names the line of one that does not.
    """
    path = check_file(path)
    if path.suffix.lower() in (".jsonl", ".json"):
        return _read_jsonl(path, task, text_column, text_pair_column, label_column, require_labels)
    records = _delimited_records(path, quoting)
    if not records:
        return []
    header, width_of = None, f"line {records[0][0]}"
    if has_header:
        header = [h.strip() for h in records.pop(0)[1]]
        width_of = "the header"
        if text_column is None:
            text_column, guessed_pair = _guess_columns(header, path)
            text_pair_column = text_pair_column or guessed_pair
    elif text_column is None:
        raise DataError(f"{path}: a file without header needs --text-column INDEX")
    if not records:
        return []
    width = len(header) if header is not None else len(records[0][1])
    indices = [
        _column_index(header, c, path) for c in (text_column, text_pair_column, label_column)
    ]
    if max(i for i in indices if i is not None) >= width:
        raise DataError(f"{path}: column index past the {width} fields of {width_of}")
    if indices[2] is None:
        indices[2] = _guess_label(header, width, indices[:2], require_labels)
        if indices[2] is None and require_labels:
            names = f"none of {', '.join(LABEL_COLUMNS)} in {header}" if header else "no header"
            raise DataError(f"{path}: which column is the label? ({names}); pass --label-column")
    id_index = next((header.index(c) for c in ID_COLUMNS if header and c in header), None)
    examples = []
    for number, row in records:
        source = f"{path}:{number}"
        if len(row) != width:
            raise DataError(f"{source}: expected {width} fields like {width_of}, got {len(row)}")
        text, pair, label = (row[i] if i is not None else None for i in indices)
        label = _label(label, task, require_labels, source)
        row_id = None if id_index is None else row[id_index]
        examples.append(TextExample(text, pair, label, source, row_id))
    return examples


def _read_jsonl(
    path: Path,
    task: str,
    text_column: str | None,
    text_pair_column: str | None,
    label_column: str | None,
    require_labels: bool,
) -> list[TextExample]:
    text_column = text_column or JSONL_KEYS[0]
    label_column = label_column or JSONL_KEYS[1]
    examples = []
    for number, row in _json_records(path):
        source = f"{path}:{number}"
        text = row.get(text_column)
        pair = row.get(text_pair_column) if text_pair_column else None
        if text is None or (text_pair_column and pair is None):
            raise DataError(f"{source}: missing key {text_column!r} or {text_pair_column!r}")
        label = _label(
            row.get(label_column) if label_column else None, task, require_labels, source
        )
        row_id = next((str(row[k]) for k in ID_COLUMNS if k in row), None)
        pair = None if pair is None else str(pair)
        examples.append(TextExample(str(text), pair, label, source, row_id))
    return examples


def _label(label: object, task: str, require_labels: bool, source: str) -> str | float | None:
    """A record's label: stripped text (classify), a float (regress), None when missing."""
    if isinstance(label, str):
        label = label.strip()
    if label in (None, ""):
        if require_labels:
            raise DataError(f"{source}: missing label")
        return None
    if task == "regress":
        try:
            return float(label)
        except (TypeError, ValueError):
            raise DataError(f"{source}: label {label!r} is not a number") from None
    return str(label)


def label_list(labels: Sequence[str | None], path: str | os.PathLike) -> list[str]:
    """Sorted distinct labels of a training set; DataError if there are fewer than two."""
    distinct = sorted({label for label in labels if label is not None})
    if len(distinct) < 2:
        raise DataError(f"{path}: need at least two distinct labels, found {distinct}")
    return distinct


def check_labels(labels: Sequence[tuple[str, str | None]], known: Sequence[str]) -> None:
    """Raises DataError at the first (source, label) whose label is not in `known`."""
    known_set = set(known)
    for source, label in labels:
        if label is not None and label not in known_set:
            raise DataError(
                f"{source}: label {label!r} was not seen in training (labels: {', '.join(known)})"
            )
