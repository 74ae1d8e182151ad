"""In-graph ALBERT tokenizer from TensorFlow and tensorflow_text ops (no `py_function`).

`GraphTokenizer.tokenize` reproduces `AlbertTokenizer.encode` inside a TF graph, so it serializes
into a SavedModel and runs in `tf.data`:

1. invalid UTF-8 -> U+FFFD (`tf.strings.unicode_transcode`, as `bytes.decode(errors="replace")`);
2. whitespace collapse with Python's `str.split()` whitespace set (`tf.strings.regex_replace`);
3. NFKD (`tf_text.normalize_utf8`), then removal of characters with a non-zero canonical
   combining class, the set Python's `unicodedata.combining` reports;
4. `tf.strings.lower(encoding="utf-8")`: full Unicode lowercasing with Final_Sigma, like
   `str.lower` (case folding would turn "ß" into "ss"), applied between NULs, where it stops;
5. SentencePiece with `tf_text.FastSentencepieceTokenizer`, which finds the Viterbi's pieces
   of the `sentencepiece` package the original ran on (`tf_text.SentencepieceTokenizer` bundles
   an older SentencePiece). Where several orders of the same pieces score the same (runs of one
   repeated string: "0", "00" or "00", "0"), float32 rounding of the row's score decides, and
   the fast tokenizer decides otherwise after a character outside the vocabulary ("$5,000,"
   after an emoji), which it scores unlike `sentencepiece`; without one, its order is
   `sentencepiece`'s (measured: the reference strings, the property tests of
   tests/tokenizer/test_tokenizer_properties.py and tests/tokenizer/test_tokenizer_agreement.py). A
   row with an `<unk>` before such a run is tokenized again by `tf_text.SentencepieceTokenizer` on
   the byte-fallback model (each unknown character as its bytes, so each is scored), and
   `albert_tf.preprocess.graph_piece_order` puts its runs in `sentencepiece`'s order, redoing its Viterbi
   from the score where each run starts, as the ONNX graph does; then its bytes are merged
   into `<unk>` as `sentencepiece` merges unknown characters. Other rows cost two dozen
   vectorized ops; the redone Viterbi takes a loop step per character of a run (a run of
   100,000 "0" after an emoji takes seconds). Past about 15,000 pieces in one text
   `sentencepiece` rebases its
   running score, which is not redone (`albert_tf.preprocess.piece_order`): there tied orders may differ
   ("the 1,000 " 5,000 times differs from its 22,517th piece on, as before this step existed);
6. the original's digit-comma re-split as a table lookup: every vocabulary id maps to the ids it
   becomes (itself, or for a piece ending in a `str.isdigit()` character + "," the Python
   SentencePiece tokenization of the piece without "," and "▁", then ","), built in Python at
   construction with the same code as the reference. Unknown text keeps the `<unk>` id: it can
   only differ from the original if an out-of-vocabulary run ends in digit + ",", impossible
   when "," is in the vocabulary.

The character classes of steps 2 and 3 are built from Python's `unicodedata` tables. The ops of
steps 3 and 4 carry Unicode tables of their own: ICU's NFKD may know characters Python's does not
(Unicode 15 decompositions under Python 3.11's Unicode 14), `tf.strings.lower` may lack newer case
pairs (Unicode 14's). At construction the tokenizer asks both ops about every character where
that can happen and, for strings that hold one, keeps those characters out of NFKD and maps the
missing lowercases itself, so the graph equals `preprocess_text` of the Python that built it.
"""

from __future__ import annotations

import functools
import os
import unicodedata
from collections.abc import Callable

import tensorflow as tf
import tensorflow_text as tf_text

from albert_tf.preprocess.graph_piece_order import PieceOrder
from albert_tf.preprocess.normalize import code_points, re2_class_body
from albert_tf.preprocess.piece_order import byte_fallback_model, piece_tables
from albert_tf.preprocess.tokenizer import AlbertTokenizer, as_tokenizer, resplit_rows


@functools.cache
def _char_class(predicate: Callable[[str], bool]) -> str:
    """RE2 character-class body for all code points where `predicate`."""
    return re2_class_body(c for c in code_points() if predicate(c))


def _is_space(c: str) -> bool:
    return c.isspace()


def _is_combining(c: str) -> bool:
    return unicodedata.combining(c) != 0


@functools.cache
def _unknown_but_decomposed() -> str:
    """RE2 class body of the characters `unicodedata` does not know (category Cn, so
    `preprocess_text` keeps them) that `tf_text.normalize_utf8` changes under NFKD."""
    unknown = [c for c in code_points() if unicodedata.category(c) == "Cn"]
    nfkd = tf_text.normalize_utf8(tf.constant(unknown), "NFKD").numpy()
    return re2_class_body(c for c, n in zip(unknown, nfkd, strict=True) if n.decode() != c)


