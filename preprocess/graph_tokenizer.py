"""In-graph ALBERT tokenizer from TensorFlow and tensorflow_text ops (no `py_function`).

`GraphTokenizer.tokenize` reproduces `AlbertTokenizer.encode` inside a TF graph, so it serializes
into a SavedModel and runs in `tf.data`:

1. invalid UTF-8 -> U+FFFD (`tf.strings.unicode_transcode`, as `bytes.decode(errors="replace")`);
2. whitespace collapse with Python's `str.split()` whitespace set (`tf.strings.regex_replace`);
3. NFKD (`tf_text.normalize_utf8`), then removal of characters with a non-zero canonical
   combining class, the set Python's `unicodedata.combining` reports;
4. `tf.strings.lower(encoding="utf-8")`: full Unicode lowercasing with Final_Sigma, like
   `str.lower` (case folding would turn "ß" into "ss"), applied between NULs, where it stops;
5. SentencePiece with `tf_text.FastSentencepieceTokenizer`. `tf_text.SentencepieceTokenizer`
   bundles an older SentencePiece whose Viterbi breaks ties between equal-score segmentations
   differently from the `sentencepiece` package the original ran on (1 of the 166 reference
   strings, a run of dashes, differs); the fast tokenizer agrees on all of them;
6. the original's digit-comma re-split as a table lookup: every vocabulary id maps to the ids it
   becomes (itself, or for a piece ending in a `str.isdigit()` character + "," the Python
   SentencePiece tokenization of the piece without "," and "▁", then ","), built in Python at
   construction with the same code as the reference. Unknown text keeps the `<unk>` id: it can
   only differ from the original if an out-of-vocabulary run ends in digit + ",", impossible
   when "," is in the vocabulary.

The character classes of steps 2 and 3 are built from Python's `unicodedata` tables, so the
graph agrees with `preprocess_text` on the same Unicode version.
"""

from __future__ import annotations

import functools
import os
import sys
import unicodedata
from collections.abc import Callable

import tensorflow as tf
import tensorflow_text as tf_text

from preprocess.tokenizer import (
    CLS,
    MASK,
    PAD,
    SEP,
    WORD_START,
    is_digit_comma_piece,
    load_sp_model,
)


@functools.cache
def _char_class(predicate: Callable[[str], bool]) -> str:
    """RE2 character-class body (`\\x{A}-\\x{B}...`) for all code points where `predicate`."""
    ranges: list[tuple[int, int]] = []
    for cp in range(sys.maxunicode + 1):
        if 0xD800 <= cp <= 0xDFFF or not predicate(chr(cp)):
            continue
        if ranges and ranges[-1][1] == cp - 1:
            ranges[-1] = (ranges[-1][0], cp)
        else:
            ranges.append((cp, cp))
    return "".join(f"\\x{{{a:X}}}" if a == b else f"\\x{{{a:X}}}-\\x{{{b:X}}}" for a, b in ranges)


def _is_space(c: str) -> bool:
    return c.isspace()


def _is_combining(c: str) -> bool:
    return unicodedata.combining(c) != 0


def _lower_utf8(text: tf.Tensor) -> tf.Tensor:
    """`str.lower` of UTF-8 strings: tf.string [...] -> tf.string [...] (same shape).

    `tf.strings.lower` stops at the first NUL and drops the rest of the string, so it lowercases
    the NUL-free parts one by one. NUL is neither cased nor case-ignorable, so the split cannot
    change the Final_Sigma context of any sigma. Each part gets its NUL back as a suffix (the
    `separator` of `reduce_join` is an op attribute, cut at its NUL) and the last one is removed.
    """
    nul = tf.constant("\x00")
    parts = tf.strings.split(tf.reshape(text, [-1]), nul)  # [N, (parts)], at least one each
    lowered = tf.ragged.map_flat_values(tf.strings.lower, parts, encoding="utf-8") + nul
    joined = tf.strings.reduce_join(lowered, axis=-1)  # [N]
    length = tf.strings.length(joined)
    lowered = tf.strings.substr(joined, tf.zeros_like(length), length - 1)
    return tf.reshape(lowered, tf.shape(text))


