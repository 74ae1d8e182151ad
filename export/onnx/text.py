"""ALBERT's tokenization and packing as an ONNX graph: raw strings in, encoder inputs out.

Operators are standard ONNX plus onnxruntime-extensions' string and SentencePiece operators
(domain `ai.onnx.contrib`; register `onnxruntime_extensions.get_library_path()` with the
session). The steps are those of `albert_tf.preprocess.normalize.preprocess_text` and
`albert_tf.preprocess.tokenizer.AlbertTokenizer`:

1. whitespace collapse with Python's `str.split()` whitespace set (`StringRegexReplace`, RE2);
2. NFKD, then removal of characters with a non-zero combining class. No operator does NFKD, so
   it is a table: each character that NFKD-then-strip changes is cut out of the text
   (`StringRegexSplitWithOffsets`), mapped to what Python makes of it (`StringMapping`) and the
   pieces are joined again. Decomposition is per character and the canonical reordering only
   moves combining marks, which are then dropped, so per character equals whole string;
3. lowercase as `str.lower`, also a per-character table, after the one context-dependent rule,
   Final_Sigma, as a regular expression over the cased and case-ignorable sets that Python's
   own `str.lower` reveals when asked about each character;
4. SentencePiece (`SentencepieceTokenizer`) on the model with byte fallback added, so an
   unknown character comes out as its UTF-8 bytes and its characters can be counted;
5. the order of tied pieces: onnxruntime-extensions bundles an older SentencePiece that finds
   the same pieces as the `sentencepiece` package but may order pieces of one repeated string
   otherwise (of the fixture strings, one run of dashes; of generated strings of such runs,
   about a third). `albert_tf.export.onnx.piece_order` redoes `sentencepiece`'s float32 Viterbi inside
   each such run, from the row's score where the run starts; then each run of byte pieces
   becomes one `<unk>`, as `sentencepiece` merges unknown characters;
6. the digit-comma re-split as a table lookup: every id maps to the ids it becomes (a padded
   [V, K] table, `Gather` + `Compress`), built with the reference's code;
7. packing: `[CLS] A [SEP] (B [SEP])`, round-robin trimming, padding (to `seq_length`, or for
   a classifier to the batch's longest row), int32 [B, S],
   as `albert_tf.preprocess.preprocess_model.bert_pack_inputs`.
   For a windowed classifier, the last segment is first cut into windows
   (`albert_tf.export.onnx.windows`) and the packing packs the rows of the real windows.

The tables are built from the Python that runs the export, so the graph equals
`preprocess_text` of that Python's Unicode database. Known differences from the reference
(tests/export/test_onnx_export.py asserts the ids of the fixture strings and of generated runs):

- the run order follows `sentencepiece` 0.2.2's Viterbi (float32 sums left to right, the
  longer last piece on exact ties, user-defined pieces scored 0.1 per extra byte). That
  version also rebases its running score when it passes +-100,000 (past ~15,000 pieces in
  one text), which the graph does not; its ids were still equal on 200 texts of 10,000 to
  32,000 pieces ending in tied runs, but equality there is measured, not proven;
- ONNX Runtime's string tensors end at a NUL character, and input must be valid Unicode (a
  Python `str` without lone surrogates): bytes with invalid UTF-8 cannot be given.
"""

from __future__ import annotations

import functools
import os
import unicodedata
from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, compose, helper, numpy_helper

from albert_tf.export.encoder import ENCODER_INPUTS
from albert_tf.export.onnx.encoder import OPSET, GraphBuilder
from albert_tf.export.onnx.piece_order import order_runs, shifted
from albert_tf.export.onnx.ragged import gather_rows, row_starts
from albert_tf.export.onnx.windows import WINDOW_PRESENT, Windows, window_segments
from albert_tf.preprocess.normalize import code_points, re2_class_body
from albert_tf.preprocess.piece_order import byte_fallback_model, piece_tables
from albert_tf.preprocess.tokenizer import (
    CLS,
    PAD,
    SEP,
    AlbertTokenizer,
    as_tokenizer,
    resplit_rows,
)

CONTRIB = "ai.onnx.contrib"
TEXT_INPUTS = ("text", "text_pair")


def _strip_accents(c: str) -> str:
    """What `preprocess_text` (without lowercasing) makes of one character."""
    return "".join(d for d in unicodedata.normalize("NFKD", c) if not unicodedata.combining(d))


