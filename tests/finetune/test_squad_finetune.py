"""SQuAD v2.0 end to end with both heads (ALBERT's, the default on v2.0 data, and BERT's):
train, predict (CLI), official EM/F1 and the null threshold, serving equal to in-memory."""

from __future__ import annotations

import json

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import cli
from albert_tf.finetune import metrics
from albert_tf.finetune.inference import batched_outputs
from albert_tf.finetune.settings import FinetuneSettings
from albert_tf.finetune.tasks import get_task
from albert_tf.finetune.trainer import finetune
from albert_tf.preprocess.normalize import preprocess_text
from tests import helpers
from tests.helpers import write_config

pytestmark = pytest.mark.slow

FACTS = [
    (
        "Paris is the capital of France and its largest city.",
        "What is the capital of France?",
        "Paris",
    ),
    ("The Nile flows north through Egypt into the sea.", "Which way does the Nile flow?", "north"),
    (
        "Mount Everest is 8849 metres high, the highest on Earth.",
        "How high is Everest?",
        "8849 metres",
    ),
    (
        "Marie Curie won two Nobel prizes for her work on radium.",
        "How many prizes did Curie win?",
        "two",
    ),
]
FILLER = " ".join(f"Sentence {i} says nothing at all." for i in range(6))


def squad_file(path, copies):
    paragraphs = []
    for n in range(copies):
        for i, (fact, question, answer) in enumerate(FACTS):
            context = f"{FILLER} {fact}" if i % 2 else fact
            qas = [
                {
                    "id": f"{n}-{i}",
                    "question": question,
                    "is_impossible": False,
                    "answers": [{"text": answer, "answer_start": context.index(answer)}],
                },
                {
                    "id": f"{n}-{i}-none",
                    "question": "Who painted the Mona Lisa?",
                    "is_impossible": True,
                    "answers": [],
                    "plausible_answers": [{"text": answer, "answer_start": context.index(answer)}],
                },
            ]
            paragraphs.append({"context": context, "qas": qas})
    paragraphs[0]["qas"].append(
        {
            "id": "broken",
            "question": "Where?",
            "is_impossible": False,
            "answers": [{"text": "Berlin", "answer_start": 0}],
        }
    )
    path.write_text(
        json.dumps({"version": "v2.0", "data": [{"title": "t", "paragraphs": paragraphs}]})
    )
    return path


@pytest.fixture(scope="module", params=[None, "bert"], ids=["default-albert", "bert"])
def squad_run(request, tmp_path_factory, fixtures_dir):
    root = tmp_path_factory.mktemp("squad")
    logs = []
    result = finetune(
        FinetuneSettings(
            squad_head=request.param,
            train=str(squad_file(root / "train-v2.0.json", 4)),
            output=str(root / "model"),
            init="random",
            task="squad",
            max_seq_length=40,
            doc_stride=12,
            max_query_length=12,
            n_best_size=40,
            epochs=3,
            batch_size=8,
            learning_rate=2e-3,
            dtype="float32",
            seed=3,
            eval=str(squad_file(root / "dev-v2.0.json", 1)),
            config=str(write_config(root)),
            sp_model=str(fixtures_dir / "tokenizer" / "spm.model"),
        ),
        log=logs.append,
    )
    return root, result, logs


def test_train_reports_bad_answers_and_learns(squad_run):
    root, result, logs = squad_run
    assert f"{root / 'train-v2.0.json'}: 1 answers not in context" in logs
    assert f"{root / 'train-v2.0.json'}: 1 questions without a usable answer" in logs
    history = result.record.history
    assert history[-1]["train_loss"] < history[0]["train_loss"]
    assert result.settings.version_2_with_negative
    assert set(history[0]["eval"]) >= {"exact", "f1", "HasAns_exact", "NoAns_exact"}
    if result.settings.squad_head == "albert":  # the default on v2.0 data
        # the threshold picked on --eval at the best epoch is the model's from then on
        best = history[result.record.best_epoch - 1]["eval"]
        assert set(best) >= {"best_f1", "best_f1_thresh", "null_score_diff_threshold"}
        picked = best["best_f1_thresh"]
        assert result.settings.null_score_diff_threshold == best["null_score_diff_threshold"]
        assert result.settings.null_score_diff_threshold == picked
    else:
        assert result.settings.null_score_diff_threshold == 0.0


