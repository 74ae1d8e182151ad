"""SQuAD: reading v2.0 files, doc-stride features, spans mapped back to characters."""

from __future__ import annotations

import json

import numpy as np
import pytest

from albert_tf.finetune.alignment import encode_with_offsets
from albert_tf.finetune.data import SquadExample, read_squad
from albert_tf.finetune.squad import build_squad_features, postprocess_squad
from albert_tf.preprocess.tokenizer import AlbertTokenizer


@pytest.fixture(scope="module")
def tokenizer(fixtures_dir):
    return AlbertTokenizer(fixtures_dir / "tokenizer" / "spm.model")


def test_offsets_match_reference_ids_and_cover_original_text(tokenizer, fixtures_dir):
    cases = json.loads((fixtures_dir / "tokenizer" / "reference_tokenization.json").read_text())
    for case in cases["cases"]:
        ids, starts, ends = encode_with_offsets(tokenizer, case["text"])
        assert ids == case["ids"], case["text"]
        assert all(s <= e for s, e in zip(starts, ends, strict=True))
    text = "  Café  ÉTÉ, 1,000 «x»"
    ids, starts, ends = encode_with_offsets(tokenizer, text)
    covered = [text[s:e] for s, e in zip(starts, ends, strict=True) if e > s]
    assert "".join(covered) == "CaféÉTÉ,1,000«x»"


def _example(context, answer, qid="q", question="where?"):
    start = context.index(answer)
    return SquadExample(qid, question, context, ((answer, start),), False, qid)


def test_doc_stride_windows_map_answer_back_to_characters(tokenizer):
    context = (
        " ".join(f"word{i}" for i in range(40)) + " The Château Frontenac stands in Québec City."
    )
    example = _example(context, "Château Frontenac")
    features = build_squad_features(
        [example], tokenizer, max_seq_length=48, doc_stride=16, max_query_length=8, training=True
    )
    assert len(features) > 2
    with_answer = [f for f in features if f.start_position > 0]
    assert with_answer
    for feature in features:
        assert len(feature.input_word_ids) == 48
        assert feature.input_word_ids[0] == tokenizer.cls_id
    for feature in with_answer:
        s = feature.token_to_char[feature.start_position][0]
        e = feature.token_to_char[feature.end_position][1]
        assert context[s:e] == "Château Frontenac"
    # windows without the answer point at [CLS]
    assert all(
        (f.start_position, f.end_position) == (0, 0) for f in features if f not in with_answer
    )
    # each doc token is max-context in exactly one window
    counts = {}
    for feature in features:
        for i, chars in enumerate(feature.token_to_char):
            if chars is not None and feature.max_context[i]:
                counts[chars] = counts.get(chars, 0) + 1
    assert set(counts.values()) == {1}


def test_postprocess_picks_span_and_null(tokenizer):
    context = "The tower was built in 1889 by Gustave Eiffel."
    examples = [_example(context, "1889", "a"), _example(context, "Gustave Eiffel", "b")]
    features = build_squad_features(examples, tokenizer, max_seq_length=40, max_query_length=8)
    start = np.zeros((2, 40), np.float32)
    end = np.zeros((2, 40), np.float32)
    for row, answer in ((0, "1889"), (1, "Gustave Eiffel")):
        f = features[row]
        char_start = context.index(answer)
        tokens = [
            i
            for i, c in enumerate(f.token_to_char)
            if c and c[1] > char_start and c[0] < char_start + len(answer) and c[1] > c[0]
        ]
        start[row, tokens[0]] = 5.0
        end[row, tokens[-1]] = 5.0
    start[1, 0] = end[1, 0] = 6.0  # null score 12 > span score 10 for question b
    predictions = postprocess_squad(examples, features, start, end, n_best_size=5)
    assert predictions[0].text == "1889"
    assert context[predictions[0].char_start : predictions[0].char_end] == "1889"
    assert predictions[1].text == ""
    assert predictions[1].null_score_diff == pytest.approx(2.0)
    relaxed = postprocess_squad(examples, features, start, end, null_score_diff_threshold=3.0)
    assert relaxed[1].text == "Gustave Eiffel"
    v1 = postprocess_squad(examples, features, start, end, version_2_with_negative=False)
    assert v1[1].text == "Gustave Eiffel"
    assert sum(c["probability"] for c in relaxed[0].nbest) == pytest.approx(1.0)


def test_answers_not_in_context_are_counted_and_dropped(tmp_path):
    squad = {
        "version": "v2.0",
        "data": [
            {
                "title": "t",
                "paragraphs": [
                    {
                        "context": "Paris is the capital of France.",
                        "qas": [
                            {
                                "id": "1",
                                "question": "Capital?",
                                "is_impossible": False,
                                "answers": [{"text": "Paris", "answer_start": 0}],
                            },
                            {
                                "id": "2",
                                "question": "Country?",
                                "is_impossible": False,
                                "answers": [{"text": "Spain", "answer_start": 3}],
                            },
                            {
                                "id": "3",
                                "question": "King?",
                                "is_impossible": True,
                                "answers": [],
                                "plausible_answers": [{"text": "France", "answer_start": 24}],
                            },
                        ],
                    }
                ],
            }
        ],
    }
    path = tmp_path / "train-v2.0.json"
    path.write_text(json.dumps(squad))
    examples, stats = read_squad(path, training=True)
    assert [e.qid for e in examples] == ["1", "3"]
    assert stats.answers_not_in_context == 1
    assert stats.dropped_questions == ["2"]
    assert stats.impossible == 1
    examples, _ = read_squad(path, training=False)
    assert [e.qid for e in examples] == ["1", "2", "3"]