@functools.cache
def _tables(below: int | None = None) -> dict[str, object]:
    """The character tables of steps 1-3, from this Python's `str` and `unicodedata`; with
    `below`, of the code points under it only (128: the tables an all-ASCII batch needs)."""
    chars = [c for c in code_points() if below is None or ord(c) < below]
    strip = {c: _strip_accents(c) for c in chars}
    lower = {c: c.lower() for c in chars}
    # Final_Sigma as str.lower applies it: "Σ" becomes "ς" after a cased letter (with any
    # case-ignorable characters between) and not before one. Python says which characters are
    # cased (c + "Σ" ends in "ς") and case-ignorable ("A" + c + "Σ" ends in "ς", c not cased).
    cased = [c for c in chars if (c + "Σ").lower().endswith("ς")]
    cased_set = set(cased)
    ignorable = [c for c in chars if c not in cased_set and ("A" + c + "Σ").lower().endswith("ς")]
    return dict(
        space=re2_class_body(c for c in chars if c.isspace()),
        strip={c: s for c, s in strip.items() if s != c},
        lower={c: s for c, s in lower.items() if s != c},
        cased=re2_class_body(cased),
        ignorable=re2_class_body(ignorable),
    )


def _string(g: GraphBuilder, name: str, value: str) -> str:
    return g.constant(name, np.array([value], dtype=object), object)


def _map_chars(g: GraphBuilder, text: str, mapping: dict[str, str], prefix: str) -> str:
    """tf.string [N] with every character that is a key of `mapping` replaced by its value."""
    dropped = [c for c, v in mapping.items() if not v]
    if dropped:
        # StringMapping's table cannot hold an empty value: characters that vanish are removed
        # by one regular expression instead.
        text = _regex_replace(g, text, f"[{re2_class_body(dropped)}]", "", f"{prefix}/drop")
    mapping = {c: v for c, v in mapping.items() if v}
    if any(ch in "\t\n" for item in mapping.items() for ch in "".join(item)):
        raise ValueError("a character table entry holds a tab or newline")
    pattern = _string(g, f"{prefix}/pattern", f"([{re2_class_body(mapping)}])")
    pieces, _, _, splits = g.multi_node(
        "StringRegexSplitWithOffsets", [text, pattern, pattern], prefix, 4, domain=CONTRIB
    )  # pieces [P]: unchanged runs and single characters to map; row splits [N + 1]
    table = "\n".join(f"{k}\t{v}" for k, v in mapping.items())
    mapped = g.multi_node("StringMapping", [pieces], prefix, 1, domain=CONTRIB, map=table)[0]
    return _join_rows(g, mapped, _row_lengths(g, splits, prefix), prefix)


def _row_lengths(g: GraphBuilder, splits: str, prefix: str) -> str:
    """Row splits int64 [N + 1] -> row lengths [N]."""
    ends = g.node("Slice", [splits, "const/ones_1", "const/max_1"], prefix)
    starts = g.node("Slice", [splits, "const/zeros_1", "const/minus_ones_1"], prefix)
    return g.node("Sub", [ends, starts], prefix)


def _dense_rows(
    g: GraphBuilder, values: str, counts: str, pad: str, prefix: str
) -> tuple[str, str]:
    """Flat `values` [P] with row lengths `counts` int64 [N] -> (dense [N, M] padded with `pad`,
    valid bool [N, M]), M the longest row."""
    longest = g.node("ReduceMax", [counts], prefix, keepdims=0)
    longest = g.node("Max", [longest, "const/zero"], prefix)
    columns = g.node("Range", ["const/zero", longest, "const/one_int"], prefix)  # [M]
    starts = row_starts(g, counts, "const/zero", prefix)
    return gather_rows(g, values, starts, counts, columns, pad, "const/axes_1", prefix)


