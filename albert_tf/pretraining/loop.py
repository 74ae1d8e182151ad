"""The compiled pretraining step: host loops of N steps, gradient accumulation, XLA, seeded dropout.

`TrainLoop.run(iterator, n)` is one call into one `tf.function`: a `tf.range(n)` loop of
`strategy.run(replica_step)` over the distributed iterator (so a TPU or GPU runs `n` steps
without returning to Python). Each step adds its loss and accuracy sums to row `i` of an
[N, len(SUM_KEYS)] on-device buffer (a SUM-aggregated sync-on-read variable); the host reads the
buffer once per loop, so it still has every step's metrics.

The replica step:
1. sums this replica's masked-LM weights and examples and all-reduces them, so every loss is
   normalized by the global batch's denominators (see losses.py);
2. computes dense gradients on K = `grad_accum_steps` micro-batches of B / replicas / K examples in a
   `tf.while_loop`, summing them in float32 (only one micro-batch's activations live at a time);
   the summed gradient is the full batch's gradient, since each micro-batch loss is already
   divided by the global denominators;
3. applies the sum once: the optimizer all-reduces across replicas, clips by global norm and
   takes one LAMB step (trust ratio, weight decay) per update, as for one batch of B.

Step 2 is the part XLA compiles with `jit_compile` (the forward and backward passes, where the
time goes); the all-reduces and the optimizer stay outside it, so the same code runs under
MirroredStrategy on GPUs. Under TPUStrategy everything is compiled anyway.

Dropout is seeded per (run seed, step, replica, micro-batch, call site) with stateless ops
(layers/dropout.py): a resumed run, a run with another steps per loop and an XLA run draw the
same masks as the uninterrupted one.
"""

from __future__ import annotations

from collections.abc import Callable

import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.layers.dropout import fold_seed, seeded_dropout
from albert_tf.models import AlbertPretrainingModel
from albert_tf.optimizer import build_optimizer
from albert_tf.pretraining import data as data_lib
from albert_tf.pretraining.losses import pretraining_sums, replica_loss

SUM_KEYS = (
    "mlm_ce_sum",
    "mlm_weight_sum",
    "mlm_correct_sum",
    "sentence_ce_sum",
    "sentence_correct_sum",
    "example_count",
)