@functools.cache
def _lowercase_missing() -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Characters `str.lower` maps to one other character but `tf.strings.lower` keeps as they
    are: (their code points in ascending order, their lowercase code points)."""
    cased = [c for c in code_points() if c.lower() != c and len(c.lower()) == 1]
    lowered = tf.strings.lower(tf.constant(cased), encoding="utf-8").numpy()
    missing = [c for c, low in zip(cased, lowered, strict=True) if low.decode() == c]
    return tuple(ord(c) for c in missing), tuple(ord(c.lower()) for c in missing)


def _contains(text: tf.Tensor, char_class: str) -> tf.Tensor:
    """bool scalar: whether any string of `text` [N] holds a character of `char_class`."""
    return tf.reduce_any(tf.strings.regex_full_match(text, f"(?s).*[{char_class}].*"))


def _nfkd_keeping(text: tf.Tensor, char_class: str) -> tf.Tensor:
    """NFKD of tf.string [N] that leaves the characters of `char_class` as they are; each is
    cut out and the pieces between are normalized alone. To Python such a character is a
    starter with no decomposition, so NFKD of the whole equals the pieces' NFKD joined."""
    keep = f"[{char_class}]"
    pieces = tf_text.regex_split(text, keep, keep_delim_regex_pattern=keep)  # [N, (pieces)]
    flat = pieces.flat_values
    normalized = tf_text.normalize_utf8(flat, "NFKD")
    flat = tf.where(tf.strings.regex_full_match(flat, keep), flat, normalized)
    return tf.strings.reduce_join(pieces.with_flat_values(flat), axis=-1)  # [N]


def _map_code_points(text: tf.Tensor, sources: tf.Tensor, targets: tf.Tensor) -> tf.Tensor:
    """Replaces code point `sources[i]` (int32, ascending) by `targets[i]` in tf.string [N]."""
    chars = tf.strings.unicode_decode(text, "UTF-8")  # [N, (chars)]
    flat = chars.flat_values
    index = tf.minimum(tf.searchsorted(sources, flat), tf.size(sources) - 1)
    flat = tf.where(tf.gather(sources, index) == flat, tf.gather(targets, index), flat)
    return tf.strings.unicode_encode(chars.with_flat_values(flat), "UTF-8")


def _between_nuls(op: Callable[[tf.Tensor], tf.Tensor], text: tf.Tensor) -> tf.Tensor:
    """`op` (tf.string [M] -> [M]) applied to the NUL-free parts of tf.string [N] one by one:
    `tf.strings.lower` and `tf_text.regex_split` stop at the first NUL and drop the rest.

    Each part gets its NUL back as a suffix (the `separator` of `reduce_join` is an op attribute,
    cut at its NUL) and the last one is removed.
    """
    nul = tf.constant("\x00")
    parts = tf.strings.split(text, nul)  # [N, (parts)], at least one each
    done = tf.ragged.map_flat_values(op, parts) + nul
    joined = tf.strings.reduce_join(done, axis=-1)  # [N]
    length = tf.strings.length(joined)
    return tf.strings.substr(joined, tf.zeros_like(length), length - 1)


def _lower(text: tf.Tensor) -> tf.Tensor:
    # NUL is neither cased nor case-ignorable: cutting there keeps every Final_Sigma context.
    return _between_nuls(functools.partial(tf.strings.lower, encoding="utf-8"), text)