def _join_rows(g: GraphBuilder, values: str, counts: str, prefix: str) -> str:
    """Concatenates the strings of each row of a ragged string tensor: flat `values` [P] with
    `counts` int64 [N] -> [N] (an empty row gives "")."""
    # StringJoin crashes the process (SIGSEGV, onnxruntime-extensions 0.15) on zero rows,
    # [0, M]. One more, empty, row is joined and cut off again, so that a `text_pair` of
    # shape [0] beside texts is an error (the packing's) instead; an empty batch never gets
    # here in the exported files (`guard_empty_batch`).
    counts = g.node("Concat", [counts, "const/zeros_1"], prefix, axis=0)  # [N + 1]
    dense, _ = _dense_rows(g, values, counts, "const/empty_string", prefix)  # [N + 1, M]
    joined = g.multi_node(
        "StringJoin", [dense, "const/empty_string", "const/axes_1"], prefix, 1, domain=CONTRIB
    )[0]  # [N + 1]
    return g.node("Slice", [joined, "const/zeros_1", "const/minus_ones_1"], prefix)  # [N]


def _regex_replace(g: GraphBuilder, text: str, pattern: str, rewrite: str, prefix: str) -> str:
    p = _string(g, f"{prefix}/pattern", pattern)
    r = _string(g, f"{prefix}/rewrite", rewrite)
    return g.multi_node("StringRegexReplace", [text, p, r], prefix, 1, domain=CONTRIB)[0]


def _subgraph(g: GraphBuilder, build: Callable[[], str], name: str) -> onnx.GraphProto:
    """The nodes `build` appends to `g`, as a graph of their own (one string output) for an
    `If` branch; its constants stay `g`'s initializers, which a branch reads from outside."""
    outer, g.nodes = g.nodes, []
    try:
        output = build()
        nodes = g.nodes
    finally:
        g.nodes = outer
    value = helper.make_tensor_value_info(output, TensorProto.STRING, None)
    return helper.make_graph(nodes, name, [], [value])


def normalize(g: GraphBuilder, text: str, do_lower_case: bool, prefix: str) -> str:
    """`preprocess_text` in graph: tf.string [N] -> [N].

    A batch whose texts are all ASCII takes the same steps with the tables cut to ASCII
    (`_tables(128)`: the same result, since no step maps an ASCII character to or from anything
    else). onnxruntime-extensions' regular-expression operators compile their pattern on every
    call, and the full tables' character classes (thousands of ranges) made that most of a
    short text's time: 4.6 of 7.5 ms a call for a sentence of `examples/sentiment` (ORT's
    profile, one thread)."""
    residue = _regex_replace(g, text, "[\\x00-\\x7f]+", "", f"{prefix}/non_ascii")
    longest = g.node(
        "ReduceMax",
        [g.multi_node("StringLength", [residue], prefix, 1, domain=CONTRIB)[0]],
        prefix,
        keepdims=0,
    )
    ascii_only = g.node("Equal", [longest, "const/zero"], prefix)
    tables = {"ascii": _tables(128), "full": _tables()}
    branches = {
        kind: _subgraph(
            g,
            lambda t=t, kind=kind: _normalize(g, text, do_lower_case, t, f"{prefix}/{kind}"),
            f"{prefix}/{kind}",
        )
        for kind, t in tables.items()
    }
    return g.node(
        "If",
        [ascii_only],
        prefix,
        then_branch=branches["ascii"],
        else_branch=branches["full"],
    )


def _normalize(
    g: GraphBuilder, text: str, do_lower_case: bool, t: dict[str, object], prefix: str
) -> str:
    """The steps of `normalize` with the character tables `t` (`_tables`)."""
    text = _regex_replace(g, text, f"[{t['space']}]+", " ", f"{prefix}/space")
    text = _regex_replace(g, text, "^ | $", "", f"{prefix}/trim")
    if t["strip"]:
        text = _map_chars(g, text, t["strip"], f"{prefix}/nfkd")
    if do_lower_case and t["lower"]:
        if "\u03a3" in t["lower"]:  # Final_Sigma: not for ASCII tables, which have no sigma
            cased, ignorable = t["cased"], t["ignorable"]
            text = _regex_replace(
                g,
                text,
                f"([{cased}][{ignorable}]*)\\x{{3A3}}([{ignorable}]*)($|[^{cased}{ignorable}])",
                "\\1\u03c2\\2\\3",
                f"{prefix}/final_sigma",
            )
        text = _map_chars(g, text, t["lower"], f"{prefix}/lower")
    return text


