"""ALBERT's pretraining objective, written so replicas add up to the single-device value.

The original (google-research/albert `run_pretraining.py`):
  MLM = sum(weights * CE(masked positions)) / (sum(weights) + 1e-5)
  SOP = mean over examples of CE(sentence-order logits)
  total = MLM + SOP
The sentence head's term is the same for BERT's next-sentence labels (data written with
`--sentence-task nsp`); with `none` the total is the MLM loss alone. The sums are named for the
sentence head (`sentence_*`) whatever its task; `metrics_from_sums` names the reported metrics
by the data's task (sop_loss, nsp_accuracy, ...).
With a batch split over replicas, each replica divides its own numerator by the GLOBAL
denominators (the weight sum and example count of the whole global batch). The per-replica
losses then sum to the single-device loss, and so do their gradients, which is what
`tf.distribute` aggregates (the semantics of `tf.nn.compute_average_loss`, extended to the
weighted MLM mean).
"""

from __future__ import annotations

import tensorflow as tf

MLM_EPSILON = 1e-5  # the original's denominator guard


def pretraining_sums(
    mlm_logits: tf.Tensor, sop_logits: tf.Tensor, batch: dict[str, tf.Tensor]
) -> dict[str, tf.Tensor]:
    """Additive per-batch statistics (float32 scalars) from which losses and metrics follow.

    mlm_logits: [B, P, V]; sop_logits: [B, 2] (the sentence head's); batch: masked_lm_ids int32
    [B, P], masked_lm_weights float32 [B, P], sentence_order_label int32 [B] (the data's
    next_sentence_labels, SOP or NSP), example_weight float32 [B].
    Keys: mlm_ce_sum (sum of weights * CE), mlm_weight_sum, mlm_correct_sum (weighted),
    sentence_ce_sum, sentence_correct_sum and example_count (all weighted by example_weight).
    """
    mlm_logits = tf.cast(mlm_logits, tf.float32)
    sop_logits = tf.cast(sop_logits, tf.float32)
    weights = tf.cast(batch["masked_lm_weights"], tf.float32)
    example_weight = tf.cast(batch["example_weight"], tf.float32)
    mlm_ids = batch["masked_lm_ids"]
    sop_labels = batch["sentence_order_label"]

    mlm_ce = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=mlm_ids, logits=mlm_logits)
    mlm_hit = tf.cast(
        tf.equal(tf.argmax(mlm_logits, -1, output_type=tf.int32), mlm_ids), tf.float32
    )
    sop_ce = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=sop_labels, logits=sop_logits)
    sop_hit = tf.cast(
        tf.equal(tf.argmax(sop_logits, -1, output_type=tf.int32), sop_labels), tf.float32
    )
    return {
        "mlm_ce_sum": tf.reduce_sum(weights * mlm_ce),
        "mlm_weight_sum": tf.reduce_sum(weights),
        "mlm_correct_sum": tf.reduce_sum(weights * mlm_hit),
        "sentence_ce_sum": tf.reduce_sum(example_weight * sop_ce),
        "sentence_correct_sum": tf.reduce_sum(example_weight * sop_hit),
        "example_count": tf.reduce_sum(example_weight),
    }


def replica_loss(
    sums: dict[str, tf.Tensor],
    global_mlm_weight_sum: tf.Tensor,
    global_example_count: tf.Tensor,
    sentence_task: str = "sop",
) -> dict[str, tf.Tensor]:
    """This replica's share of the MLM, sentence-task and total loss (float32 scalars).

    Summed over replicas these are the original's losses on the global batch; with one replica
    (global = local sums) they are exactly the original's. With `sentence_task` "none" the total
    is the MLM loss alone.
    """
    mlm = sums["mlm_ce_sum"] / (global_mlm_weight_sum + MLM_EPSILON)
    sentence = sums["sentence_ce_sum"] / tf.maximum(global_example_count, 1.0)
    total = mlm if sentence_task == "none" else mlm + sentence
    return {"mlm_loss": mlm, "sentence_loss": sentence, "loss": total}


def metrics_from_sums(sums: dict[str, float], sentence_task: str = "sop") -> dict[str, float]:
    """Losses and accuracies from (globally summed) pretraining_sums values.

    Keys: loss, mlm_loss, mlm_accuracy and, unless `sentence_task` is "none" (then loss is
    mlm_loss), `{sentence_task}_loss` and `{sentence_task}_accuracy` (sop_loss, nsp_accuracy).
    """
    weight = float(sums["mlm_weight_sum"])
    count = float(sums["example_count"])
    mlm_loss = float(sums["mlm_ce_sum"]) / (weight + MLM_EPSILON)
    mlm_accuracy = float(sums["mlm_correct_sum"]) / max(weight, MLM_EPSILON)
    if sentence_task == "none":
        return {"loss": mlm_loss, "mlm_loss": mlm_loss, "mlm_accuracy": mlm_accuracy}
    sentence_loss = float(sums["sentence_ce_sum"]) / max(count, 1.0)
    return {
        "loss": mlm_loss + sentence_loss,
        "mlm_loss": mlm_loss,
        f"{sentence_task}_loss": sentence_loss,
        "mlm_accuracy": mlm_accuracy,
        f"{sentence_task}_accuracy": float(sums["sentence_correct_sum"]) / max(count, 1.0),
    }
