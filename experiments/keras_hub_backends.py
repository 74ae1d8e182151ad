"""keras-hub presets of our models on every Keras backend (issue 36): the check CI runs on the
TensorFlow backend only (tests/export/test_keras_hub.py), here on JAX and torch too.

Two steps, two environments:

    # in the project's environment (with the keras-hub extra): four models, their presets and
    # our outputs on probe inputs, under data/keras_hub_backends/
    python -m experiments.keras_hub_backends prepare
    # in an environment with keras-hub and the backend's framework (jax[cpu], torch):
    KERAS_BACKEND=jax python -m experiments.keras_hub_backends compare
    KERAS_BACKEND=torch python -m experiments.keras_hub_backends compare

The models: the original TF1 fixture `albert_tf1_tiny` converted; `albert_tf1_groups` (2 groups
of 2 inner groups, 6 layers) with the tanh GELU in place of its relu (keras-hub computes only
that one); a checkpoint `albert-tf pretrain` wrote (4 layers, 2 groups of 2 inner groups,
fixture tokenizer) and a classifier fine-tuned from it. `compare` prints keras-hub's largest
absolute difference from our outputs (MLM logits with ALBERT's LayerNorm epsilon set, as the
export's note says) and the hard strings whose ids differ, and writes
`experiments/results/keras_hub_backends/<backend>.json`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "data" / "keras_hub_backends"
RESULTS = ROOT / "experiments" / "results" / "keras_hub_backends"
FIXTURES = ROOT / "tests" / "fixtures"
SP_MODEL = FIXTURES / "tokenizer" / "spm.model"
PRETRAIN_CONFIG = dict(
    vocab_size=1000,
    embedding_size=16,
    hidden_size=32,
    num_hidden_layers=4,
    num_hidden_groups=2,
    inner_group_num=2,
    num_attention_heads=4,
    intermediate_size=64,
    hidden_act="gelu",
    max_position_embeddings=64,
)


def _cli(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "albert_tf.cli", *args], check=True, cwd=ROOT)


def prepare() -> None:
    from albert_tf.checkpoint import load_checkpoint_dir
    from albert_tf.convert.tf1 import convert_tf1_checkpoint
    from albert_tf.export.tflite import probe_inputs
    from albert_tf.finetune.predict import load_finetuned
    from tests.helpers import write_pretraining_records

    OUT.mkdir(parents=True, exist_ok=True)
    checkpoints = {}
    for name, changes in (("tiny", {}), ("groups", {"hidden_act": "gelu"})):
        source = FIXTURES / f"albert_tf1_{name}"
        config = OUT / f"{name}_config.json"
        values = json.loads((source / "albert_config.json").read_text()) | changes
        config.write_text(json.dumps(values))
        checkpoints[name] = convert_tf1_checkpoint(
            source / "model.ckpt", config, OUT / name, overwrite=True
        )
    data = OUT / "pretraining" / "train.tfrecord"
    data.parent.mkdir(exist_ok=True)
    write_pretraining_records(data, 64, seq_length=32, predictions=5, vocab_size=1000)
    (OUT / "pretrain_config.json").write_text(json.dumps(PRETRAIN_CONFIG))
    checkpoints["pretrained"] = OUT / "pretrained"
    _cli(
        "pretrain", "--data", str(data), "--config", str(OUT / "pretrain_config.json"),
        "--output", str(OUT / "pretrained"), "--sp-model", str(SP_MODEL), "--train-steps", "20",
        "--batch-size", "8", "--dtype", "float32", "--overwrite", "--quiet",
    )  # fmt: skip
    rows = [("the film plot was great", "pos"), ("the cast was awful", "neg")] * 12
    train = OUT / "train.tsv"
    train.write_text("sentence\tlabel\n" + "".join(f"{t}\t{label}\n" for t, label in rows))
    _cli(
        "finetune", "--task", "classify", "--train", str(train), "--init", str(OUT / "pretrained"),
        "--output", str(OUT / "classifier"), "--epochs", "1", "--max-seq-length", "32",
        "--dtype", "float32", "--no-serving", "--overwrite",
    )  # fmt: skip
    cases = {}
    for name, checkpoint in checkpoints.items():
        _cli(
            "export", "--checkpoint", str(checkpoint), "--output", str(OUT / f"{name}_export"),
            "--keras-hub", "--max-seq-length", "32", "--overwrite",
        )  # fmt: skip
        model = load_checkpoint_dir(checkpoint)
        inputs = probe_inputs(model.config.vocab_size, 16)
        outputs = model.encoder(inputs, training=False)
        np.savez(
            OUT / f"{name}.npz",
            **inputs,
            sequence_output=outputs["sequence_output"].numpy(),
            pooled_output=outputs["pooled_output"].numpy(),
            mlm_logits=model.mlm_head(outputs["sequence_output"]).numpy(),
        )
        cases[name] = str(OUT / f"{name}_export" / "keras_hub")
    _cli("export", "--finetuned", str(OUT / "classifier"), "--keras-hub")
    finetuned = load_finetuned(OUT / "classifier")
    inputs = probe_inputs(1000, 32)
    outputs = finetuned.model.encoder(inputs, training=False)
    np.savez(
        OUT / "classifier.npz",
        **inputs,
        sequence_output=outputs["sequence_output"].numpy(),
        pooled_output=outputs["pooled_output"].numpy(),
        logits=finetuned.model(inputs, training=False)["logits"].numpy(),
    )
    cases["classifier"] = str(OUT / "classifier" / "keras_hub")
    (OUT / "cases.json").write_text(json.dumps(cases, indent=2) + "\n")


def compare() -> None:
    import keras
    import keras_hub

    backend = keras.backend.backend()
    numpy = keras.ops.convert_to_numpy
    results = {"backend": backend, "keras_hub": keras_hub.__version__, "max_abs_diff": {}}
    for name, preset in json.loads((OUT / "cases.json").read_text()).items():
        ours = dict(np.load(OUT / f"{name}.npz"))
        feed = dict(
            token_ids=ours["input_word_ids"],
            segment_ids=ours["input_type_ids"],
            padding_mask=ours["input_mask"],
        )
        task = json.loads((Path(preset) / "task.json").read_text())["class_name"]
        model = getattr(keras_hub.models, task).from_preset(preset)
        got = {k: numpy(v) for k, v in model.backbone(feed).items()}
        if task == "AlbertMaskedLM":
            model.masked_lm_head._intermediate_layer_norm.epsilon = 1e-12
            length = feed["token_ids"].shape[1]
            positions = np.tile(np.arange(length, dtype=np.int32), (len(feed["token_ids"]), 1))
            got["mlm_logits"] = numpy(model({**feed, "mask_positions": positions}))
        else:
            got["logits"] = numpy(model(feed))
        results["max_abs_diff"][name] = {k: float(np.abs(got[k] - ours[k]).max()) for k in got}
        print(name, task, {k: f"{v:.1e}" for k, v in results["max_abs_diff"][name].items()})
    reference = json.loads((FIXTURES / "tokenizer" / "reference_tokenization.json").read_text())
    tokenizer = keras_hub.models.AlbertTokenizer.from_preset(
        json.loads((OUT / "cases.json").read_text())["classifier"]
    )
    differing = [
        case["text"]
        for case in reference["cases"]
        if np.asarray(numpy(tokenizer(case["text"]))).tolist() != case["ids"]
    ]
    results["tokenizer_differing_hard_strings"] = differing
    print(f"tokenizer: {len(differing)} of {len(reference['cases'])} hard strings differ")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{backend}.json").write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    if sys.argv[1:] not in (["prepare"], ["compare"]):
        sys.exit(__doc__)
    prepare() if sys.argv[1] == "prepare" else compare()
