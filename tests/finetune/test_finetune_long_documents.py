"""The issue's long documents: about 1,300 tokens whose label only the last sentence decides,
read by 8 windows of --max-seq-length 128 (a small random model on synthetic text)."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.finetune import windows
from albert_tf.finetune.predict import load_finetuned, predict_file
from albert_tf.finetune.settings import DEFAULT_WINDOW_PLACEMENT
from albert_tf.finetune.tasks import get_task
from tests.finetune.test_finetune_windows import FILLER
from tests.helpers import finetune_files, write_config

TOKENS = 1300  # every word is one piece of the fixture vocabulary
RUN = dict(max_seq_length=128, epochs=6, batch_size=32, learning_rate=5e-3, dtype="float32", seed=1)


def write_reviews(path, count, seed):
    """`count` documents of TOKENS words: one body of filler words shared by every document (a
    review's first 1,240 words that say nothing of its verdict), then the last sentence "in the
    end turtle and turtle and ... turtle" (29 times; label a) or the same with "widget" (label
    b), the only words that tell the labels apart. The verdict is that loud so that a tiny
    random model learns it in a few epochs whichever window holds it."""
    rng = random.Random(seed)
    body = random.Random(0).choices(FILLER, k=TOKENS - 60)
    with open(path, "w", encoding="utf-8") as f:
        f.write("text\tlabel\n")
        for _ in range(count):
            label = rng.choice("ab")
            word = "turtle" if label == "a" else "widget"
            verdict = ["in", "the", "end", *[word, "and"] * 28, word]
            f.write(f"{' '.join(body + verdict)}\t{label}\n")


@pytest.fixture(scope="module")
def reviews(tmp_path_factory):
    root = tmp_path_factory.mktemp("reviews")
    write_reviews(root / "train.tsv", 96, seed=0)
    write_reviews(root / "dev.tsv", 40, seed=1)
    config = write_config(root, max_position_embeddings=128, initializer_range=0.1)
    return root, str(config)


def _run(root, config, name, **windows):
    return finetune_files(root, "classify", output=name, config=config, **RUN, **windows)


@pytest.mark.slow
def test_default_placement_reads_the_verdict_as_windows_over_every_token(reviews):
    root, config = reviews
    every = _run(root, config, "every", max_windows=11, window_stride=126, export_serving=False)
    assert every.record.skipped["eval"] == {}  # 11 x 126 tokens: nothing left out
    assert every.record.best_value >= 0.9, every.record.history
    # With 8 windows the verdict is in fewer of the windows a run trains on, and the run is a
    # draw: over seeds 1-5 it read the verdict by epoch 3 or 4 with seeds 2, 3 and 5 and stayed
    # at chance with 1 and 4, where `every` learned with each. So the five seeds run
    # (--seeds 5; the run best on dev is kept) and at least as many must read it as then: a
    # change that makes the run learn less often fails here, where one run restarted until it
    # learned (--restarts) passed with any one of three.
    default = _run(root, config, "default", max_windows=8, seeds=5)
    runs = default.record.seeds["runs"]
    read = [run["seed"] for run in runs if run["value"] >= every.record.best_value - 0.025]
    assert len(read) >= 3, runs  # 0.025: one of 40
    # Windows at the head (tokens 0-566) are the same for every document: no model can tell
    # the labels apart from them.
    head = get_task(default.settings.replace(window_placement="head"))
    features = head.load(str(root / "dev.tsv"), default.tokenizer).inputs["input_word_ids"]
    assert (features == features[:1]).all()

    recorded = json.loads((root / "default" / "finetune.json").read_text())
    assert recorded["settings"]["window_placement"] == DEFAULT_WINDOW_PLACEMENT
    skipped = recorded["skipped"]["eval"]
    assert skipped["texts with tokens in no window"] == 40
    starts = windows.window_starts(TOKENS, 126, 63, 8, DEFAULT_WINDOW_PLACEMENT)
    assert skipped["tokens in no window"] == 40 * windows.tokens_outside(TOKENS, 126, starts)

    # predict and serving (placement read from finetune.json) give the same probabilities
    model = load_finetuned(root / "default")
    records, _, dev = predict_file(model, str(root / "dev.tsv"))
    serving = tf.saved_model.load(str(root / "default" / "serving")).signatures["serving_default"]
    got = serving(text=tf.constant([e.text_a for e in dev.examples]))["probabilities"].numpy()
    expected = [[r["probabilities"][label] for label in ("a", "b")] for r in records]
    np.testing.assert_allclose(got, expected, atol=1e-4)
