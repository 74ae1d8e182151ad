"""The order of tied pieces as `sentencepiece` gives it, in TensorFlow ops: the Viterbi of
`albert_tf.preprocess.piece_order` redone inside each run of pieces of one repeated string, for the
preprocessing SavedModel (`albert_tf.preprocess.graph_tokenizer`). The ONNX text graph runs the same steps
as ONNX operators (`albert_tf.export.onnx.piece_order`).
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

# Positions of a run the Viterbi's loops take per iteration.
UNROLL = 8


def _exclusive_row_cumsum(values: tf.Tensor, row_starts: tf.Tensor, rows: tf.Tensor):
    """int [N] -> the sum of the values before each one within its row (exact for ints)."""
    total = tf.math.cumsum(values, exclusive=True)  # [N]
    return total - tf.gather(total, tf.gather(row_starts, rows))


class PieceOrder(tf.Module):
    """Puts the pieces of every run of one repeated string back in `sentencepiece`'s order.

    Args:
      tables: `albert_tf.preprocess.piece_order.piece_tables` of the model the ids come from (vocabulary
        ids, and the 256 byte ids of its byte-fallback model after them).
    """

    def __init__(self, tables: dict[str, np.ndarray], name: str | None = None):
        super().__init__(name=name)
        self._score = tf.constant(tables["score"], tf.float32)  # [V + 256]
        self._root_class = tf.constant(tables["root_class"], tf.int32)  # [V + 256]
        self._units = tf.constant(tables["units"], tf.int32)  # [V + 256]
        self._class_scores = tf.constant(tables["class_scores"], tf.float32)  # [C, Lmax]
        self._class_ids = tf.constant(tables["class_ids"], tf.int32)  # [C, Lmax]
        self._longest = int(tables["class_scores"].shape[1])

    def _runs(self, ids: tf.RaggedTensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        """The runs of 2 or more pieces of one class in int32 ids [B, (P)]: flat positions of
        their first and of their last pieces, int32 [R] each, and the class of each piece
        int32 [N] (-1: none)."""
        flat = ids.flat_values  # [N]
        rows = ids.value_rowids()  # [N]
        root_class = tf.gather(self._root_class, flat)
        same_class = (root_class[1:] == root_class[:-1]) & (rows[1:] == rows[:-1])  # [N - 1]
        no = tf.zeros([1], tf.bool)
        in_class = root_class >= 0
        starts = tf.where(in_class & ~tf.concat([no, same_class], 0))[:, 0]
        ends = tf.where(in_class & ~tf.concat([same_class, no], 0))[:, 0]
        several = ends > starts  # one start and one end per maximal run, paired in order
        starts = tf.cast(tf.boolean_mask(starts, several), tf.int32)
        return starts, tf.cast(tf.boolean_mask(ends, several), tf.int32), root_class

    def unknown_before_run(self, ids: tf.RaggedTensor, unk_id: int) -> tf.Tensor:
        """bool [B]: whether a row of int32 ids [B, (P)] has `unk_id` before a run. Its order
        depends on how many characters the `<unk>` stands for, which the ids do not tell."""
        starts, _, _ = self._runs(ids)
        rows = tf.cast(ids.value_rowids(), tf.int32)
        unknowns = _exclusive_row_cumsum(
            tf.cast(ids.flat_values == unk_id, tf.int32), tf.cast(ids.row_starts(), tf.int32), rows
        )  # [N]: <unk> pieces before each piece of its row
        after_unknown = tf.cast(tf.gather(unknowns, starts) > 0, tf.int32)  # [R]
        num_rows = tf.cast(ids.nrows(), tf.int32)
        return tf.math.unsorted_segment_max(after_unknown, tf.gather(rows, starts), num_rows) > 0

    def __call__(self, ids: tf.RaggedTensor) -> tf.RaggedTensor:
        """int32 ids [B, (P)] (row splits int64) -> the same pieces, every run in
        `sentencepiece`'s order. Its loops take a step per position of a run: call it in a
        graph."""
        starts, ends, root_class = self._runs(ids)
        flat = ids.flat_values  # [N]
        units = tf.gather(self._units, flat)
        before = _exclusive_row_cumsum(
            units, tf.cast(ids.row_starts(), tf.int32), tf.cast(ids.value_rowids(), tf.int32)
        )  # [N]: roots before each piece in its row
        root = tf.gather(root_class, starts)
        run = dict(
            starts=starts,
            ends=ends,
            count=ends - starts + 1,  # [R]: pieces
            units=tf.gather(before + units, ends) - tf.gather(before, starts),  # [R]: roots
            root=root,  # [R]: class
            scores=tf.gather(self._class_scores, root),  # [R, Lmax]: its pieces by length
        )
        ordered = tf.cond(tf.size(starts) > 0, lambda: self._order(ids, run), lambda: flat)
        return ids.with_flat_values(ordered)

    def _order(self, ids: tf.RaggedTensor, run: dict[str, tf.Tensor]) -> tf.RaggedTensor:
        """Passes over all runs until one changes nothing (at most runs + 1): flat ids [N]."""
        num_runs = tf.size(run["starts"])

        def one_pass(current, _, passes):
            scores = ids.with_flat_values(tf.gather(self._score, current)).to_tensor()  # [B, M]
            # The row's score before each piece, summed left to right in float32 as the Viterbi.
            before = tf.math.cumsum(scores, axis=1, exclusive=True)  # [B, M]
            before = tf.RaggedTensor.from_tensor(before, lengths=ids.row_lengths()).flat_values
            lengths = self._forward(tf.gather(before, run["starts"]), run)  # [R, U]
            pieces, whole = self._backward(lengths, run)  # [K, R], [R]
            # Piece k of the walk (last first) goes k places before the run's end; a run whose
            # walk is not whole (never seen: the tokenizers find the Viterbi's pieces) stays.
            k = tf.range(tf.shape(pieces)[0])[:, tf.newaxis]  # [K, 1]
            write = (k < run["count"]) & whole  # [K, R]
            where = tf.boolean_mask(run["ends"] - k, write)[:, tf.newaxis]
            new = tf.tensor_scatter_nd_update(current, where, tf.boolean_mask(pieces, write))
            return new, tf.reduce_any(new != current), passes + 1

        ordered, _, _ = tf.while_loop(
            lambda current, changed, passes: changed & (passes <= num_runs),
            one_pass,
            (ids.flat_values, tf.constant(True), tf.constant(0)),
        )
        return ordered

    def _forward(self, entry: tf.Tensor, run: dict[str, tf.Tensor]) -> tf.Tensor:
        """The Viterbi over each run's positions from score `entry` float32 [R] at its start:
        int32 [R, U'] (U' >= U), at each position (1..U roots into the run) the length in roots
        of the best last piece ending there."""
        longest = self._longest
        window = tf.concat(
            [entry[:, tf.newaxis], tf.fill([tf.size(entry), longest - 1], -np.inf)], 1
        )  # [R, Lmax]: best scores 1, 2, ... roots back
        lengths = tf.range(1, longest + 1)  # [Lmax]

        def positions(i, window, picked):
            # UNROLL positions per iteration: the loop's own ops cost as much as a position's.
            picks = []
            for _ in range(UNROLL):
                candidate = window + run["scores"]  # [R, Lmax]: last piece 1..Lmax roots long
                best = tf.reduce_max(candidate, axis=1, keepdims=True)  # [R, 1]
                # The Viterbi keeps the first of equal scores, and tries the longest first.
                picks.append(tf.reduce_max(tf.where(candidate == best, lengths, 0), axis=1))
                window = tf.concat([best, window[:, :-1]], 1)
            return i + 1, window, picked.write(i, tf.stack(picks, 1))  # [R, UNROLL]

        blocks = (tf.reduce_max(run["units"]) + UNROLL - 1) // UNROLL
        _, _, picked = tf.while_loop(
            lambda i, *_: i < blocks,
            positions,
            (tf.constant(0), window, tf.TensorArray(tf.int32, size=blocks)),
        )
        picked = tf.transpose(picked.stack(), [1, 0, 2])  # [R, blocks, UNROLL]
        return tf.reshape(picked, [tf.size(entry), -1])  # [R, blocks * UNROLL]

    def _backward(self, lengths: tf.Tensor, run: dict[str, tf.Tensor]):
        """The best path of each run, walked back from its end over `lengths` [R, U]: (piece
        ids int32 [K, R], last piece first; whole bool [R]: the walk ended at the run's start
        after as many pieces as the run has)."""
        blocks = (tf.reduce_max(run["count"]) + UNROLL - 1) // UNROLL

        def steps(i, at, taken):
            # at [R]: roots left before the walk's position.
            block = []
            for _ in range(UNROLL):
                column = tf.maximum(at - 1, 0)[:, tf.newaxis]  # [R, 1]
                length = tf.where(at > 0, tf.gather(lengths, column, batch_dims=1)[:, 0], 0)
                block.append(length)
                at -= length
            return i + 1, at, taken.write(i, tf.stack(block))  # [UNROLL, R]

        _, left, taken = tf.while_loop(
            lambda i, *_: i < blocks,
            steps,
            (tf.constant(0), run["units"], tf.TensorArray(tf.int32, size=blocks)),
        )
        taken = tf.reshape(taken.stack(), [-1, tf.size(left)])  # [K', R]: 0 past the start
        slot = tf.stack([tf.broadcast_to(run["root"], tf.shape(taken)), taken - 1], -1)
        pieces = tf.gather_nd(self._class_ids, tf.maximum(slot, 0))  # [K', R]
        found = tf.reduce_sum(tf.sign(taken), 0)
        return pieces, (left == 0) & (found == run["count"])
