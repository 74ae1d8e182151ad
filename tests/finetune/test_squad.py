"""SQuAD: reading v2.0 files, doc-stride features, spans mapped back to characters and
stripped of whitespace (both heads' decoding)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from albert_tf.errors import ConfigError
from albert_tf.finetune.alignment import encode_with_offsets
from albert_tf.finetune.tasks.squad.data import SquadExample, build_squad_features, read_squad
from albert_tf.finetune.tasks.squad.postprocess import postprocess_squad, postprocess_squad_beam
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


def _one_hot_logits(features, start_token, end_token):
    start = np.zeros((len(features), len(features[0].input_word_ids)), np.float32)
    end = np.zeros_like(start)
    start[0, start_token] = end[0, end_token] = 5.0
    return start, end


def test_a_span_ending_on_a_bare_word_start_is_stripped(tokenizer):
    # "( christian slater ) , quiet": the pieces of "slater" are followed by a bare "▁" that
    # covers no character and sits where ")" starts, so the span up to it ends in a space.
    context = "( christian slater ) , quiet"
    example = SquadExample("q", "who?", context, (), False, "q")
    features = build_squad_features([example], tokenizer, max_seq_length=40, max_query_length=4)
    pieces = [tokenizer.sp_model.id_to_piece(i) for i in features[0].input_word_ids]
    first = pieces.index("l") - 1  # "s" of slater
    blank = pieces.index(")") - 1
    assert pieces[first] == "s" and pieces[blank] == "▁"
    assert context[features[0].token_to_char[first][0] : features[0].token_to_char[blank][1]] == (
        "slater "
    )
    start, end = _one_hot_logits(features, first, blank)
    (bert,) = postprocess_squad([example], features, start, end, version_2_with_negative=False)
    assert (bert.text, bert.char_start, bert.char_end) == ("slater", 12, 18)
    beam = {
        "start_top_index": np.array([[first]]),
        "start_top_log_probs": np.array([[-0.1]], np.float32),
        "end_top_index": np.array([[blank]]),
        "end_top_log_probs": np.array([[-0.2]], np.float32),
        "cls_logits": np.array([-1.0], np.float32),
    }
    (albert,) = postprocess_squad_beam([example], features, beam, max_answer_length=30)
    assert (albert.text, albert.char_start, albert.char_end) == ("slater", 12, 18)
    # a span of bare "▁" only is empty once stripped: no answer, and the next one is taken
    beam["start_top_index"] = np.array([[blank, first]])
    beam["start_top_log_probs"] = np.array([[-0.1, -0.3]], np.float32)
    beam["end_top_index"] = np.array([[blank, blank]])
    beam["end_top_log_probs"] = np.array([[-0.2, -0.2]], np.float32)
    (albert,) = postprocess_squad_beam([example], features, beam, max_answer_length=30)
    assert [e["text"] for e in albert.nbest] == ["slater"]


ODD_SPACES = (" ", "  ", "\t", "\n", " \n\t", "\u00a0", "\u2009", "\u3000", "\r\n")
WORDS = ("the", "file", "(", ")", "christian", "slater", ",", "quiet.", "½", "Café", "1,000", "-")


@settings(max_examples=60)
@given(
    st.text(alphabet="".join(ODD_SPACES), max_size=3),
    st.lists(
        st.tuples(st.sampled_from(WORDS), st.sampled_from(ODD_SPACES)), min_size=1, max_size=25
    ),
    st.integers(0, 2**31 - 1),
)
def test_answers_never_start_or_end_with_whitespace(tokenizer, lead, words, seed):
    context = lead + "".join(word + space for word, space in words)
    example = SquadExample("q", "what?", context, (), False, "q")
    features = build_squad_features(
        [example], tokenizer, max_seq_length=24, doc_stride=5, max_query_length=4
    )
    rng = np.random.RandomState(seed)
    shape = (len(features), 24)
    start, end = rng.randn(*shape).astype(np.float32), rng.randn(*shape).astype(np.float32)
    k = 4
    beam = {
        "start_top_index": rng.randint(0, 24, (len(features), k)),
        "start_top_log_probs": -rng.rand(len(features), k).astype(np.float32),
        "end_top_index": rng.randint(0, 24, (len(features), k * k)),
        "end_top_log_probs": -rng.rand(len(features), k * k).astype(np.float32),
        "cls_logits": rng.randn(len(features)).astype(np.float32),
    }
    predictions = [
        *postprocess_squad([example], features, start, end, 10, 8, version_2_with_negative=False),
        *postprocess_squad_beam([example], features, beam, n_best_size=10, max_answer_length=8),
    ]
    for prediction in predictions:
        answers = [(prediction.text, prediction.char_start, prediction.char_end)]
        answers += [(e["text"], e["char_start"], e["char_end"]) for e in prediction.nbest]
        for text, char_start, char_end in answers:
            if text:
                assert text == text.strip()
                assert context[char_start:char_end] == text


def test_squad_models_from_before_albert_s_head_load_with_bert_s():
    from albert_tf.finetune.settings import FinetuneSettings
    from albert_tf.finetune.tasks import get_task

    old = FinetuneSettings.from_record({"task": "squad", "null_score_diff_threshold": 0.0})
    assert old.squad_head == "bert" and not get_task(old).albert_head
    new = FinetuneSettings.from_record({"task": "squad", "squad_head": None})
    assert get_task(new).albert_head  # v2.0 by default: ALBERT's head
    with pytest.raises(ConfigError, match="--squad-head must be one of albert, bert"):
        FinetuneSettings.from_record({"task": "squad", "squad_head": "xlnet"})
    with pytest.raises(ConfigError, match="--start-n-top must be at most --max-seq-length 8"):
        FinetuneSettings.from_record({"task": "squad", "max_seq_length": 8, "start_n_top": 9})
