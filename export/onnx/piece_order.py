"""The order of pieces within runs of one repeated string, as the `sentencepiece` package
gives it, in ONNX operators: `albert_tf.preprocess.piece_order` says why orders tie and which one
`sentencepiece` picks, and builds the tables; this module redoes the Viterbi inside each run as
ONNX `Loop`s (the preprocessing SavedModel does the same in TensorFlow ops,
`albert_tf.preprocess.graph_piece_order`).

onnxruntime-extensions' `SentencepieceTokenizer` finds the same best segmentation as the
`sentencepiece` package but orders tied pieces its own way (of generated strings of such runs,
about a third). Steps, over piece ids [N, M]:

1. the row's score before each piece: an exclusive float32 `CumSum` along the row;
2. per run of 2 or more pieces of one class, a `Loop` over its positions (in roots) keeps the
   last scores in a window and picks, for each position, the best last piece (ties to the
   longest: `ArgMax` with `select_last_index`); a second `Loop` walks back from the run's end;
3. the new order is scattered over the run; steps 1-3 repeat until nothing changes (a `Loop`
   with a condition: run k is right after pass k, and a pass without change proves every run
   right).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

from albert_tf.export.onnx.encoder import GraphBuilder


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


def shifted(g: GraphBuilder, x: str, fill: str, after: bool, prefix: str) -> str:
    """x [N, M] moved by one column within each row: each element's left neighbour (right with
    `after`), `fill` (a scalar of x's type) beyond the row's ends."""
    pads = [0, 0, 0, 1] if after else [0, 1, 0, 0]
    padded = g.node("Pad", [x, g.constant(f"{prefix}/pads_{after}", pads, np.int64), fill], prefix)
    bounds = ["const/ones_1", "const/max_1"] if after else ["const/zeros_1", "const/minus_ones_1"]
    return g.node("Slice", [padded, *bounds, "const/ones_1"], prefix)  # [N, M]


def _runs(g: GraphBuilder, root_class: str, prefix: str) -> tuple[str, str]:
    """The runs of 2 or more pieces of one class in `root_class` int64 [N, M] (-1: none):
    flat (row-major) positions of their first and of their last pieces, int64 [R] each."""
    minus_one = g.constant(f"{prefix}/minus_one", -1, np.int64)
    in_run = g.node("GreaterOrEqual", [root_class, "const/zero"], prefix)

    def edges(after: bool) -> str:
        neighbour = shifted(g, root_class, minus_one, after, prefix)
        other = g.node("Not", [g.node("Equal", [root_class, neighbour], prefix)], prefix)
        edge = g.node("Reshape", [g.node("And", [in_run, other], prefix), "const/flat"], prefix)
        return g.node("Reshape", [g.node("NonZero", [edge], prefix), "const/flat"], prefix)

    starts, ends = edges(after=False), edges(after=True)  # paired in order: one per run
    several = g.node("Greater", [ends, starts], prefix)
    starts = g.node("Compress", [starts, several], prefix)
    return starts, g.node("Compress", [ends, several], prefix)


def _forward(b: GraphBuilder, entry: str, run: dict[str, str], longest: int, p: str) -> str:
    """The Viterbi over each run's positions from score `entry` float32 [R] at its start:
    int64 [R, U], at each position (1..U roots into the run) the length in roots of the best
    last piece ending there."""
    tail = b.node(
        "Concat",
        [b.node("Shape", [entry], p), b.constant(f"{p}/tail", [longest - 1], np.int64)],
        p,
        axis=0,
    )  # [2]: R, Lmax - 1
    minus_inf = b.constant(f"{p}/minus_inf", [[-np.inf]], np.float32)
    start = [
        b.node("Unsqueeze", [entry, "const/axes_1"], p),
        b.node("Expand", [minus_inf, tail], p),
    ]
    window = b.node("Concat", start, p, axis=1)  # [R, Lmax]: best scores 1, 2, ... roots back

    def position(c: GraphBuilder, state: list[str]):
        (window,) = state
        q = f"{p}/position"
        candidate = c.node("Add", [window, run["scores"]], q)  # [R, Lmax]: last piece 1..Lmax
        # The Viterbi keeps the first of equal scores, and tries the longest last piece first.
        pick = c.node("ArgMax", [candidate], q, axis=1, keepdims=1, select_last_index=1)
        best = c.node("GatherElements", [candidate, pick], q, axis=1)  # [R, 1]
        kept = c.node("Slice", [window, "const/zeros_1", "const/minus_ones_1", "const/ones_1"], q)
        length = c.node("Add", [c.node("Squeeze", [pick, "const/axes_1"], q), "const/one_int"], q)
        return None, [c.node("Concat", [best, kept], q, axis=1)], [length]

    steps = b.node("ReduceMax", [run["units"]], p, keepdims=0)
    _, lengths = _loop(
        b, steps, [(window, TensorProto.FLOAT)], position, [TensorProto.INT64], f"{p}/forward"
    )
    return b.node("Transpose", [lengths], p, perm=[1, 0])  # [R, U]


def _backward(
    b: GraphBuilder, lengths: str, run: dict[str, str], class_ids: str, longest: int, p: str
) -> tuple[str, str]:
    """The best path of each run, walked back from its end over `lengths` [R, U]: (piece ids
    int64 [K, R], last piece first, 0 past the run's start; whole bool [R]: the walk ended at
    the run's start after as many pieces as the run has)."""
    flat_ids = b.node("Reshape", [class_ids, "const/flat"], p)  # [C * Lmax]
    first_id = b.node("Mul", [run["root"], b.constant(f"{p}/longest", longest, np.int64)], p)

    def step(c: GraphBuilder, state: list[str]):
        (at,) = state  # [R]: roots left before the walk's position
        q = f"{p}/step"
        column = c.node("Max", [c.node("Sub", [at, "const/one_int"], q), "const/zero"], q)
        column = c.node("Unsqueeze", [column, "const/axes_1"], q)  # [R, 1]
        length = c.node("GatherElements", [lengths, column], q, axis=1)
        length = c.node("Squeeze", [length, "const/axes_1"], q)
        length = c.node(
            "Where", [c.node("Greater", [at, "const/zero"], q), length, "const/zero"], q
        )
        slot = c.node("Max", [c.node("Sub", [length, "const/one_int"], q), "const/zero"], q)
        piece = c.node("Gather", [flat_ids, c.node("Add", [first_id, slot], q)], q)
        return None, [c.node("Sub", [at, length], q)], [piece, length]

    steps = b.node("ReduceMax", [run["count"]], p, keepdims=0)
    left, pieces, lengths = _loop(
        b,
        steps,
        [(run["units"], TensorProto.INT64)],
        step,
        [TensorProto.INT64] * 2,
        f"{p}/backward",
    )
    found = b.node("Cast", [b.node("Greater", [lengths, "const/zero"], p)], p, to=TensorProto.INT64)
    found = b.node("ReduceSum", [found, "const/zeros_1"], p, keepdims=0)  # [R]
    whole = b.node(
        "And",
        [b.node("Equal", [left, "const/zero"], p), b.node("Equal", [found, run["count"]], p)],
        p,
    )
    return pieces, whole


def order_runs(g: GraphBuilder, ids: str, valid: str, tables: dict, prefix: str) -> str:
    """Piece ids int64 [N, M] (rows padded where `valid` bool [N, M] is false) with every
    run in `sentencepiece`'s order -> int64 [N, M]."""
    t = {k: g.constant(f"{prefix}/{k}", v, v.dtype) for k, v in tables.items()}
    longest = tables["class_scores"].shape[1]
    root_class = g.node("Gather", [t["root_class"], ids], prefix)
    root_class = g.node(
        "Where", [valid, root_class, g.constant(f"{prefix}/none", -1, np.int64)], prefix
    )
    starts, ends = _runs(g, root_class, prefix)
    flat_ids = g.node("Reshape", [ids, "const/flat"], prefix)  # [N * M]
    units = g.node("Gather", [t["units"], flat_ids], prefix)  # [N * M]
    total = g.node("CumSum", [units, "const/zero"], prefix)
    before_run = g.node(
        "Sub",
        [g.node("Gather", [total, starts], prefix), g.node("Gather", [units, starts], prefix)],
        prefix,
    )
    run_class = g.node(
        "Gather", [g.node("Reshape", [root_class, "const/flat"], prefix), starts], prefix
    )
    run = dict(
        count=g.node("Add", [g.node("Sub", [ends, starts], prefix), "const/one_int"], prefix),
        units=g.node("Sub", [g.node("Gather", [total, ends], prefix), before_run], prefix),
        scores=g.node("Gather", [t["class_scores"], run_class], prefix),  # [R, Lmax]
        root=run_class,
    )  # [R] each: pieces, length in roots, scores of the class's pieces by length, class
    shape = g.node("Shape", [ids], prefix)

    def one_pass(b: GraphBuilder, state: list[str]):
        (current,) = state  # [N * M]
        p = f"{prefix}/pass"
        # allowzero: a batch of empty rows has M = 0, which Reshape would otherwise copy.
        scores = b.node(
            "Reshape", [b.node("Gather", [t["score"], current], p), shape], p, allowzero=1
        )
        # The row's score before each piece, summed left to right in float32 as the Viterbi.
        before = b.node("CumSum", [scores, "const/one_int"], p, exclusive=1)  # [N, M]
        entry = b.node("Gather", [b.node("Reshape", [before, "const/flat"], p), starts], p)
        lengths = _forward(b, entry, run, longest, p)
        pieces, whole = _backward(b, lengths, run, t["class_ids"], longest, p)
        # Piece k of the walk (last first) goes k places before the run's end; a run whose walk
        # is not whole (never seen: onnxruntime-extensions finds the Viterbi's pieces) stays.
        k = b.node(
            "Range",
            ["const/zero", b.node("ReduceMax", [run["count"]], p, keepdims=0), "const/one_int"],
            p,
        )
        k = b.node("Unsqueeze", [k, "const/axes_1"], p)  # [K, 1]
        write = b.node("And", [b.node("Less", [k, run["count"]], p), whole], p)  # [K, R]
        write = b.node("Reshape", [write, "const/flat"], p)
        where = b.node("Reshape", [b.node("Sub", [ends, k], p), "const/flat"], p)
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

    # Pass k leaves runs 1..k right; a pass that changes nothing ends the loop, and none runs
    # without runs (a Loop's body needs at least one run to have shapes).
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
    (ordered,) = _loop(g, passes, [(flat_ids, TensorProto.INT64)], one_pass, [], f"{prefix}/passes")
    return g.node("Reshape", [ordered, shape], prefix, allowzero=1)
