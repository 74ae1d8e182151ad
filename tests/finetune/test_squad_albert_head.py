"""ALBERT's SQuAD 2.0 head against the original code (tests/fixtures/albert_tf1_squad_v2): the
features, the TF1 checkpoint converted, the head's outputs (1e-5), its beam, loss,
predictions, null odds and the null threshold picked on dev (exact)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.cli import main
from albert_tf.finetune.inference import batched_outputs
from albert_tf.finetune.tasks import get_task
from albert_tf.finetune.tasks.squad.heads import answer_mask
from albert_tf.finetune.tasks.squad.postprocess import beam_spans, postprocess_squad_beam
from tests.helpers import one_error_line

pytestmark = pytest.mark.slow

FIXTURE = "albert_tf1_squad_v2"
BEAM = ("start_top_log_probs", "start_top_index", "end_top_log_probs", "end_top_index")


@pytest.fixture(scope="module")
def original(fixtures_dir):
    """The fixture's directory, arrays and JSON files."""
    path = fixtures_dir / FIXTURE
    files = ("settings", "features", "predictions", "nbest_predictions", "null_odds")
    loaded = {name: json.loads((path / f"{name}.json").read_text()) for name in files}
    loaded["eval_results"] = json.loads((path / "eval_results.json").read_text())
    return path, dict(np.load(path / "reference_outputs.npz")), loaded


@pytest.fixture(scope="module")
def converted(tmp_path_factory, fixtures_dir, original):
    """`albert-tf convert` of the fixture's TF1 checkpoint with the run's settings and the
    threshold its evaluate_v2 picked: the fine-tuned directory, loaded, and its features of
    the fixture's squad_v2.json."""
    from albert_tf.finetune.predict import load_examples, load_finetuned

    path, _, files = original
    s = files["settings"]
    output = tmp_path_factory.mktemp("converted") / "model"
    flags = {
        "--tf1-checkpoint": path / "model.ckpt",
        "--config": path / "albert_config.json",
        "--sp-model": fixtures_dir / "tokenizer" / "spm.model",
        "--output": output,
        "--max-seq-length": s["max_seq_length"],
        "--doc-stride": s["doc_stride"],
        "--max-query-length": s["max_query_length"],
        "--max-answer-length": s["max_answer_length"],
        "--null-score-diff-threshold": s["null_score_diff_threshold"],
    }
    assert main(["convert", *(str(x) for pair in flags.items() for x in pair)]) == 0
    finetuned = load_finetuned(output)
    return output, finetuned, load_examples(finetuned, str(path / "squad_v2.json"))


def test_converted_model_predicts_the_originals_answers(original, converted, tmp_path):
    path, _, files = original
    directory, finetuned, _ = converted
    assert finetuned.settings.squad_head == "albert"
    assert (finetuned.settings.start_n_top, finetuned.settings.end_n_top) == (5, 5)
    out = tmp_path / "predictions.jsonl"
    command = ["predict", "--checkpoint", str(directory), "--input", str(path / "squad_v2.json")]
    assert main([*command, "--output", str(out)]) == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(r["id"] for r in records) == sorted(files["predictions"])
    # evaluate_v2 picked the threshold at q3's null odds: float32 noise (well under 1e-5)
    # decides that one's side, so an answer at the threshold must follow our own odds
    threshold, clear = files["settings"]["null_score_diff_threshold"], 0
    for r in records:
        theirs = files["null_odds"][r["id"]]
        assert r["null_score_diff"] == pytest.approx(theirs, abs=1e-5)
        if abs(theirs - threshold) > 1e-5:
            assert r["answer"] == files["predictions"][r["id"]], r["id"]
            clear += 1
        else:
            first = files["nbest_predictions"][r["id"]][0]["text"]
            assert r["answer"] == ("" if r["null_score_diff"] >= threshold else first), r["id"]
    assert clear == len(records) - 1


