"""Long-document windows in ONNX: the twin of `albert_tf.finetune.windows`'s graph functions.

A classifier fine-tuned with `--max-windows` K > 1 reads a long text as up to K windows
(`finetune.windows` says how). The raw-string ONNX classifier does what `serving/` does:

- `window_plan` is `graph_window_plan` (so `window_starts`, the one formula) as ONNX operators:
  the first token of every window and whether the text has it, [B, K];
- `window_segments` cuts the tokenized texts into the segments of the real windows only, W rows
  in text order (text A of a pair, cut to `first_segment_bound`, repeated in each of its
  text's windows), which `albert_tf.export.onnx.text.pack` packs as for any other rows: the encoder runs
  on [W, S];
- `pool_windows` puts the W window logits back at their [B, K] places and pools each text's
  real windows by their mean or max, as `finetune.windows.pool_windows`.

Integers are int64. ONNX's integer `Div` truncates where TensorFlow's `//` floors; every
quotient whose value is used is of non-negative numbers, where the two agree (`spread` divides
a negative span for texts that fit in K windows, and `Where` then takes the head's starts).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np
from onnx import TensorProto, numpy_helper

from albert_tf.export.onnx.encoder import GraphBuilder
from albert_tf.export.onnx.ragged import gather_rows, row_starts
from albert_tf.finetune.windows import first_segment_bound

# The preprocessing graph's extra output: which of a text's K windows it has, bool [B, K].
WINDOW_PRESENT = "window_present"


@dataclass(frozen=True)
class Windows:
    """A fine-tuned classifier's window settings: the `FinetuneSettings` fields of the same
    names (stride None: half a window; first-segment length None: half the packed room)."""

    max_windows: int
    window_stride: int | None
    window_placement: str
    window_pooling: str
    max_first_segment_length: int | None

    @classmethod
    def of(cls, settings: Any) -> Windows | None:
        """The windows of `settings` (a `FinetuneSettings`), None for a single-window model."""
        if settings.max_windows <= 1:
            return None
        return cls(**{field.name: getattr(settings, field.name) for field in fields(cls)})

    def record(self) -> dict[str, Any]:
        """The settings as the export's report.json records them (finetune.json's names)."""
        return asdict(self)


def _int(g: GraphBuilder, prefix: str, name: str, value: Any) -> str:
    return g.constant(f"{prefix}/{name}", value, np.int64)


def window_plan(
    g: GraphBuilder,
    num_tokens: str,
    room: str,
    max_windows: str,
    stride: str,
    placement: str,
    prefix: str,
) -> tuple[str, str]:
    """`graph_window_plan`: token counts and rooms int64 [B], K and the stride int64 scalars
    (stride 0: half the room) in; first token of every window int64 [B, K] and whether the
    text has that window bool [B, K] out. K may be a graph input (the tests vary it)."""
    zero, one = _int(g, prefix, "zero", 0), _int(g, prefix, "one", 1)
    two, axis_1 = _int(g, prefix, "two", 2), _int(g, prefix, "axis_1", [1])
    default = g.node("Max", [g.node("Div", [room, two], prefix), one], prefix)
    given = g.node("Min", [stride, room], prefix)  # never past the room
    steps = g.node("Where", [g.node("Greater", [stride, zero], prefix), given, default], prefix)
    beyond = g.node("Max", [g.node("Sub", [num_tokens, room], prefix), zero], prefix)  # [B]
    ceiling = g.node(
        "Div", [g.node("Sub", [g.node("Add", [beyond, steps], prefix), one], prefix), steps], prefix
    )
    needed = g.node("Add", [one, ceiling], prefix)  # [B]
    window = g.node(
        "Unsqueeze",
        [g.node("Range", [zero, max_windows, one], prefix), _int(g, prefix, "axis_0", [0])],
        prefix,
    )  # [1, K]
    steps = g.node("Unsqueeze", [steps, axis_1], prefix)  # [B, 1]
    starts = g.node("Mul", [window, steps], prefix)  # [B, K]: head
    if placement != "head":
        span = g.node("Unsqueeze", [g.node("Sub", [num_tokens, room], prefix), axis_1], prefix)
        last = g.node("Sub", [max_windows, one], prefix)  # K - 1
        if placement == "spread":
            # K = 1 never takes this branch (below); Max keeps the division defined.
            placed = g.node(
                "Div",
                [g.node("Mul", [window, span], prefix), g.node("Max", [last, one], prefix)],
                prefix,
            )
        else:  # head-tail
            back = g.node("Mul", [g.node("Sub", [last, window], prefix), steps], prefix)
            tail = g.node("Sub", [span, back], prefix)  # [B, K]
            head_count = g.node("Div", [g.node("Add", [max_windows, one], prefix), two], prefix)
            placed = g.node(
                "Where", [g.node("Less", [window, head_count], prefix), starts, tail], prefix
            )
        longer = g.node(
            "And",
            [
                g.node("Greater", [needed, max_windows], prefix),
                g.node("Greater", [max_windows, one], prefix),
            ],
            prefix,
        )  # [B]: needs more than K windows, and K > 1
        starts = g.node(
            "Where", [g.node("Unsqueeze", [longer, axis_1], prefix), placed, starts], prefix
        )
    count = g.node("Unsqueeze", [g.node("Min", [needed, max_windows], prefix), axis_1], prefix)
    return starts, g.node("Less", [window, count], prefix)


def _rows(g: GraphBuilder, ids: str, starts: str, lengths: str, width: int, prefix: str) -> str:
    """Flat ids [T] in; row r = ids[starts[r] : starts[r] + lengths[r]] (lengths int64 [R], at
    most `width`), concatenated in row order, out: flat ids [sum(lengths)]."""
    axis, flat = _int(g, prefix, "axis", [1]), _int(g, prefix, "flat", [-1])
    columns = _int(g, prefix, "columns", np.arange(width)[np.newaxis])  # [1, width]
    pad = _int(g, prefix, "pad", [0])
    dense, valid = gather_rows(g, ids, starts, lengths, columns, pad, axis, prefix)  # [R, width]
    return g.node(
        "Compress",
        [g.node("Reshape", [dense, flat], prefix), g.node("Reshape", [valid, flat], prefix)],
        prefix,
    )


def window_segments(
    g: GraphBuilder,
    segments: list[tuple[str, str]],
    seq_length: int,
    windows: Windows,
    prefix: str,
) -> tuple[list[tuple[str, str]], str]:
    """`graph_windows` up to the packing: tokenized texts (flat ids [T], row lengths int64 [B];
    one segment, or text A and text B of a pair) in; the segments of the W real windows (flat
    ids, row lengths [W]; text by text, window by window) and which of its K windows each text
    has, bool [B, K], out. `text.pack` of those segments gives the features `graph_windows`
    gives the real windows."""
    *first, (ids, num_tokens) = segments
    zero, one = _int(g, prefix, "zero", 0), _int(g, prefix, "one", 1)
    axis, flat = _int(g, prefix, "axis", [1]), _int(g, prefix, "flat", [-1])
    batch = g.node("Shape", [num_tokens], prefix)  # [1]
    if first:
        bound = first_segment_bound(seq_length, windows.max_first_segment_length)
        first_ids, first_counts = first[0]
        kept = g.node("Min", [first_counts, _int(g, prefix, "bound", bound)], prefix)  # [B]
        room = g.node("Sub", [_int(g, prefix, "room", seq_length - 3), kept], prefix)
    else:
        room = g.node("Expand", [_int(g, prefix, "room", seq_length - 2), batch], prefix)
    max_windows = _int(g, prefix, "max_windows", windows.max_windows)
    stride = _int(g, prefix, "stride", windows.window_stride or 0)
    starts, present = window_plan(
        g, num_tokens, room, max_windows, stride, windows.window_placement, f"{prefix}/plan"
    )  # [B, K]
    present_flat = g.node("Reshape", [present, flat], prefix)  # [B * K]
    text = g.node("Range", [zero, g.node("Squeeze", [batch], prefix), one], prefix)  # [B]
    text = g.node(
        "Expand",
        [g.node("Unsqueeze", [text, axis], prefix), g.node("Shape", [starts], prefix)],
        prefix,
    )  # [B, K]
    # The text and first token of each real window, [W]: a Compress of the flat [B * K].
    text = g.node("Compress", [g.node("Reshape", [text, flat], prefix), present_flat], prefix)
    start = g.node("Compress", [g.node("Reshape", [starts, flat], prefix), present_flat], prefix)
    # A window holds min(room, tokens left) tokens: keep = offset < room & position < n.
    left = g.node("Sub", [g.node("Gather", [num_tokens, text], prefix), start], prefix)  # [W]
    length = g.node("Min", [g.node("Gather", [room, text], prefix), left], prefix)
    length = g.node("Max", [length, zero], prefix)  # [W]
    begin = g.node(
        "Add",
        [g.node("Gather", [row_starts(g, num_tokens, zero, prefix), text], prefix), start],
        prefix,
    )
    rows = [(_rows(g, ids, begin, length, seq_length - 2, f"{prefix}/text"), length)]
    if first:
        length = g.node("Gather", [kept, text], prefix)  # [W]
        begin = g.node("Gather", [row_starts(g, first_counts, zero, prefix), text], prefix)
        rows.insert(0, (_rows(g, first_ids, begin, length, bound, f"{prefix}/first"), length))
    return rows, present


def pool_windows(g: GraphBuilder, outputs: str, present: str, pooling: str, prefix: str) -> str:
    """`finetune.windows.pool_windows`: outputs float32 [W, D] of the real windows (text by
    text, window by window, as `window_segments` orders them) and `present` bool [B, K] in;
    each text's outputs pooled over its real windows by "mean" or "max", float32 [B, D] out."""
    # `window_outputs`: the W rows scattered to their [B, K] places, zeros elsewhere.
    size = g.node("Size", [present], prefix)
    rows = g.node("Range", [_int(g, prefix, "zero", 0), size, _int(g, prefix, "one", 1)], prefix)
    rows = g.node(
        "Compress",
        [rows, g.node("Reshape", [present, _int(g, prefix, "flat", [-1])], prefix)],  # [B * K]
        prefix,
    )  # [W]: each real window's place in [B * K]
    inner = g.node(
        "Slice",
        [
            g.node("Shape", [outputs], prefix),
            _int(g, prefix, "one_1", [1]),
            _int(g, prefix, "two_1", [2]),
        ],
        prefix,
    )  # [1]: D
    size = g.node("Reshape", [size, _int(g, prefix, "one_1_shape", [1])], prefix)  # [1]: B * K
    zeros = g.node(
        "ConstantOfShape",
        [g.node("Concat", [size, inner], prefix, axis=0)],
        prefix,
        value=numpy_helper.from_array(np.zeros(1, np.float32)),
    )  # [B * K, D]
    full = g.node(
        "ScatterND",
        [zeros, g.node("Unsqueeze", [rows, _int(g, prefix, "axis_1", [1])], prefix), outputs],
        prefix,
    )
    shape = g.node("Concat", [g.node("Shape", [present], prefix), inner], prefix, axis=0)
    full = g.node("Reshape", [full, shape], prefix)  # [B, K, D]
    present = g.node("Unsqueeze", [present, _int(g, prefix, "axis_2", [2])], prefix)  # [B, K, 1]
    if pooling == "max":
        lowest = g.constant(f"{prefix}/lowest", np.finfo(np.float32).min, np.float32)
        masked = g.node("Where", [present, full, lowest], prefix)
        return g.node("ReduceMax", [masked], prefix, axes=[1], keepdims=0)
    axis = f"{prefix}/axis_1"
    count = g.node(
        "ReduceSum",
        [g.node("Cast", [present], prefix, to=TensorProto.FLOAT), axis],
        prefix,
        keepdims=0,
    )  # [B, 1]
    count = g.node("Max", [count, g.constant(f"{prefix}/one_float", 1.0, np.float32)], prefix)
    return g.node("Div", [g.node("ReduceSum", [full, axis], prefix, keepdims=0), count], prefix)
