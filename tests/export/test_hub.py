"""The exported encoder used the way TF-Hub users use it: hub.load, hub.KerasLayer, Keras 3."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_hub as hub
import tensorflow_text  # noqa: F401  (registers the preprocessing SavedModel's ops)
import tf_keras as keras

from tests import helpers

pytestmark = pytest.mark.slow

ENCODER_INPUTS = ("input_word_ids", "input_mask", "input_type_ids")

# Short real movie-review sentences (1 = positive), in the style of Rotten Tomatoes.
SENTENCES = [
    ("a gorgeous, witty, seductive movie.", 1),
    ("one of the most beautiful films of the year.", 1),
    ("the performances are terrific and the story moves.", 1),
    ("a charming and funny little gem.", 1),
    ("smart, touching and wonderfully acted.", 1),
    ("an exhilarating ride from start to finish.", 1),
    ("the best comedy i have seen in years.", 1),
    ("a warm, generous and deeply moving drama.", 1),
    ("a dull, lifeless mess.", 0),
    ("the plot is thin and the jokes fall flat.", 0),
    ("boring, predictable and far too long.", 0),
    ("an ugly, pointless waste of time.", 0),
    ("the acting is wooden and the script is worse.", 0),
    ("a tedious film with nothing to say.", 0),
    ("painfully slow and never funny.", 0),
    ("the worst movie of the year, by far.", 0),
]


def _encoder_inputs(reference):
    return {name: tf.constant(reference[name]) for name in ENCODER_INPUTS}


def _find_lambda_layers(layer):
    if isinstance(layer, keras.layers.Lambda):
        return [layer]
    return [found for sub in getattr(layer, "layers", []) for found in _find_lambda_layers(sub)]


def test_hub_load_equals_source_model(groups):
    inputs = _encoder_inputs(groups["reference"])
    expected = groups["source"].encoder(inputs, training=False)
    loaded = hub.load(str(groups["bundle"].encoder))
    outputs = loaded(inputs, training=False)
    assert set(outputs) == {"pooled_output", "default", "sequence_output", "encoder_outputs"}
    for key in ("pooled_output", "sequence_output", "encoder_outputs"):
        helpers.assert_outputs_close(outputs[key], expected[key], atol=1e-6)
    np.testing.assert_array_equal(outputs["default"], outputs["pooled_output"])
    assert len(outputs["encoder_outputs"]) == 12
    # The original TF1 code's outputs, too.
    reference = groups["reference"]
    np.testing.assert_allclose(outputs["pooled_output"], reference["pooled_output"], atol=1e-5)
    np.testing.assert_allclose(
        np.stack(outputs["encoder_outputs"]), reference["encoder_outputs"], atol=1e-5
    )


def test_hub_keras_layer_equals_source_model(groups):
    inputs = _encoder_inputs(groups["reference"])
    expected = groups["source"].encoder(inputs, training=False)
    layer = hub.KerasLayer(str(groups["bundle"].encoder), trainable=True)
    outputs = layer(inputs, training=False)
    for key in ("pooled_output", "sequence_output", "encoder_outputs"):
        helpers.assert_outputs_close(outputs[key], expected[key], atol=1e-6)
    np.testing.assert_array_equal(outputs["default"], outputs["pooled_output"])
    source_variables = groups["source"].encoder.trainable_variables
    assert len(layer.trainable_weights) == len(source_variables)
    for hub_variable, source_variable in zip(
        layer.trainable_weights, source_variables, strict=True
    ):
        np.testing.assert_array_equal(hub_variable.numpy(), source_variable.numpy())


def test_mlm_reproduces_fixture_logits(groups):
    reference = groups["reference"]
    positions = np.array([[1, 5, 15], [0, 3, 9], [4, 2, 1]], np.int32)
    inputs = dict(_encoder_inputs(reference), masked_lm_positions=tf.constant(positions))
    loaded = hub.load(str(groups["bundle"].encoder))
    outputs = loaded.mlm(inputs, training=False)
    expected = np.take_along_axis(reference["mlm_logits"], positions[:, :, None], axis=1)
    assert outputs["mlm_logits"].shape == (3, 3, 97)
    np.testing.assert_allclose(outputs["mlm_logits"], expected, atol=1e-5)
    source = groups["source"]
    sequence = source.encoder(_encoder_inputs(reference), training=False)["sequence_output"]
    np.testing.assert_allclose(
        outputs["mlm_logits"], source.mlm_head(sequence, positions), atol=1e-6
    )
    np.testing.assert_array_equal(
        outputs["pooled_output"], loaded(_encoder_inputs(reference))["pooled_output"]
    )


def test_serving_signature_flat_outputs(groups):
    inputs = _encoder_inputs(groups["reference"])
    loaded = hub.load(str(groups["bundle"].encoder))
    outputs = loaded.signatures["serving_default"](**inputs)
    expected = loaded(inputs, training=False)
    np.testing.assert_array_equal(outputs["pooled_output"], expected["pooled_output"])
    np.testing.assert_array_equal(outputs["sequence_output"], expected["sequence_output"])
    for i, block in enumerate(expected["encoder_outputs"]):
        np.testing.assert_array_equal(outputs[f"encoder_outputs_{i}"], block)


def test_dropout_only_with_training_true(sp_export):
    layer = hub.KerasLayer(str(sp_export["bundle"].encoder), trainable=True)
    inputs = helpers.make_inputs(sp_export["config"], batch=1, seq=8)

    def spread(training):
        runs = np.stack([layer(inputs, training=training)["pooled_output"] for _ in range(8)])
        return float(np.mean(np.std(runs, axis=0)))

    assert spread(training=False) < 1e-6
    assert spread(training=True) > 1e-3


def _warmup(step):
    # A random encoder's pooled outputs differ little between sentences; a full step on all its
    # weights at once overshoots. Linear warmup to 1e-3 over 8 steps trains smoothly.
    return 1e-3 * min(1.0, (step + 1) / 8)


def _fell(losses):
    return np.mean(losses[-3:]) < 0.5 * losses[0]


def test_fit_through_hub_keras_layers(sp_export):
    bundle = sp_export["bundle"]
    keras.utils.set_random_seed(0)
    text = keras.Input(shape=(), dtype=tf.string)
    encoder = hub.KerasLayer(str(bundle.encoder), trainable=True)
    encoder_inputs = hub.KerasLayer(str(bundle.preprocess))(text)
    assert encoder_inputs["input_word_ids"].shape[1] == sp_export["seq_length"]
    pooled = encoder(encoder_inputs)["pooled_output"]
    model = keras.Model(text, keras.layers.Dense(2)(pooled))
    assert not _find_lambda_layers(model)
    model.compile(
        optimizer=keras.optimizers.Adam(),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    before = [w.numpy() for w in encoder.trainable_weights]
    texts = tf.constant([s for s, _ in SENTENCES])
    labels = tf.constant([label for _, label in SENTENCES])
    history = model.fit(
        texts,
        labels,
        batch_size=len(SENTENCES),
        epochs=16,
        callbacks=[keras.callbacks.LearningRateScheduler(_warmup)],
        verbose=0,
    )
    assert _fell(history.history["loss"]), history.history["loss"]
    changed = [
        not np.array_equal(b, w.numpy())
        for b, w in zip(before, encoder.trainable_weights, strict=True)
    ]
    assert all(changed), f"{changed.count(False)} encoder weights did not change"


def test_gradient_tape_loop_through_hub_load(sp_export):
    bundle = sp_export["bundle"]
    keras.utils.set_random_seed(0)
    preprocess = hub.load(str(bundle.preprocess))
    encoder = hub.load(str(bundle.encoder))
    head = keras.layers.Dense(2)
    optimizer = keras.optimizers.Adam()
    inputs = preprocess(tf.constant([s for s, _ in SENTENCES]))
    labels = tf.constant([label for _, label in SENTENCES])
    before = [v.numpy() for v in encoder.trainable_variables]
    losses = []
    for step in range(16):
        optimizer.learning_rate.assign(_warmup(step))
        with tf.GradientTape(persistent=True) as tape:
            logits = head(encoder(inputs, training=True)["pooled_output"])
            loss = tf.reduce_mean(
                keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True)
            )
        variables = list(encoder.trainable_variables) + head.trainable_variables
        gradients = tape.gradient(loss, variables)
        assert all(g is not None for g in gradients)
        if step == 0:
            # A persistent tape answers a second time, with the same encoder gradients.
            again = tape.gradient(loss, encoder.trainable_variables)
            for first, second in zip(gradients, again, strict=False):
                np.testing.assert_array_equal(
                    tf.convert_to_tensor(first), tf.convert_to_tensor(second)
                )
        del tape
        optimizer.apply_gradients(zip(gradients, variables, strict=True))
        losses.append(float(loss))
    assert _fell(losses), losses
    after = encoder.trainable_variables
    assert all(not np.array_equal(b, a.numpy()) for b, a in zip(before, after, strict=True))


def test_keras3_tfsm_layer_runs_encoder_and_preprocess(sp_export):
    import keras as keras3

    bundle = sp_export["bundle"]
    preprocess = keras3.layers.TFSMLayer(str(bundle.preprocess), call_endpoint="serving_default")
    encoder = keras3.layers.TFSMLayer(str(bundle.encoder), call_training_endpoint="serve_training")
    encoder_inputs = preprocess(tf.constant([s for s, _ in SENTENCES[:3]]))
    inputs = {name: encoder_inputs[name] for name in ENCODER_INPUTS}
    outputs = encoder(inputs)
    expected = hub.load(str(bundle.encoder))(inputs, training=False)
    np.testing.assert_allclose(outputs["pooled_output"], expected["pooled_output"], atol=1e-6)
    assert outputs["sequence_output"].shape == (3, sp_export["seq_length"], 256)
    assert len(outputs["encoder_outputs"]) == 2
    assert len(encoder.trainable_weights) == len(sp_export["encoder"].trainable_variables)
    dropped = encoder(inputs, training=True)["pooled_output"]
    assert np.abs(dropped - outputs["pooled_output"]).max() > 1e-4