def test_predict_cli_spans_and_official_scores(squad_run, capsys):
    root, _, _ = squad_run
    dev = root / "dev-v2.0.json"
    out = root / "predictions.jsonl"
    assert (
        cli.main(
            [
                "predict",
                "--checkpoint",
                str(root / "model"),
                "--input",
                str(dev),
                "--output",
                str(out),
            ]
        )
        == 0
    )
    err = capsys.readouterr().err
    assert f"{dev}: 1 answers not in context" in err
    *_, scores_line, wrote = err.strip().splitlines()
    assert wrote == f"wrote {len(out.read_text().splitlines())} rows to {out}"
    reported = json.loads(scores_line)["metrics"]
    records = [json.loads(line) for line in out.read_text().splitlines()]
    document = json.loads(dev.read_text())
    contexts = {
        qa["id"]: p["context"] for p in document["data"][0]["paragraphs"] for qa in p["qas"]
    }
    assert sorted(r["id"] for r in records) == sorted(contexts)
    for r in records:
        if r["answer"]:
            assert contexts[r["id"]][r["char_start"] : r["char_end"]] == r["answer"]
    gold = {
        qa["id"]: [a["text"] for a in qa["answers"]]
        for p in document["data"][0]["paragraphs"]
        for qa in p["qas"]
    }
    expected = metrics.squad_scores({r["id"]: r["answer"] for r in records}, gold)
    assert {k: reported[k] for k in expected} == pytest.approx(expected)
    threshold = reported.get("null_score_diff_threshold")
    for r in records:  # ALBERT's head: "" exactly when the answer-class logit reaches it
        if threshold is not None:
            assert r["answer"] == ("" if r["null_score_diff"] >= threshold else r["best_span"])


def test_serving_equals_in_memory(squad_run):
    root, result, _ = squad_run
    task = get_task(result.settings.replace(doc_stride=128))
    short = root / "short.json"
    squad_file(short, 1)
    data = task.load(str(short), result.tokenizer)
    one_window = [
        i
        for i, e in enumerate(data.examples)
        if sum(f.example_index == i for f in data.squad_features) == 1
    ]
    rows = [
        next(j for j, f in enumerate(data.squad_features) if f.example_index == i)
        for i in one_window
    ]
    expected = batched_outputs(result.model, {k: v[rows] for k, v in data.inputs.items()}, 64)
    serving = tf.saved_model.load(str(root / "model" / "serving")).signatures["serving_default"]
    got = serving(
        question=tf.constant([data.examples[i].question for i in one_window]),
        context=tf.constant([data.examples[i].context for i in one_window]),
    )
    mask = data.inputs["input_mask"][rows] == 1
    if result.settings.squad_head == "bert":
        for name in ("start_logits", "end_logits"):
            np.testing.assert_allclose(got[name].numpy()[mask], expected[name][mask], atol=1e-4)
    else:
        for name in ("start_top_index", "end_top_index"):
            np.testing.assert_array_equal(got[name].numpy(), expected[name])
        for name in ("start_top_log_probs", "end_top_log_probs"):
            np.testing.assert_allclose(got[name].numpy(), expected[name], atol=1e-4)
        np.testing.assert_allclose(
            got["null_score_diff"].numpy(), expected["cls_logits"], atol=1e-4
        )
    from albert_tf.finetune.tasks.squad import SquadData

    subset = SquadData(
        {k: v[rows] for k, v in data.inputs.items()},
        None,
        [data.examples[i] for i in one_window],
        squad_features=[
            type(data.squad_features[r])(**{**vars(data.squad_features[r]), "example_index": n})
            for n, r in enumerate(rows)
        ],
    )
    records = task.decode(expected, subset)
    answers = [a.decode() for a in got["answer"].numpy()]
    assert answers == [preprocess_text(r["answer"]) for r in records]


def test_onnx_export_answers_as_serving(squad_run, capsys):
    """`export --finetuned --onnx`: squad.onnx and squad_int8.onnx on raw strings, checked
    against serving/ (ALBERT's head; BERT's is refused in one line)."""
    root, result, _ = squad_run
    directory = root / "model"
    code = cli.main(["export", "--finetuned", str(directory), "--onnx"])
    if result.settings.squad_head == "bert":
        assert code == 2
        line = helpers.one_error_line(capsys.readouterr().err, "export")
        assert "covers classify and regress tasks and SQuAD with ALBERT's SQuAD 2.0 head" in line
        assert not (directory / "onnx").exists()
        return
    assert code == 0
    report = json.loads((directory / "onnx" / "report.json").read_text())
    assert report["probe_questions"] > 0
    assert report["against_serving"]["squad.onnx"]["answers_equal"]
    assert report["against_serving"]["squad.onnx"]["null_score_diff_max_abs_diff"] < 1e-4
    out = capsys.readouterr().out
    assert "squad.onnx: answers equal to serving/ on 100.0% of the probe questions" in out
