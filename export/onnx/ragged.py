"""Ragged tensors in ONNX graphs: flat values [P] with int64 row lengths [N], whose rows are
gathered into a dense [N, M] tensor. Shared by the tokenization (`albert_tf.export.onnx.text`) and the
windows (`albert_tf.export.onnx.windows`); a module of their own because text.py imports windows.py."""

from __future__ import annotations

from albert_tf.export.onnx.encoder import GraphBuilder


def row_starts(g: GraphBuilder, counts: str, zero: str, prefix: str) -> str:
    """Where each row starts in the flat values: row lengths int64 [N] -> [N]. `zero`: an
    int64 scalar 0 (CumSum's axis)."""
    return g.node("Sub", [g.node("CumSum", [counts, zero], prefix), counts], prefix)


def gather_rows(
    g: GraphBuilder,
    values: str,
    starts: str,
    lengths: str,
    columns: str,
    pad: str,
    axis: str,
    prefix: str,
) -> tuple[str, str]:
    """Row r = values[starts[r] : starts[r] + lengths[r]] of flat `values` [P] (starts and
    lengths int64 [N]), padded with `pad` ([1], the values' dtype): (dense [N, M], valid bool
    [N, M]). `columns` int64 [M] or [1, M] holds 0 to M - 1, M at least the longest length;
    `axis` an int64 [1] holding 1."""
    index = g.node("Add", [g.node("Unsqueeze", [starts, axis], prefix), columns], prefix)
    valid = g.node("Less", [columns, g.node("Unsqueeze", [lengths, axis], prefix)], prefix)
    padded = g.node("Concat", [values, pad], prefix, axis=0)  # [P + 1]
    index = g.node("Where", [valid, index, g.node("Size", [values], prefix)], prefix)
    return g.node("Gather", [padded, index], prefix), valid