class GraphTokenizer(tf.Module):
    """ALBERT tokenization as TF ops; equal to `AlbertTokenizer.encode`.

    Args:
      sp_model: the SentencePiece `.model` file, or an `AlbertTokenizer` that has loaded it
        (not loaded again); the model's bytes are embedded in the graph.
      do_lower_case: lowercase as `str.lower` after normalization.

    Attributes: `vocab_size, pad_id, unk_id, cls_id, sep_id, mask_id` (Python ints).
    Raises `TokenizerError` for a missing or corrupt model or one lacking ALBERT's specials.
    """

    def __init__(
        self,
        sp_model: str | os.PathLike | AlbertTokenizer,
        do_lower_case: bool = True,
        name: str | None = None,
    ):
        super().__init__(name=name)
        reference = as_tokenizer(sp_model, do_lower_case)
        self.do_lower_case = do_lower_case
        self.vocab_size = reference.vocab_size
        self.pad_id = reference.pad_id
        self.unk_id = reference.unk_id
        self.cls_id = reference.cls_id
        self.sep_id = reference.sep_id
        self.mask_id = reference.mask_id
        model = reference.model_proto
        self._sp = tf_text.FastSentencepieceTokenizer(model)
        tables = piece_tables(model)
        self._order = None if tables is None else PieceOrder(tables)
        self._sp_bytes = (
            None if tables is None else tf_text.SentencepieceTokenizer(byte_fallback_model(model))
        )
        self._space_run = f"[{_char_class(_is_space)}]+"
        self._combining = f"[{_char_class(_is_combining)}]"
        self._unknown_but_decomposed = _unknown_but_decomposed()
        sources, targets = _lowercase_missing()
        self._lowercase_missing = re2_class_body(map(chr, sources))
        self._lowercase_sources = tf.constant(sources, tf.int32)
        self._lowercase_targets = tf.constant(targets, tf.int32)
        self._resplit = self._resplit_table(reference.sp_model)

    @staticmethod
    def _resplit_table(sp) -> tf.RaggedTensor:
        """int32 [V, (ids)]: what each vocabulary id becomes after the digit-comma re-split."""
        rows = resplit_rows(sp)
        return tf.RaggedTensor.from_row_lengths(
            tf.constant([i for row in rows for i in row], tf.int32),
            tf.constant([len(row) for row in rows], tf.int64),
        )

    def normalize(self, strings: tf.Tensor) -> tf.Tensor:
        """`preprocess_text` in graph: tf.string [...] -> tf.string [...] (same shape)."""
        text = tf.reshape(strings, [-1])  # [N]
        text = tf.strings.unicode_transcode(
            text, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD
        )
        text = tf.strings.regex_replace(text, self._space_run, " ")
        text = tf.strings.regex_replace(text, "^ | $", "")
        if self._unknown_but_decomposed:
            text = tf.cond(
                _contains(text, self._unknown_but_decomposed),
                lambda: _between_nuls(
                    functools.partial(_nfkd_keeping, char_class=self._unknown_but_decomposed),
                    text,
                ),
                lambda: tf_text.normalize_utf8(text, "NFKD"),
            )
        else:
            text = tf_text.normalize_utf8(text, "NFKD")
        text = tf.strings.regex_replace(text, self._combining, "")
        if self.do_lower_case:
            text = _lower(text)
            if self._lowercase_missing:
                text = tf.cond(
                    _contains(text, self._lowercase_missing),
                    lambda: _map_code_points(
                        text, self._lowercase_sources, self._lowercase_targets
                    ),
                    lambda: text,
                )
        return tf.reshape(text, tf.shape(strings))

    def tokenize(self, strings: tf.Tensor) -> tf.RaggedTensor:
        """Token ids (no [CLS]/[SEP]): tf.string [B] -> tf.RaggedTensor int32 [B, (tokens)].

        A scalar string gives an int32 vector [tokens]. Empty and whitespace-only strings give
        no tokens; a batch of zero strings gives shape [0, (0)]. Runs as one graph also when
        called eagerly.
        """
        strings = tf.convert_to_tensor(strings, dtype=tf.string)
        if strings.shape.rank == 0:
            return self.tokenize(strings[tf.newaxis])[0]
        return self._tokenize_batch(strings)

    # Plain Python around explicit tf.cond and tf.while_loop: autograph would only spend
    # seconds of every trace converting it and the tensorflow_text code it calls.
    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
    def _tokenize_batch(self, strings: tf.Tensor) -> tf.RaggedTensor:
        text = self.normalize(strings)
        ids = self._sp.tokenize(text).with_row_splits_dtype(tf.int64)  # [B, (P)]
        if self._order is not None:
            ids = self._in_order(text, ids)
        per_piece = tf.gather(self._resplit, ids.flat_values)  # [N, (t)]
        nested = tf.RaggedTensor.from_row_splits(per_piece, ids.row_splits)  # [B, (P), (t)]
        return nested.merge_dims(1, 2)  # [B, (T)]

    def _in_order(self, text: tf.Tensor, ids: tf.RaggedTensor) -> tf.RaggedTensor:
        """The fast tokenizer's ids [B, (P)] of normalized `text` [B] with every run of one
        repeated string in `sentencepiece`'s order (step 5 of the module docstring): rows with
        an `<unk>` before a run are tokenized again and ordered, the others kept."""
        again = self._order.unknown_before_run(ids, self.unk_id)  # [B]

        def with_unknowns_counted():
            rows, kept = tf.where(again)[:, 0], tf.where(~again)[:, 0]
            redone = self._sp_bytes.tokenize(tf.gather(text, rows))  # [R, (P)]
            redone = self._merge_unknown_bytes(self._order(redone.with_row_splits_dtype(tf.int64)))
            merged = tf.concat([tf.gather(ids, kept), redone], 0)
            merged = tf.gather(merged, tf.argsort(tf.concat([kept, rows], 0)))  # [B, (P)]
            return merged.flat_values, merged.row_splits

        values, splits = tf.cond(
            tf.reduce_any(again),
            with_unknowns_counted,
            lambda: (ids.flat_values, ids.row_splits),
        )
        return tf.RaggedTensor.from_row_splits(values, splits, validate=False)

    def _merge_unknown_bytes(self, ids: tf.RaggedTensor) -> tf.RaggedTensor:
        """Ids of the byte-fallback model [B, (P)] -> vocabulary ids: each run of byte pieces
        (ids >= vocab_size, an unknown character's UTF-8 bytes) becomes one `<unk>`."""
        flat = ids.flat_values
        is_byte = flat >= self.vocab_size
        rows = ids.value_rowids()
        after_byte = tf.concat([[False], is_byte[:-1] & (rows[1:] == rows[:-1])], 0)
        keep = ids.with_flat_values(~(is_byte & after_byte))
        return tf.ragged.boolean_mask(
            ids.with_flat_values(tf.where(is_byte, self.unk_id, flat)), keep
        )