class TrainLoop:
    """The model, optimizer, step counter and compiled loop functions under one strategy.

    Build it inside `keras_policy(dtype)`. `optimizer_args` are build_optimizer's
    (learning_rate, train_steps, warmup_steps). `sentence_task` is the training data's
    ("sop", "nsp" or "none"); with "none" the loss is the MLM loss alone, and the variables it
    does not reach (the sentence head, the encoder's pooler) are left out of training: no
    update, no weight decay, no optimizer slots.
    """

    def __init__(
        self,
        strategy: tf.distribute.Strategy,
        config: AlbertConfig,
        *,
        max_seq_length: int,
        max_predictions_per_seq: int,
        dtype: str,
        optimizer_args: tuple[float, int, int],
        steps_per_loop: int,
        grad_accum_steps: int = 1,
        jit_compile: bool = False,
        seed: int = 0,
        sentence_task: str = "sop",
    ) -> None:
        self.strategy = strategy
        self.dtype = dtype
        self.steps_per_loop = steps_per_loop
        self.grad_accum_steps = grad_accum_steps
        self.seed = seed
        self.sentence_task = sentence_task
        with strategy.scope():
            self.model = AlbertPretrainingModel(config)
            dummy = dummy_inputs(max_seq_length, max_predictions_per_seq)
            self.model(dummy, training=False)
            self.trained_variables = list(self.model.trainable_variables)
            if sentence_task == "none":
                # Train what the MLM loss reaches: not the sentence head, nor the pooler that
                # feeds only that head.
                with tf.GradientTape() as tape:
                    mlm_logits = self.model(dummy, training=False)["mlm_logits"]
                reached = tape.gradient(mlm_logits, self.trained_variables)
                self.trained_variables = [
                    v for v, g in zip(self.trained_variables, reached, strict=True) if g is not None
                ]
            # Not in the checkpoint: the divergence guard sets it from guard.json (guard.py).
            self.lr_scale = tf.Variable(1.0, trainable=False, name="lr_scale")
            self.optimizer = build_optimizer(*optimizer_args, dtype=dtype, lr_scale=self.lr_scale)
            self.step = tf.Variable(
                0,
                dtype=tf.int64,
                trainable=False,
                name="step",
                aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA,
            )
            self.sums = tf.Variable(
                tf.zeros([steps_per_loop, len(SUM_KEYS)]),
                trainable=False,
                name="loop_sums",
                synchronization=tf.VariableSynchronization.ON_READ,
                aggregation=tf.VariableAggregation.SUM,
            )
        self.checkpoint = tf.train.Checkpoint(
            encoder=self.model.encoder,
            mlm=self.model.mlm_head,
            sop=self.model.sop_head,
            optimizer=self.optimizer,
            step=self.step,
        )
        if grad_accum_steps > 1:
            # Grappler's arithmetic optimizer rewrites the shared blocks' gradient sums inside the
            # accumulation loop into temporary variables that collide across its iterations
            # (AlreadyExistsError on ALBERT-base, TF 2.20); the rewrite is off while accumulating.
            tf.config.optimizer.set_experimental_options({"arithmetic_optimization": False})
        self._gradients = (
            tf.function(self._accumulated_gradients, jit_compile=True)
            if jit_compile
            else self._accumulated_gradients
        )

    # === The replica step ===

    def _micro_gradients(self, batch, global_weight, global_count, seed):
        variables = self.trained_variables
        with tf.GradientTape() as tape, seeded_dropout(seed):
            outputs = self.model(model_inputs(batch), training=True)
            sums = pretraining_sums(outputs["mlm_logits"], outputs["sop_logits"], batch)
            loss = replica_loss(sums, global_weight, global_count, self.sentence_task)["loss"]
            if self.dtype == "float16":
                loss = self.optimizer.get_scaled_loss(loss)
        # Dense gradients: the token-type gather's IndexedSlices repeat each row B*S times, and
        # clip_by_global_norm would count every repeat (the original's one-hot token-type
        # matmul gives the dense gradient, and the tied MLM decoder makes the word embeddings'
        # dense anyway). Dense gradients also add up across micro-batches.
        grads = [tf.convert_to_tensor(g) for g in tape.gradient(loss, variables)]
        return grads, sums

    def _accumulated_gradients(self, batch, global_weight, global_count, seed):
        """(gradients, sums) of this replica's batch, over grad_accum_steps micro-batches."""
        accum = self.grad_accum_steps
        if accum == 1:
            return self._micro_gradients(batch, global_weight, global_count, seed)
        micro_batches = tf.nest.map_structure(
            lambda t: tf.reshape(t, [accum, -1, *t.shape[1:]]),
            batch,  # [K, B/K, ...]
        )
        variables = self.trained_variables

        def body(i, grads, sums):
            micro = tf.nest.map_structure(lambda t: t[i], micro_batches)
            micro_seed = tf.random.experimental.stateless_fold_in(seed, tf.cast(i, tf.int64))
            new_grads, new_sums = self._micro_gradients(
                micro, global_weight, global_count, micro_seed
            )
            grads = [g + n for g, n in zip(grads, new_grads, strict=True)]
            sums = {k: sums[k] + new_sums[k] for k in SUM_KEYS}
            return i + 1, grads, sums

        initial = (
            tf.constant(0),
            [tf.zeros(v.shape, tf.float32) for v in variables],
            {k: tf.constant(0.0) for k in SUM_KEYS},
        )
        # One micro-batch at a time: that bounds activation memory (the point of accumulating).
        _, grads, sums = tf.while_loop(
            lambda i, *_: i < accum, body, initial, parallel_iterations=1
        )
        return grads, sums

    def _replica_step(self, batch, index, step):
        ctx = tf.distribute.get_replica_context()
        global_weight = ctx.all_reduce("sum", tf.reduce_sum(batch["masked_lm_weights"]))
        global_count = ctx.all_reduce("sum", tf.reduce_sum(batch["example_weight"]))
        seed = fold_seed(self.seed, step, ctx.replica_id_in_sync_group)
        grads, sums = self._gradients(batch, global_weight, global_count, seed)
        if self.dtype == "float16":
            grads = self.optimizer.get_unscaled_gradients(grads)
        variables = self.trained_variables
        self.optimizer.apply_gradients(zip(grads, variables, strict=True))
        row = tf.stack([sums[k] for k in SUM_KEYS])[tf.newaxis]  # [1, len(SUM_KEYS)]
        self.sums.assign_add(tf.scatter_nd([[index]], row, self.sums.shape))

    # === Host entry points ===

    @tf.function
    def _loop(self, iterator, steps):
        self.sums.assign(tf.zeros_like(self.sums))
        for i in tf.range(steps):
            tf.autograph.experimental.set_loop_options(parallel_iterations=1)
            self.strategy.run(self._replica_step, args=(next(iterator), i, self.step.read_value()))
            self.step.assign_add(1)
        return self.sums.read_value()

    def run(self, iterator, steps: int):
        """Runs `steps` (<= steps_per_loop) training steps; returns their per-step sums as a
        numpy [steps, len(SUM_KEYS)] array, globally summed (one host read)."""
        if not 0 < steps <= self.steps_per_loop:
            raise ValueError(f"steps must be in [1, {self.steps_per_loop}], got {steps}")
        return self._loop(iterator, tf.constant(steps, tf.int32)).numpy()[:steps]

    def _replica_eval_step(self, batch):
        outputs = self.model(model_inputs(batch), training=False)
        return pretraining_sums(outputs["mlm_logits"], outputs["sop_logits"], batch)

    @tf.function
    def _eval_step(self, batch):
        per_replica = self.strategy.run(self._replica_eval_step, args=(batch,))
        return {
            k: self.strategy.reduce(tf.distribute.ReduceOp.SUM, v, axis=None)
            for k, v in per_replica.items()
        }

    def evaluate_sums(
        self, dataset, on_batch: Callable[[], None] | None = None
    ) -> dict[str, float]:
        """Globally summed pretraining_sums over one pass of a distributed eval dataset;
        `on_batch` is called after each global batch (progress)."""
        totals: dict[str, float] = {}
        for batch in dataset:
            for k, v in self._eval_step(batch).items():
                totals[k] = totals.get(k, 0.0) + float(v)
            if on_batch is not None:
                on_batch()
        return totals

    def agree(self, flags: list[bool], chief_values: list[float]) -> tuple[list[bool], list[float]]:
        """(each flag OR-ed over all workers, the chief's values), so every worker takes the same
        decisions: whether to stop (time budget, a signal) and how long the next loop is.

        Under MultiWorkerMirroredStrategy this is one all-reduce; in one process (every other
        strategy) the local values are already everyone's.
        """
        if not isinstance(self.strategy, tf.distribute.MultiWorkerMirroredStrategy):
            return list(flags), list(chief_values)
        flags_out, values_out = self._agree(
            tf.constant(flags, tf.bool), tf.constant(chief_values, tf.float32)
        )
        return flags_out.numpy().tolist(), values_out.numpy().tolist()

    @tf.function
    def _agree(self, flags, chief_values):
        def replica():
            # Global replica 0 is on the chief (worker 0): only its values survive the sum.
            first = tf.cast(
                tf.distribute.get_replica_context().replica_id_in_sync_group == 0, tf.float32
            )
            return tf.concat([tf.cast(flags, tf.float32), chief_values * first], 0)

        total = self.strategy.reduce(
            tf.distribute.ReduceOp.SUM, self.strategy.run(replica), axis=None
        )
        count = tf.size(flags)
        return total[:count] > 0, total[count:]

    @tf.function
    def weights_finite(self) -> tf.Tensor:
        """True when every model weight is finite (checked before each checkpoint)."""
        return tf.reduce_all(
            [tf.reduce_all(tf.math.is_finite(v)) for v in self.model.trainable_variables]
        )

    def learning_rate(self, step: int) -> float:
        """The learning rate of update number `step` (0-based)."""
        inner = getattr(self.optimizer, "inner_optimizer", self.optimizer)
        return float(inner.learning_rate(step))


def model_inputs(batch: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
    return {k: batch[k] for k in data_lib.MODEL_INPUTS}


def dummy_inputs(max_seq_length: int, max_predictions_per_seq: int) -> dict[str, tf.Tensor]:
    seq = tf.zeros([1, max_seq_length], tf.int32)
    return {
        "input_word_ids": seq,
        "input_mask": tf.ones_like(seq),
        "input_type_ids": seq,
        "masked_lm_positions": tf.zeros([1, max_predictions_per_seq], tf.int32),
    }
