"""The quickstart's held-out figures, each beside the baselines a reader needs.

Three predictors answer the same held-out masked positions and sentence pairs (pretraining data
made from the held-out documents, masked like the training data):
  - the trained model;
  - the same model with random weights (same config, same seed for the initializers);
  - the unigram guess: the most frequent masked pieces of the training data, the same five for
    every blank (its SOP guess is the more frequent training label, so about 50%).
"Rare" blanks are those whose answer is not among the RARE_RANK most frequent training pieces:
there the unigram guess scores 0 by construction, so any hit is learned from context.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

RARE_RANK = 50
EVAL_BATCH = 64


@dataclass(frozen=True)
class Scores:
    """Held-out accuracies of one predictor (fractions in [0, 1])."""

    mlm_top1: float
    mlm_top5: float
    rare_top5: float  # top-5 over blanks whose answer is not a top-RARE_RANK training piece
    sop: float


@dataclass(frozen=True)
class HeldOut:
    """Held-out pretraining examples as numpy arrays: int32 `input_word_ids, input_mask,
    input_type_ids` [N, S], `masked_lm_positions, masked_lm_ids` [N, P], float32
    `masked_lm_weights` [N, P] (0 for padding predictions), int32 `sentence_order_label` [N]."""

    arrays: dict[str, np.ndarray]

    @property
    def size(self) -> int:
        return len(self.arrays["sentence_order_label"])

    @property
    def masked(self) -> int:
        return int((self.arrays["masked_lm_weights"] > 0).sum())

    def batches(self):
        for start in range(0, self.size, EVAL_BATCH):
            yield {k: v[start : start + EVAL_BATCH] for k, v in self.arrays.items()}


def read_examples(pattern: str, config) -> HeldOut:
    """Every example of the pretraining shards matching `pattern` (small: the held-out set)."""
    from albert_tf.pretraining import data as data_lib

    spec = data_lib.inspect_data(pattern, config)
    keys = (*data_lib.MODEL_INPUTS, *data_lib.LABELS)
    rows: dict[str, list[np.ndarray]] = {k: [] for k in keys}
    for batch in data_lib.eval_dataset(spec, EVAL_BATCH):
        keep = batch["example_weight"].numpy() > 0  # the last batch is padded
        for k in keys:
            rows[k].append(batch[k].numpy()[keep])
    arrays = {k: np.concatenate(v) for k, v in rows.items() if k != "example_weight"}
    return HeldOut(arrays)


def piece_counts(training: HeldOut, vocab_size: int) -> np.ndarray:
    """int64 [V]: how often each piece is a masked answer in the training examples."""
    weights = training.arrays["masked_lm_weights"] > 0
    answers = training.arrays["masked_lm_ids"][weights]
    return np.bincount(answers, minlength=vocab_size).astype(np.int64)


def frequency_order(counts: np.ndarray) -> np.ndarray:
    """Piece ids, most frequent first (ties by id, so the order is stable): int [V]."""
    return np.lexsort((np.arange(len(counts)), -counts))


def _accuracies(top5: np.ndarray, answers: np.ndarray, rare: np.ndarray, sop_hits: np.ndarray):
    """Scores from top-5 guesses [M, 5] for M answers [M], a rare-answer mask [M], and SOP hits."""
    hit5 = (top5 == answers[:, None]).any(axis=1)
    return Scores(
        mlm_top1=float((top5[:, 0] == answers).mean()),
        mlm_top5=float(hit5.mean()),
        rare_top5=float(hit5[rare].mean()) if rare.any() else 0.0,
        sop=float(sop_hits.mean()),
    )


def _answers(heldout: HeldOut, rank: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(answers [M], rare mask [M]) over the real predictions, in example order."""
    weights = heldout.arrays["masked_lm_weights"] > 0
    answers = heldout.arrays["masked_lm_ids"][weights]
    return answers, rank[answers] >= RARE_RANK


def unigram_scores(heldout: HeldOut, counts: np.ndarray, sop_labels: np.ndarray) -> Scores:
    """The unigram guess: the five most frequent training pieces at every blank, and the more
    frequent training SOP label for every pair."""
    order = frequency_order(counts)
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    answers, rare = _answers(heldout, rank)
    top5 = np.broadcast_to(order[:5], (len(answers), 5))
    majority = int(np.bincount(sop_labels, minlength=2).argmax())
    sop_hits = heldout.arrays["sentence_order_label"] == majority
    return _accuracies(top5, answers, rare, sop_hits)


def model_scores(model, heldout: HeldOut, counts: np.ndarray) -> Scores:
    """`model` (an AlbertPretrainingModel) on every held-out blank and pair."""
    import tensorflow as tf

    from albert_tf.pretraining.data import MODEL_INPUTS

    order = frequency_order(counts)
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    top5, sop_hits = [], []
    for batch in heldout.batches():
        outputs = model({k: tf.constant(batch[k]) for k in MODEL_INPUTS}, training=False)
        weights = batch["masked_lm_weights"] > 0
        top = tf.math.top_k(outputs["mlm_logits"], k=5).indices.numpy()  # [B, P, 5]
        top5.append(top[weights])
        predicted = outputs["sop_logits"].numpy().argmax(-1)
        sop_hits.append(predicted == batch["sentence_order_label"])
    answers, rare = _answers(heldout, rank)
    return _accuracies(np.concatenate(top5), answers, rare, np.concatenate(sop_hits))


def load_model(config, checkpoint_prefix: str | None, seed: int):
    """The pretraining model with `checkpoint_prefix`'s weights, or (None) random weights drawn
    with `seed` the way pretraining draws its initial weights."""
    import tf_keras as keras

    from albert_tf.models import AlbertPretrainingModel
    from albert_tf.pretraining.loop import dummy_inputs
    from albert_tf.pretraining.trainer import restore_weights

    keras.utils.set_random_seed(seed)
    model = AlbertPretrainingModel(config)
    model(dummy_inputs(8, 1), training=False)  # creates the weights, so restoring checks them
    if checkpoint_prefix is not None:
        restore_weights(model, checkpoint_prefix, {"encoder", "mlm", "sop"}, "the quickstart model")
    return model