def test_features_and_answer_mask_are_the_originals(original, converted):
    _, reference, files = original
    _, _, data = converted
    for name in ("input_word_ids", "input_mask", "input_type_ids"):
        np.testing.assert_array_equal(data.inputs[name], reference[name])
    mask = answer_mask({k: tf.constant(v) for k, v in data.inputs.items()}).numpy()
    np.testing.assert_array_equal(mask, reference["p_mask"])
    path, finetuned, _ = converted
    train = finetuned.task.load(str(original[0] / "squad_v2.json"), finetuned.tokenizer, True)
    for name in ("start_positions", "end_positions", "is_impossible"):
        np.testing.assert_array_equal(train.labels[name], reference[name])
    assert [f["start_position"] for f in files["features"]] == list(reference["start_positions"])


def test_converted_checkpoint_gives_the_originals_beam(original, converted):
    _, reference, _ = original
    _, finetuned, data = converted
    outputs = batched_outputs(finetuned.model, data.inputs, 8)
    for name in ("start_top_index", "end_top_index"):
        np.testing.assert_array_equal(outputs[name], reference[name])
    for name in ("start_top_log_probs", "end_top_log_probs", "cls_logits"):
        np.testing.assert_allclose(outputs[name], reference[name], atol=1e-5, rtol=0)


def test_training_outputs_and_loss_are_the_originals(original, converted):
    _, reference, _ = original
    _, finetuned, data = converted
    model, task = finetuned.model, finetuned.task
    inputs = {k: tf.constant(v) for k, v in data.inputs.items()}
    encoded = model.encoder(inputs, training=False)
    np.testing.assert_allclose(
        encoded["sequence_output"].numpy(), reference["sequence_output"], atol=1e-5, rtol=0
    )
    # training=False: the answer class's dropout is off, as the fixture's dropout_prob 0.0
    outputs = model.task_head(
        encoded, answer_mask(inputs), tf.constant(reference["start_positions"]), training=False
    )
    context = reference["p_mask"] == 0
    for ours, theirs in (
        ("start_log_probs", "start_log_probs"),
        ("end_log_probs", "train_end_log_probs"),
    ):
        np.testing.assert_allclose(
            outputs[ours].numpy()[context], reference[theirs][context], atol=1e-5, rtol=0
        )
    labels = {
        k: tf.constant(reference[k]) for k in ("start_positions", "end_positions", "is_impossible")
    }
    loss = float(task.loss(outputs, labels))
    assert loss == pytest.approx(float(reference["train_total_loss"]), abs=1e-5)


def test_beam_keeps_the_originals_spans(original, converted):
    _, reference, files = original
    _, _, data = converted
    for f, (feature, expected) in enumerate(
        zip(data.squad_features, files["features"], strict=True)
    ):
        spans = beam_spans(feature, *(reference[k][f] for k in BEAM), max_answer_length=4)
        offset = expected["doc_offset"]
        kept = sorted([s.start - offset, s.end - offset] for s in spans)
        assert kept == sorted(expected["kept_spans"])


def test_predictions_null_odds_and_threshold_are_the_originals(original, converted):
    _, reference, files = original
    _, finetuned, data = converted
    # no threshold yet: evaluating picks one, as evaluate_v2 does
    task = get_task(finetuned.settings.replace(null_score_diff_threshold=None))
    outputs = {k: reference[k] for k in (*BEAM, "cls_logits")}
    records = task.decode(outputs, data)
    first = files["eval_results"]["first_pass_threshold_none"]
    assert {r["id"]: r["answer"] for r in records} == first["predictions"]
    for r in records:
        assert r["null_score_diff"] == pytest.approx(files["null_odds"][r["id"]], abs=1e-5)
    scores = task.evaluate(records, data)
    final = files["eval_results"]["final_evaluate_v2"]
    threshold = first["eval_and_threshold_search"]["best_f1_thresh"]
    assert scores["null_score_diff_threshold"] == pytest.approx(threshold, abs=1e-5)
    for name in ("best_exact", "best_exact_thresh", "best_f1"):
        expected = first["eval_and_threshold_search"][name]
        assert scores[name] == pytest.approx(expected, abs=1e-5)
    assert scores["exact"] == pytest.approx(final["exact"])
    assert scores["f1"] == pytest.approx(final["f1"])
    decided = get_task(task.settings.replace(null_score_diff_threshold=threshold))
    assert {r["id"]: r["answer"] for r in decided.decode(outputs, data)} == files["predictions"]


