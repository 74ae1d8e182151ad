"""The order of pieces within runs of one repeated string, as the `sentencepiece` package
gives it, in ONNX operators.

onnxruntime-extensions' `SentencepieceTokenizer` finds the same best segmentation as the
`sentencepiece` package the reference runs on, but where several orders of the same pieces
score the same it may pick another order. Pieces can only change places without changing the
text if they are powers of one string (xy = yx only if x and y are powers of a common word),
so these ties live in maximal runs of consecutive pieces of a row that are all powers of one
primitive root ("-" and "--------------", "0" and "00"). Which order wins is decided by
rounding: `sentencepiece` 0.2.2 sums scores left to right in float32 and, at each position,
keeps the first (longest) last piece among exact equals, so the order in a run depends on the
row's score where the run starts. (0.2.0, and 0.2.1 with the same code, compare the sums in
double precision and give onnxruntime-extensions' order: equal on all 3,166 strings tried.
The reference fixture, tests/fixtures/tokenizer, holds 0.2.2's order, which this module
reproduces.) This module redoes 0.2.2's Viterbi inside each run:

1. per vocabulary id, tables built at export: its root's class (-1 for pieces whose root has
   one piece length, which cannot be reordered), its length in roots, its score as the Viterbi
   adds it (user-defined pieces `float32(0.1 * (bytes - 1))`; the byte pieces of the
   byte-fallback model stand for unknown characters: `min_score - 10` on each character's first
   byte, 0 on continuation bytes, so an unknown run adds its penalty once per character);
2. the row's score before each piece: an exclusive float32 `CumSum` along the row;
3. per run of 2 or more pieces of one class, a `Loop` over its positions (in roots) keeps the
   last scores in a window and picks, for each position, the best last piece (ties to the
   longest: `ArgMax` with `select_last_index`); a second `Loop` walks back from the run's end;
4. the new order is scattered over the run. A run's start score depends on the order of the
   runs before it, so steps 2-4 repeat until nothing changes (a `Loop` with a condition: run k
   is right after pass k, and a pass without change proves every run right).

Within a run the result is `sentencepiece`'s: given the score at the run's start, restricting
its Viterbi to the run's pieces keeps its choices (its best path stays a candidate with the
same float32 sums, and every other candidate can only lose).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

from export.onnx.encoder import GraphBuilder

# `sentencepiece` charges an unknown character the lowest piece score minus this.
UNK_PENALTY = 10.0
_NORMAL, _UNKNOWN, _USER_DEFINED = 1, 2, 4


def primitive_root(piece: str) -> str:
    """The shortest string whose repetition is `piece` ("-" for "---", "ab" for "abab")."""
    n = len(piece)
    for d in range(1, n + 1):
        if n % d == 0 and piece[:d] * (n // d) == piece:
            return piece[:d]
    return piece


def byte_fallback_model(model: bytes) -> bytes:
    """The SentencePiece model with the 256 byte pieces appended (ids V..V+255) and byte
    fallback on: the same segmentation, with each unknown character given as its UTF-8 bytes
    instead of merged into one `<unk>`, so the graph can count its characters."""
    from sentencepiece import sentencepiece_model_pb2

    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(model)
    for byte in range(256):
        proto.pieces.add(piece=f"<0x{byte:02X}>", score=0.0, type=6)
    proto.trainer_spec.byte_fallback = True
    return proto.SerializeToString()


def piece_tables(model: bytes) -> dict[str, np.ndarray] | None:
    """Tables for vocabulary + byte ids (V + 256): `score` float32, `root_class` int64,
    `units` int64 (length in roots); per class and length in roots (1..Lmax),
    `class_scores` float32 [C, Lmax] (-inf where no piece) and `class_ids` int64 [C, Lmax];
    `vocab_size`. None when no root has two piece lengths (no order can tie)."""
    from sentencepiece import sentencepiece_model_pb2

    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(model)
    pieces = list(proto.pieces)
    vocab_size = len(pieces)
    min_score = np.float32(min(p.score for p in pieces if p.type == _NORMAL))
    unk_score = np.float32(min_score - np.float32(UNK_PENALTY))
    score = np.zeros(vocab_size + 256, np.float32)
    units = np.ones(vocab_size + 256, np.int64)
    lengths: dict[str, dict[int, int]] = {}
    for i, p in enumerate(pieces):
        if p.type == _USER_DEFINED:
            score[i] = np.float32(0.1 * (len(p.piece.encode()) - 1))
        elif p.type == _UNKNOWN:
            score[i] = unk_score
        else:
            score[i] = p.score
        if p.type in (_NORMAL, _USER_DEFINED):
            root = primitive_root(p.piece)
            units[i] = len(p.piece) // len(root)
            lengths.setdefault(root, {})[int(units[i])] = i
    # A UTF-8 lead byte starts an unknown character; continuation bytes (10xxxxxx) add nothing.
    lead = (np.arange(256) & 0xC0) != 0x80
    score[vocab_size:] = np.where(lead, unk_score, np.float32(0))
    classes = [ids for ids in lengths.values() if len(ids) > 1]
    if not classes:
        return None
    longest = max(max(ids) for ids in classes)
    root_class = np.full(vocab_size + 256, -1, np.int64)
    class_scores = np.full((len(classes), longest), -np.inf, np.float32)
    class_ids = np.zeros((len(classes), longest), np.int64)
    for c, ids in enumerate(classes):
        for n, i in ids.items():
            root_class[i] = c
            class_scores[c, n - 1] = score[i]
            class_ids[c, n - 1] = i
    return dict(
        score=score,
        root_class=root_class,
        units=units,
        class_scores=class_scores,
        class_ids=class_ids,
        vocab_size=np.int64(vocab_size),
    )


def _loop(
    g: GraphBuilder,
    trips: str,
    carried: list[tuple[str, int]],
    body,
    scans: list[int],
    prefix: str,
) -> list[str]:
    """An ONNX `Loop` of at most `trips` iterations (int64 scalar) over `carried` (initial
    value, element type) values. `body(b, state)` builds the body in GraphBuilder `b` from the
    carried names and returns (condition or None for "go on", new state, scan outputs of the
    element types `scans`). Returns the final state, then the stacked scan outputs."""
    b = GraphBuilder()
    state = [f"{prefix}/state_{k}" for k in range(len(carried))]
    condition, new_state, scanned = body(b, state)
    if condition is None:
        condition = b.node("Identity", [f"{prefix}/cond_in"], f"{prefix}/body")
    # A body output must be produced by a node of the body.
    new_state = [b.node("Identity", [s], f"{prefix}/body") if s in state else s for s in new_state]

    def info(name: str, elem: int) -> onnx.ValueInfoProto:
        return helper.make_tensor_value_info(name, elem, None)

    graph = helper.make_graph(
        b.nodes,
        prefix,
        [
            helper.make_tensor_value_info(f"{prefix}/iteration", TensorProto.INT64, []),
            helper.make_tensor_value_info(f"{prefix}/cond_in", TensorProto.BOOL, []),
            *[info(s, elem) for s, (_, elem) in zip(state, carried, strict=True)],
        ],
        [
            helper.make_tensor_value_info(condition, TensorProto.BOOL, []),
            *[info(s, elem) for s, (_, elem) in zip(new_state, carried, strict=True)],
            *[info(s, elem) for s, elem in zip(scanned, scans, strict=True)],
        ],
        initializer=list(b.initializers.values()),
    )
    go = g.constant(f"{prefix}/go", True, np.bool_)
    return g.multi_node(
        "Loop",
        [trips, go, *[value for value, _ in carried]],
        prefix,
        len(carried) + len(scans),
        body=graph,
    )


def order_runs(g: GraphBuilder, ids: str, valid: str, tables: dict, prefix: str) -> str:
    """Piece ids int64 [N, M] (rows padded where `valid` bool [N, M] is false; padding must
    have root class -1) with every run in `sentencepiece`'s order -> int64 [N, M]."""
    t = {k: g.constant(f"{prefix}/{k}", v, v.dtype) for k, v in tables.items() if k != "vocab_size"}
    longest = tables["class_scores"].shape[1]
    minus_one = g.constant(f"{prefix}/minus_one", -1, np.int64)
    root_class = g.node(
        "Where", [valid, g.node("Gather", [t["root_class"], ids], prefix), minus_one], prefix
    )
    # Each piece's neighbours' classes in its row, -1 beyond the row's ends.
    before = g.node(
        "Pad",
        [root_class, g.constant(f"{prefix}/pad_before", [0, 1, 0, 0], np.int64), minus_one],
        prefix,
    )
    after = g.node(
        "Pad",
        [root_class, g.constant(f"{prefix}/pad_after", [0, 0, 0, 1], np.int64), minus_one],
        prefix,
    )
    before = g.node(
        "Slice", [before, "const/zeros_1", "const/minus_ones_1", "const/ones_1"], prefix
    )
    after = g.node("Slice", [after, "const/ones_1", "const/max_1", "const/ones_1"], prefix)
    in_run = g.node("GreaterOrEqual", [root_class, "const/zero"], prefix)

    def run_edges(neighbour: str) -> str:
        edge = g.node(
            "And",
            [in_run, g.node("Not", [g.node("Equal", [root_class, neighbour], prefix)], prefix)],
            prefix,
        )
        flat = g.node("Reshape", [edge, "const/flat"], prefix)
        return g.node("Reshape", [g.node("NonZero", [flat], prefix), "const/flat"], prefix)  # [R0]

    starts, ends = run_edges(before), run_edges(after)  # flat positions, paired in order
    count = g.node("Add", [g.node("Sub", [ends, starts], prefix), "const/one_int"], prefix)
    several = g.node("GreaterOrEqual", [count, g.constant(f"{prefix}/two", 2, np.int64)], prefix)
    starts, ends, count = (
        g.node("Compress", [x, several], prefix) for x in (starts, ends, count)
    )  # [R]
    flat_ids = g.node("Reshape", [ids, "const/flat"], prefix)  # [N * M]
    run_class = g.node(
        "Gather", [g.node("Reshape", [root_class, "const/flat"], prefix), starts], prefix
    )
    units = g.node("Gather", [t["units"], flat_ids], prefix)
    total = g.node("CumSum", [units, "const/zero"], prefix)
    run_units = g.node(
        "Add",
        [
            g.node(
                "Sub",
                [
                    g.node("Gather", [total, ends], prefix),
                    g.node("Gather", [total, starts], prefix),
                ],
                prefix,
            ),
            g.node("Gather", [units, starts], prefix),
        ],
        prefix,
    )  # [R] run lengths in roots
    run_scores = g.node("Gather", [t["class_scores"], run_class], prefix)  # [R, Lmax]
    shape = g.node("Shape", [ids], prefix)
    runs = g.node("Size", [starts], prefix)
    passes = g.node(
        "Where",
        [
            g.node("Greater", [runs, "const/zero"], prefix),
            g.node("Add", [runs, "const/one_int"], prefix),
            "const/zero",
        ],
        prefix,
    )
    minus_inf = g.constant(f"{prefix}/minus_inf", [[-np.inf]], np.float32)
    window_tail = g.node(
        "Concat",
        [
            g.node("Unsqueeze", [runs, "const/zeros_1"], prefix),
            g.constant(f"{prefix}/tail", [longest - 1], np.int64),
        ],
        prefix,
        axis=0,
    )  # [2]: R, Lmax - 1

    def one_pass(b: GraphBuilder, state: list[str]):
        (current,) = state
        p = f"{prefix}/pass"
        scores = b.node(
            "Reshape", [b.node("Gather", [t["score"], current], p), shape], p, allowzero=1
        )  # [N, M]
        # The row's score before each piece, summed left to right in float32 as the Viterbi.
        before_score = b.node("CumSum", [scores, "const/one_int"], p, exclusive=1)
        entry = b.node(
            "Gather", [b.node("Reshape", [before_score, "const/flat"], p), starts], p
        )  # [R]
        window = b.node(
            "Concat",
            [
                b.node("Unsqueeze", [entry, "const/axes_1"], p),
                b.node("Expand", [minus_inf, window_tail], p),
            ],
            p,
            axis=1,
        )  # [R, Lmax]: best score ending 1, 2, ... roots back

        def position(c: GraphBuilder, s: list[str]):
            (win,) = s
            q = f"{prefix}/position"
            candidate = c.node(
                "Add", [win, run_scores], q
            )  # [R, Lmax]: last piece of 1..Lmax roots
            pick = c.node(
                "ArgMax", [candidate], q, axis=1, keepdims=1, select_last_index=1
            )  # [R, 1]
            best = c.node("GatherElements", [candidate, pick], q, axis=1)
            kept = c.node("Slice", [win, "const/zeros_1", "const/minus_ones_1", "const/ones_1"], q)
            win = c.node("Concat", [best, kept], q, axis=1)
            last = c.node("Add", [c.node("Squeeze", [pick, "const/axes_1"], q), "const/one_int"], q)
            return None, [win], [last]

        _, choices = _loop(
            b,
            b.node("ReduceMax", [run_units], p, keepdims=0),
            [(window, TensorProto.FLOAT)],
            position,
            [TensorProto.INT64],
            f"{prefix}/positions",
        )
        choices = b.node(
            "Transpose", [choices], p, perm=[1, 0]
        )  # [R, max units]: last piece ending there

        def step_back(c: GraphBuilder, s: list[str]):
            (at,) = s
            q = f"{prefix}/back"
            column = c.node(
                "Unsqueeze",
                [
                    c.node("Max", [c.node("Sub", [at, "const/one_int"], q), "const/zero"], q),
                    "const/axes_1",
                ],
                q,
            )
            last = c.node(
                "Squeeze",
                [c.node("GatherElements", [choices, column], q, axis=1), "const/axes_1"],
                q,
            )
            last = c.node(
                "Where", [c.node("Greater", [at, "const/zero"], q), last, "const/zero"], q
            )
            index = c.node(
                "Add",
                [
                    c.node("Mul", [run_class, c.constant(f"{q}/longest", longest, np.int64)], q),
                    c.node("Max", [c.node("Sub", [last, "const/one_int"], q), "const/zero"], q),
                ],
                q,
            )
            piece = c.node(
                "Gather", [c.node("Reshape", [t["class_ids"], "const/flat"], q), index], q
            )
            return None, [c.node("Sub", [at, last], q)], [piece, last]

        left, pieces, lasts = _loop(
            b,
            b.node("ReduceMax", [count], p, keepdims=0),
            [(run_units, TensorProto.INT64)],
            step_back,
            [TensorProto.INT64, TensorProto.INT64],
            f"{prefix}/backtrack",
        )
        # pieces [K, R], last first. A run whose walk does not end at its start with its piece
        # count keeps its order (cannot happen when the Viterbi's pieces are ortx's).
        found = b.node(
            "ReduceSum",
            [
                b.node(
                    "Cast", [b.node("Greater", [lasts, "const/zero"], p)], p, to=TensorProto.INT64
                ),
                "const/zeros_1",
            ],
            p,
            keepdims=0,
        )
        whole = b.node(
            "And", [b.node("Equal", [left, "const/zero"], p), b.node("Equal", [found, count], p)], p
        )
        steps = b.node(
            "Range", ["const/zero", b.node("ReduceMax", [count], p, keepdims=0), "const/one_int"], p
        )
        steps = b.node("Unsqueeze", [steps, "const/axes_1"], p)  # [K, 1]
        write = b.node(
            "Reshape",
            [b.node("And", [b.node("Less", [steps, count], p), whole], p), "const/flat"],
            p,
        )
        where = b.node(
            "Reshape", [b.node("Sub", [ends, steps], p), "const/flat"], p
        )  # k-th from the end
        where = b.node("Unsqueeze", [b.node("Compress", [where, write], p), "const/axes_1"], p)
        pieces = b.node("Compress", [b.node("Reshape", [pieces, "const/flat"], p), write], p)
        new = b.node("ScatterND", [current, where, pieces], p)
        changed = b.node(
            "Cast",
            [b.node("Not", [b.node("Equal", [new, current], p)], p)],
            p,
            to=TensorProto.INT64,
        )
        changed = b.node(
            "Greater", [b.node("ReduceMax", [changed], p, keepdims=0), "const/zero"], p
        )
        return changed, [new], []

    (ordered,) = _loop(g, passes, [(flat_ids, TensorProto.INT64)], one_pass, [], prefix + "/passes")
    # allowzero: a batch of empty rows has M = 0, which Reshape would otherwise copy.
    return g.node("Reshape", [ordered, shape], prefix, allowzero=1)