def _resplit_table(sp) -> np.ndarray:
    """int64 [V, K]: the ids each vocabulary id becomes after the digit-comma re-split, padded
    with -1 (K the longest)."""
    rows = resplit_rows(sp)
    table = np.full((len(rows), max(map(len, rows))), -1, np.int64)
    for i, row in enumerate(rows):
        table[i, : len(row)] = row
    return table


def tokenize(g: GraphBuilder, text: str, sp_bytes: bytes, tables: dict, prefix: str) -> tuple:
    """SentencePiece + run order + re-split on normalized text [N]: (flat ids int64 [T], row
    lengths int64 [N]). `sp_bytes` is the byte-fallback model (`albert_tf.preprocess.piece_order`), whose byte ids
    (>= vocab size) stand for unknown characters."""
    pieces, splits = g.multi_node(
        "SentencepieceTokenizer",
        [text, "const/nbest", "const/alpha", "const/false", "const/false", "const/false"],
        prefix,
        2,
        domain=CONTRIB,
        model=sp_bytes,
    )  # pieces int32 [P], splits int64 [N + 1]
    pieces = g.node("Cast", [pieces], prefix, to=TensorProto.INT64)
    ids, valid = _dense_rows(
        g, pieces, _row_lengths(g, splits, prefix), "const/unk", prefix
    )  # [N, M], padded with <unk> (no run)
    if tables["order"] is not None:
        ids = order_runs(g, ids, valid, tables["order"], f"{prefix}/order")
    # An unknown character's bytes -> one <unk> per run of them, as `sentencepiece` merges them.
    is_byte = g.node("GreaterOrEqual", [ids, "const/vocab_size"], prefix)
    after_byte = shifted(g, is_byte, "const/false_scalar", False, prefix)
    keep = g.node(
        "And",
        [valid, g.node("Not", [g.node("And", [is_byte, after_byte], prefix)], prefix)],
        prefix,
    )
    ids = g.node("Where", [is_byte, "const/unk", ids], prefix)
    ids = g.node(
        "Compress",
        [
            g.node("Reshape", [ids, "const/flat"], prefix),
            g.node("Reshape", [keep, "const/flat"], prefix),
        ],
        prefix,
    )  # [P']
    counts = g.node(
        "ReduceSum",
        [g.node("Cast", [keep], prefix, to=TensorProto.INT64), "const/axes_1"],
        prefix,
        keepdims=0,
    )  # [N]
    rows = g.node("Gather", [tables["resplit"], ids], prefix)  # [P', K]
    valid = g.node("GreaterOrEqual", [rows, "const/zero"], prefix)
    lengths = g.node(
        "ReduceSum",
        [g.node("Cast", [valid], prefix, to=TensorProto.INT64), "const/axes_1"],
        prefix,
        keepdims=0,
    )
    ids = g.node(
        "Compress",
        [
            g.node("Reshape", [rows, "const/flat"], prefix),
            g.node("Reshape", [valid, "const/flat"], prefix),
        ],
        prefix,
    )  # [T]
    # Row lengths after the re-split: the new lengths summed over each row's pieces.
    ends = g.node("CumSum", [lengths, "const/zero"], prefix)
    ends = g.node("Concat", ["const/zeros_1", ends], prefix, axis=0)  # [P' + 1]
    row_ends = g.node("Gather", [ends, g.node("CumSum", [counts, "const/zero"], prefix)], prefix)
    row_ends = g.node("Concat", ["const/zeros_1", row_ends], prefix, axis=0)  # [N + 1]
    return ids, _row_lengths(g, row_ends, prefix)


