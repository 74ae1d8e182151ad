"""Rotten Tomatoes sentiment through the TF-Hub pair, as a TF-Hub user would fine-tune ALBERT:
`hub.KerasLayer(preprocess)` -> `hub.KerasLayer(encoder, trainable=True)` -> dense head, in a
tf_keras model trained with `model.fit` on raw strings.

The checkpoint (a directory from `albert-tf pretrain` with its `spm.model`) is exported with
`albert_tf.export.bundle.export_bundle` first. Data and split are those of
rotten_tomatoes.py (vaderSentiment sdist, seeded 80/10/10; fetched with
`pip download` when missing, kept under data/).

Usage:
  nice -n 10 python -m experiments.hub_finetune_rotten_tomatoes --checkpoint data/pretrain_real/run
Results: printed, and JSON in experiments/results/hub_finetune_rotten_tomatoes.json.
"""

from __future__ import annotations

import argparse
import csv
import json
import time
from pathlib import Path

from experiments.rotten_tomatoes import fetch, split

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "experiments" / "results"


def _read(path: Path) -> tuple[list[str], list[int]]:
    with open(path, encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    return [r["sentence"] for r in rows], [int(r["label"] == "positive") for r in rows]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", required=True, help="checkpoint dir with spm.model")
    parser.add_argument("--work", default=str(ROOT / "data" / "rotten_tomatoes"))
    parser.add_argument("--hub", default=str(ROOT / "data" / "hub_rotten_tomatoes"))
    parser.add_argument("--seq-length", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--learning-rate", type=float, default=1e-4)
    args = parser.parse_args()

    import tensorflow as tf
    import tensorflow_hub as hub
    import tensorflow_text  # noqa: F401  (registers the preprocessing SavedModel's ops)
    import tf_keras as keras

    from albert_tf.export.bundle import export_bundle

    work = Path(args.work)
    paths = split(fetch(work), work / "split")
    bundle = export_bundle(args.checkpoint, args.hub, seq_length=args.seq_length, overwrite=True)
    train, dev, test = (_read(paths[name]) for name in ("train", "dev", "test"))

    keras.utils.set_random_seed(0)
    text = keras.Input(shape=(), dtype=tf.string, name="text")
    encoder_inputs = hub.KerasLayer(str(bundle.preprocess), name="preprocess")(text)
    encoder = hub.KerasLayer(str(bundle.encoder), trainable=True, name="encoder")
    pooled = encoder(encoder_inputs)["pooled_output"]
    logits = keras.layers.Dense(2, name="classifier")(keras.layers.Dropout(0.1)(pooled))
    model = keras.Model(text, logits)
    steps = args.epochs * -(-len(train[0]) // args.batch_size)
    schedule = keras.optimizers.schedules.PolynomialDecay(args.learning_rate, steps, 0.0)
    model.compile(
        optimizer=keras.optimizers.Adam(schedule),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )

    def dataset(part, shuffle=False):
        data = tf.data.Dataset.from_tensor_slices((part[0], part[1]))
        if shuffle:
            data = data.shuffle(len(part[0]), seed=0)
        return data.batch(args.batch_size)

    start = time.time()
    history = model.fit(
        dataset(train, shuffle=True), validation_data=dataset(dev), epochs=args.epochs, verbose=2
    )
    seconds = time.time() - start
    _, test_accuracy = model.evaluate(dataset(test), verbose=0)
    result = dict(
        checkpoint=args.checkpoint,
        seq_length=args.seq_length,
        epochs=args.epochs,
        batch_size=args.batch_size,
        learning_rate=args.learning_rate,
        train_sentences=len(train[0]),
        train_seconds=round(seconds, 1),
        train_loss=[round(x, 4) for x in history.history["loss"]],
        dev_accuracy=[round(x, 4) for x in history.history["val_accuracy"]],
        test_accuracy=round(float(test_accuracy), 4),
    )
    print(json.dumps(result, indent=2))
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "hub_finetune_rotten_tomatoes.json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