def test_nbest_lists_are_the_originals(original, converted):
    _, reference, files = original
    _, _, data = converted
    outputs = {k: reference[k] for k in (*BEAM, "cls_logits")}
    predictions = postprocess_squad_beam(
        data.examples, data.squad_features, outputs, n_best_size=20, max_answer_length=4
    )
    for prediction in predictions:
        expected = files["nbest_predictions"][prediction.qid]
        assert [e["text"] for e in prediction.nbest] == [e["text"] for e in expected]
        for ours, theirs in zip(prediction.nbest, expected, strict=True):
            for name in ("probability", "start_log_prob", "end_log_prob"):
                assert ours[name] == pytest.approx(theirs[name], abs=1e-5)


def test_hugging_face_export_refuses_albert_s_head(converted, capsys):
    directory, _, _ = converted
    assert main(["export", "--finetuned", str(directory), "--hf"]) == 2
    line = one_error_line(capsys.readouterr().err, "export")
    assert "has ALBERT's SQuAD 2.0 head" in line and "--squad-head bert" in line
    assert not (directory / "hf").exists()


@pytest.mark.parametrize("runtime", ["onnx", "tflite"])
def test_int8_runtimes_give_stripped_spans_of_the_context(original, converted, tmp_path, runtime):
    """`predict --runtime`: the int8 encoder under ALBERT's head; answers are still stripped
    spans of their context (int8 moves the logits, so the answers need not be the original's)."""
    path, _, _ = original
    directory, _, data = converted
    out = tmp_path / "predictions.jsonl"
    command = ["predict", "--checkpoint", str(directory), "--input", str(path / "squad_v2.json")]
    assert main([*command, "--output", str(out), "--runtime", runtime]) == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    contexts = {e.qid: e.context for e in data.examples}
    assert sorted(r["id"] for r in records) == sorted(contexts)
    for r in records:
        if r["answer"]:
            assert r["answer"] == r["answer"].strip()
            assert contexts[r["id"]][r["char_start"] : r["char_end"]] == r["answer"]
        assert r["best_span"] == r["best_span"].strip() and r["best_span"] in contexts[r["id"]]


def test_onnx_graph_answers_as_serving(converted):
    """squad.onnx's graph (`export --finetuned --onnx` writes it;
    tests/finetune/test_squad_finetune.py runs the command) on raw strings gives serving/'s answers,
    tokens and beam."""
    from albert_tf.export.onnx.encoder import encoder_graph
    from albert_tf.export.onnx.squad import squad_graphs
    from albert_tf.export.onnx.writer import run, session

    directory, finetuned, data = converted
    graphs = squad_graphs(finetuned, {"float32": encoder_graph(finetuned.model.encoder)})
    # the fixture's questions, and the same words with odd spaces (its vocabulary is tiny)
    questions = [e.question for e in data.examples] + ["the file", "The function can return"]
    contexts = [e.context for e in data.examples] + [
        "The file name is  a  string ,  and the object\tis a list .",
        "This method can return an object or a list of strings.",
    ]
    inputs = {
        "question": np.array(questions, dtype=object),
        "context": np.array(contexts, dtype=object),
    }
    got = run(session(graphs["float32"]), inputs)
    serving = tf.saved_model.load(str(directory / "serving")).signatures["serving_default"]
    want = serving(**{k: tf.constant(v.astype(str)) for k, v in inputs.items()})
    answers = [a.decode() for a in want["answer"].numpy()]
    assert got["answer"].tolist() == answers and any(answers)
    for name in ("start_token", "end_token", "start_top_index", "end_top_index"):
        np.testing.assert_array_equal(got[name], want[name].numpy())
    for name in ("null_score_diff", "start_top_log_probs", "end_top_log_probs"):
        np.testing.assert_allclose(got[name], want[name].numpy(), atol=1e-5)