def _trimmed_counts(
    g: GraphBuilder, counts: list[str], budget: int, prefix: str, first_bound: int | None = None
) -> list[str]:
    """How many tokens of each segment (row counts [N]) fit in `budget`: all of one segment up
    to it; of two, round robin (A takes ceil(budget/2) and whatever B leaves unused, B the
    rest), or with `first_bound` A its first `first_bound` and B the rest (SQuAD: the question,
    then the context)."""
    room = g.constant(f"{prefix}/budget", budget, np.int64)
    if len(counts) == 1:
        return [g.node("Min", [counts[0], room], prefix)]
    if first_bound is not None:
        a = g.node("Min", [counts[0], g.constant(f"{prefix}/bound", first_bound, np.int64)], prefix)
        return [a, g.node("Min", [counts[1], g.node("Sub", [room, a], prefix)], prefix)]
    half = g.constant(f"{prefix}/half", (budget + 1) // 2, np.int64)
    a = g.node(
        "Min",
        [counts[0], g.node("Max", [half, g.node("Sub", [room, counts[1]], prefix)], prefix)],
        prefix,
    )
    return [a, g.node("Min", [counts[1], g.node("Sub", [room, a], prefix)], prefix)]


def _place_segment(
    g: GraphBuilder,
    segment: tuple[str, str],
    n: str,
    at: tuple[str, str],
    word_ids: str,
    prefix: str,
) -> str:
    """`word_ids` [N, S] with the first `n` [N, 1] ids of `segment` (flat ids [T], row counts
    [N]) written from position `start` [N, 1] on (`at`: positions [1, S] and `start`)."""
    ids, segment_counts = segment
    j, start = at
    first = g.node(
        "Sub", [g.node("CumSum", [segment_counts, "const/zero"], prefix), segment_counts], prefix
    )
    first = g.node("Unsqueeze", [first, "const/axes_1"], prefix)  # [N, 1]
    offset = g.node("Sub", [j, start], prefix)  # [N or 1, S]
    inside = g.node(
        "And",
        [
            g.node("GreaterOrEqual", [offset, "const/zero"], prefix),
            g.node("Less", [offset, n], prefix),
        ],
        prefix,
    )
    padded = g.node("Concat", [ids, "const/zeros_1"], prefix, axis=0)  # [T + 1]
    source = g.node(
        "Where",
        [inside, g.node("Add", [first, offset], prefix), g.node("Size", [ids], prefix)],
        prefix,
    )
    return g.node("Where", [inside, g.node("Gather", [padded, source], prefix), word_ids], prefix)


def _positions(
    g: GraphBuilder, kept: list[str], seq_length: int, longest: bool, prefix: str
) -> str:
    """The positions [1, S] rows are packed into: S = `seq_length`, or with `longest` the
    batch's longest packed row (kept tokens [N] of each segment, [CLS] and the [SEP]s)."""
    if not longest:
        return g.constant(f"{prefix}/positions", np.arange(seq_length)[np.newaxis], np.int64)
    specials = g.constant(f"{prefix}/specials", 1 + len(kept), np.int64)
    total = specials
    for count in kept:  # ONNX's Sum takes no integers
        total = g.node("Add", [total, count], prefix)  # [N]
    s = g.node("ReduceMax", [total], prefix, keepdims=0)
    return g.node(
        "Unsqueeze",
        [g.node("Range", ["const/zero", s, "const/one_int"], prefix), "const/zeros_1"],
        prefix,
    )  # [1, S]


def pack(
    g: GraphBuilder,
    segments: list[tuple[str, str]],
    seq_length: int,
    special: dict[str, int],
    prefix: str,
    pad_to_longest: bool = False,
    first_bound: int | None = None,
) -> dict[str, str]:
    """`[CLS] A [SEP] (B [SEP])` from 1 or 2 segments (flat ids [T], row lengths [N]) with
    round-robin trimming (with `first_bound`: A cut to it, B to the rest): int32 [N, S] each
    encoder input, S = `seq_length`, or with `pad_to_longest` the batch's longest row (at most
    `seq_length`)."""
    budget = seq_length - 1 - len(segments)
    kept = _trimmed_counts(g, [c for _, c in segments], budget, prefix, first_bound)
    j = _positions(g, kept, seq_length, pad_to_longest, prefix)
    word_ids = g.node(
        "Expand",
        [g.constant(f"{prefix}/pad", special["pad"], np.int64), g.node("Shape", [j], prefix)],
        prefix,
    )
    word_ids = g.node(
        "Where",
        [
            g.node("Equal", [j, "const/zero"], prefix),
            g.constant(f"{prefix}/cls", special["cls"], np.int64),
            word_ids,
        ],
        prefix,
    )
    type_ids = None
    start = "const/one_int"  # position of the segment's first token
    for index, ((ids, segment_counts), n) in enumerate(zip(segments, kept, strict=True)):
        n = g.node("Unsqueeze", [n, "const/axes_1"], prefix)  # [N, 1]
        word_ids = _place_segment(g, (ids, segment_counts), n, (j, start), word_ids, prefix)
        sep = g.node("Add", [start, n], prefix)  # [N, 1]
        word_ids = g.node(
            "Where",
            [
                g.node("Equal", [j, sep], prefix),
                g.constant(f"{prefix}/sep_{index}", special["sep"], np.int64),
                word_ids,
            ],
            prefix,
        )
        if index == 1:
            type_ids = g.node(
                "And",
                [
                    g.node("GreaterOrEqual", [j, start], prefix),
                    g.node("LessOrEqual", [j, sep], prefix),
                ],
                prefix,
            )
        start = g.node("Add", [sep, "const/one_int"], prefix)
    mask = g.node("Less", [j, start], prefix)  # [N, S]
    if type_ids is None:
        type_ids = g.node("And", [mask, "const/false"], prefix)
    return {
        name: g.node("Cast", [value], prefix, to=TensorProto.INT32)
        for name, value in zip(ENCODER_INPUTS, (word_ids, mask, type_ids), strict=True)
    }


def _graph_with_constants(sp: Any) -> GraphBuilder:
    """A GraphBuilder holding the constants the text graph's steps share (`sp`: the
    SentencePiece processor)."""
    g = GraphBuilder()
    for name, value, dtype in (
        ("zero", 0, np.int64),
        ("one_int", 1, np.int64),
        ("axes_1", [1], np.int64),
        ("zeros_1", [0], np.int64),
        ("ones_1", [1], np.int64),
        ("minus_ones_1", [-1], np.int64),
        ("max_1", [np.iinfo(np.int64).max], np.int64),
        ("flat", [-1], np.int64),
        ("nbest", [0], np.int64),
        ("alpha", [0.0], np.float32),
        ("false", [False], np.bool_),
        ("empty_string", np.array([""], dtype=object), object),
        ("false_scalar", False, np.bool_),
        ("unk", [sp.unk_id()], np.int64),
        ("vocab_size", sp.get_piece_size(), np.int64),
    ):
        g.constant(f"const/{name}", value, dtype)
    return g


def preprocess_graph(
    sp_model: str | os.PathLike | AlbertTokenizer,
    seq_length: int,
    do_lower_case: bool = True,
    num_segments: int = 1,
    windows: Windows | None = None,
    pad_to_longest: bool = False,
    first_bound: int | None = None,
) -> onnx.ModelProto:
    """Strings `text` (and `text_pair` for 2 segments) tf.string [B] -> `input_word_ids`,
    `input_mask`, `input_type_ids` int32 [B, seq_length], as the preprocessing SavedModel; with
    `pad_to_longest`, [B, S] padded to the batch's longest row only (S <= seq_length; a
    classifier's outputs stay those of `seq_length` within float rounding: padding is masked).

    With `windows`, the last segment is read in windows (`albert_tf.export.onnx.windows`): the ids are
    of the W real windows, [W, seq_length], and `window_present` bool [B, K] says which
    windows each text has. With `first_bound` (2 segments), `text` keeps its first
    `first_bound` tokens and `text_pair` the rest of the room, as SQuAD packs a question and its
    context, instead of round-robin trimming."""
    tokenizer = as_tokenizer(sp_model, do_lower_case)
    sp = tokenizer.sp_model
    special = dict(pad=sp.piece_to_id(PAD), cls=sp.piece_to_id(CLS), sep=sp.piece_to_id(SEP))
    sp_bytes = tokenizer.model_proto
    g = _graph_with_constants(sp)
    tables = dict(
        resplit=g.constant("resplit_table", _resplit_table(sp), np.int64),
        order=piece_tables(sp_bytes),
    )
    sp_bytes = byte_fallback_model(sp_bytes)
    segments = []
    for name in TEXT_INPUTS[:num_segments]:
        text = normalize(g, name, do_lower_case, f"{name}/normalize")
        segments.append(tokenize(g, text, sp_bytes, tables, f"{name}/tokenize"))
    rows, declared = "batch", []
    if windows is not None:
        segments, present = window_segments(g, segments, seq_length, windows, "windows")
        g.nodes.append(helper.make_node("Identity", [present], [WINDOW_PRESENT]))
        rows = "windows"
        declared = [
            helper.make_tensor_value_info(
                WINDOW_PRESENT, TensorProto.BOOL, ["batch", windows.max_windows]
            )
        ]
    outputs = pack(g, segments, seq_length, special, "pack", pad_to_longest, first_bound)
    for name, value in outputs.items():
        g.nodes.append(helper.make_node("Identity", [value], [name], name=name))
    graph = helper.make_graph(
        g.nodes,
        "albert_preprocess",
        [
            helper.make_tensor_value_info(n, TensorProto.STRING, ["batch"])
            for n in TEXT_INPUTS[:num_segments]
        ],
        [
            helper.make_tensor_value_info(
                n, TensorProto.INT32, [rows, "sequence" if pad_to_longest else seq_length]
            )
            for n in ENCODER_INPUTS
        ]
        + declared,
        initializer=list(g.initializers.values()),
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid(CONTRIB, 1)],
        producer_name="albert-tf",
    )
    model.ir_version = 8
    return model