class GraphTokenizer(tf.Module):
    """ALBERT tokenization as TF ops; equal to `AlbertTokenizer.encode`.

    Args:
      sp_model_path: the SentencePiece `.model` file; its bytes are embedded in the graph.
      do_lower_case: lowercase as `str.lower` after normalization.

    Attributes: `vocab_size, pad_id, unk_id, cls_id, sep_id, mask_id` (Python ints).
    Raises `TokenizerError` for a missing or corrupt model or one lacking ALBERT's specials.
    """

    def __init__(
        self, sp_model_path: str | os.PathLike, do_lower_case: bool = True, name: str | None = None
    ):
        super().__init__(name=name)
        sp = load_sp_model(sp_model_path)
        self.do_lower_case = do_lower_case
        self.vocab_size = sp.get_piece_size()
        self.pad_id = sp.piece_to_id(PAD)
        self.unk_id = sp.unk_id()
        self.cls_id = sp.piece_to_id(CLS)
        self.sep_id = sp.piece_to_id(SEP)
        self.mask_id = sp.piece_to_id(MASK)
        with open(sp_model_path, "rb") as f:
            self._sp = tf_text.FastSentencepieceTokenizer(f.read())
        self._space_run = f"[{_char_class(_is_space)}]+"
        self._combining = f"[{_char_class(_is_combining)}]"
        self._resplit = self._resplit_table(sp)

    @staticmethod
    def _resplit_table(sp) -> tf.RaggedTensor:
        """int32 [V, (ids)]: what each vocabulary id becomes after the digit-comma re-split."""
        comma_id = sp.piece_to_id(",")
        values: list[int] = []
        lengths: list[int] = []
        for i in range(sp.get_piece_size()):
            piece = sp.id_to_piece(i)
            row = [i]
            if is_digit_comma_piece(piece):
                row = sp.encode(piece[:-1].replace(WORD_START, "")) + [comma_id]
            values.extend(row)
            lengths.append(len(row))
        return tf.RaggedTensor.from_row_lengths(
            tf.constant(values, tf.int32), tf.constant(lengths, tf.int64)
        )

    def normalize(self, strings: tf.Tensor) -> tf.Tensor:
        """`preprocess_text` in graph: tf.string [...] -> tf.string [...] (same shape)."""
        text = tf.strings.unicode_transcode(
            strings, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD
        )
        text = tf.strings.regex_replace(text, self._space_run, " ")
        text = tf.strings.regex_replace(text, "^ | $", "")
        text = tf_text.normalize_utf8(text, "NFKD")
        text = tf.strings.regex_replace(text, self._combining, "")
        if self.do_lower_case:
            text = _lower_utf8(text)
        return text

    def tokenize(self, strings: tf.Tensor) -> tf.RaggedTensor:
        """Token ids (no [CLS]/[SEP]): tf.string [B] -> tf.RaggedTensor int32 [B, (tokens)].

        A scalar string gives an int32 vector [tokens]. Empty and whitespace-only strings give
        no tokens; a batch of zero strings gives shape [0, (0)].
        """
        strings = tf.convert_to_tensor(strings, dtype=tf.string)
        if strings.shape.rank == 0:
            return self.tokenize(strings[tf.newaxis])[0]
        ids = self._sp.tokenize(self.normalize(strings))  # [B, (P)]
        per_piece = tf.gather(self._resplit, ids.flat_values)  # [N, (t)]
        splits = tf.cast(ids.row_splits, tf.int64)
        nested = tf.RaggedTensor.from_row_splits(per_piece, splits)  # [B, (P), (t)]
        return nested.merge_dims(1, 2)  # [B, (T)]