def _add_prefix(model: onnx.ModelProto, prefix: str) -> onnx.ModelProto:
    """`onnx.compose.add_prefix` without renaming inputs and outputs, whose Loop bodies also
    find the outer graph's initializers under their new names: onnx renames a subgraph before
    it maps the outer graph's initializers, so their names are mapped first here."""
    renamed = onnx.ModelProto()
    renamed.CopyFrom(model)
    compose.add_prefix_graph(
        renamed.graph,
        prefix,
        rename_inputs=False,
        rename_outputs=False,
        inplace=True,
        name_map={i.name: prefix + i.name for i in renamed.graph.initializer},
    )
    return renamed


def guard_empty_batch(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model` as one `If` on B == 0, B being the first dimension of its first input (`text`
    [B] for a raw-string model, `input_word_ids` [B, S] for an encoder): an empty batch gets
    empty outputs of the declared dtypes, shaped [0, ...], and runs nothing else; any other
    batch runs `model`'s graph, unchanged. (Only the first input decides: `text_pair` of
    another length than `text` is the packing's error, as before.)

    ONNX Runtime's int8 attention kernel (QAttention, 1.32) stops the process on zero rows
    (SIGFPE), so an empty request would kill a server. Every output dimension but the first is
    a fixed number or named as a dimension of an input (`sequence` of `input_word_ids`), where
    the empty output takes its size from."""
    graph = model.graph
    named = {}  # a dimension's name -> (the input, its axis) where its size can be read
    for value in graph.input:
        for axis, dim in enumerate(value.type.tensor_type.shape.dim):
            if dim.dim_param:
                named.setdefault(dim.dim_param, (value.name, axis))
    empty, outputs = [], []
    for output in graph.output:
        dims = output.type.tensor_type.shape.dim[1:]
        dtype = helper.tensor_dtype_to_np_dtype(output.type.tensor_type.elem_type)
        # A branch's outputs need names of their own: the If's outputs take the model's.
        name = f"empty/{output.name}"
        if all(d.HasField("dim_value") for d in dims):
            value = np.empty((0, *(d.dim_value for d in dims)), dtype)
            empty.append(
                helper.make_node("Constant", [], [name], value=numpy_helper.from_array(value, name))
            )
        else:
            empty += _empty_like_inputs(name, dims, dtype, named)
        outputs.append(onnx.ValueInfoProto())
        outputs[-1].CopyFrom(output)
        outputs[-1].name = name
    then_branch = helper.make_graph(empty, "empty_batch", [], outputs)
    else_branch = helper.make_graph(
        graph.node,
        "batch",
        [],
        graph.output,
        initializer=graph.initializer,
        value_info=graph.value_info,
    )
    compose.add_prefix_graph(
        else_branch,
        "batch/",
        rename_nodes=False,
        rename_edges=False,
        rename_initializers=False,
        rename_value_infos=False,
        inplace=True,
    )
    g = GraphBuilder()
    rows = g.node("Shape", [graph.input[0].name], "guard", start=0, end=1)  # [B]
    is_empty = g.node("Equal", [rows, g.constant("guard/zero", [0], np.int64)], "guard")
    g.nodes.append(
        helper.make_node(
            "If",
            [is_empty],
            [o.name for o in graph.output],
            name="guard/If",
            then_branch=then_branch,
            else_branch=else_branch,
        )
    )
    guarded = onnx.ModelProto()
    guarded.CopyFrom(model)
    del guarded.graph.node[:], guarded.graph.initializer[:], guarded.graph.value_info[:]
    guarded.graph.node.extend(g.nodes)
    guarded.graph.initializer.extend(g.initializers.values())
    return guarded


def _empty_like_inputs(
    name: str, dims: Any, dtype: np.dtype, named: dict[str, tuple[str, int]]
) -> list[onnx.NodeProto]:
    """Nodes making `name`, zeros of `dtype` shaped [0, *dims], where each of `dims` is a fixed
    number or a dimension of an input (`named`: its name -> (input, axis)), read at run time."""
    nodes, parts = [], [f"{name}/rows"]
    nodes.append(helper.make_node("Constant", [], parts[:1], value_ints=[0]))
    for i, dim in enumerate(dims):
        part = f"{name}/dim_{i + 1}"
        if dim.HasField("dim_value"):
            nodes.append(helper.make_node("Constant", [], [part], value_ints=[dim.dim_value]))
        elif dim.dim_param in named:
            source, axis = named[dim.dim_param]
            nodes.append(helper.make_node("Shape", [source], [part], start=axis, end=axis + 1))
        else:
            raise ValueError(f"{name}: dimension {dim.dim_param!r} is no input's dimension")
        parts.append(part)
    zero = numpy_helper.from_array(np.zeros([1], dtype), f"{name}/zero")
    nodes += [
        helper.make_node("Concat", parts, [f"{name}/shape"], axis=0),
        helper.make_node("ConstantOfShape", [f"{name}/shape"], [name], value=zero),
    ]
    return nodes


def with_preprocess(preprocess: onnx.ModelProto, model: onnx.ModelProto) -> onnx.ModelProto:
    """`preprocess` feeding `model`'s encoder inputs: strings in, `model`'s outputs and
    `preprocess`'s (the three encoder inputs, the ALBERT ids; `window_present`) out."""
    outputs = [o.name for o in model.graph.output] + [o.name for o in preprocess.graph.output]
    merged = compose.merge_models(
        _add_prefix(preprocess, "preprocess/"),
        _add_prefix(model, "model/"),
        io_map=[(name, name) for name in ENCODER_INPUTS],
        outputs=outputs,
    )
    # The encoder's rows and sequence length are the packing's here: `sequence_output` [B, S, H]
    # (S stays named where the packing pads to the batch's longest row), or [W, S, H] on the
    # rows of a windowed packing. Declared as [B, ...], W rows would have ONNX Runtime plan
    # their buffers as B's (a warning on every run where W differs from B).
    ids = next(o for o in preprocess.graph.output if o.name == ENCODER_INPUTS[0])
    rows, seq_length = ids.type.tensor_type.shape.dim[:2]
    encoder_outputs = {o.name for o in model.graph.output}
    for output in merged.graph.output:
        dims = output.type.tensor_type.shape.dim
        if output.name in encoder_outputs and dims and dims[0].dim_param == "batch":
            dims[0].dim_param = rows.dim_param or dims[0].dim_param
        for dim in dims if seq_length.dim_value else []:
            if dim.dim_param == "sequence":
                dim.dim_value = seq_length.dim_value
    return merged


def raw_string_models(
    preprocess: onnx.ModelProto, head: onnx.ModelProto, encoders: dict[str, onnx.ModelProto]
) -> dict[str, onnx.ModelProto]:
    """A fine-tuned task's raw-string model around each of `encoders` (kind -> encoder graph):
    `preprocess`, the encoder, then `head` (a graph reading encoder and preprocessing outputs by
    name). Its outputs are `head`'s, in `head`'s order; an empty batch gets empty outputs
    (`guard_empty_batch`)."""
    head = compose.add_prefix(head, "head/", rename_inputs=False, rename_outputs=False)
    names = [o.name for o in head.graph.output]
    models = {}
    for kind, encoder in encoders.items():
        merged = compose.merge_models(
            with_preprocess(preprocess, encoder),
            head,
            io_map=[(i.name, i.name) for i in head.graph.input],
        )
        # The outputs are chosen here, not by merge_models: given outputs, it extracts the
        # graph with onnx.utils.Extractor, which drops initializers only Loop bodies read (the
        # text graph's tokenizer tables). Every node still feeds one of the head's outputs.
        outputs = {o.name: o for o in merged.graph.output}
        del merged.graph.output[:]
        merged.graph.output.extend(outputs[name] for name in names)
        models[kind] = guard_empty_batch(merged)
    return models
