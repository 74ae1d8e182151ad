"""Per-document instance generation: tokenize, pair, mask, serialize (runs in worker processes).

Every random choice for document `d` in duplication round `k` comes from
`numpy.random.default_rng([seed, k, d])`, so an instance depends only on the settings, the
document and its index in the corpus, never on which process made it. NSP's random next text
comes from another document of the same batch (see `instances.create_nsp_pairs`); batches are
composed independently of the number of workers (`pipeline._batches`, `plan.batch_starts`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from albert_tf.preprocess.pretraining_data.documents import split_sentences
from albert_tf.preprocess.pretraining_data.instances import (
    SentencePair,
    create_nsp_pairs,
    create_sentence_pairs,
    create_single_segments,
)
from albert_tf.preprocess.pretraining_data.masking import NgramMasker
from albert_tf.preprocess.pretraining_data.records import (
    FLOAT_ONE,
    FLOAT_ZERO,
    encode_example,
    frame_records,
    runs,
    varints,
)
from albert_tf.preprocess.tokenizer import AlbertTokenizer


@dataclass(frozen=True)
class Settings:
    """Everything a worker needs (picklable). See `create_pretraining_data` for the meaning."""

    sp_model_path: str
    do_lower_case: bool
    max_seq_length: int
    max_predictions_per_seq: int
    masked_lm_prob: float
    dupe_factor: int
    short_seq_prob: float
    ngram: int
    seed: int
    num_shards: int
    mask: bool
    sentence_task: str = "sop"  # one of format.SENTENCE_TASKS


@dataclass
class Counters:
    """Statistics summed over documents (see `create_pretraining_data`'s returned dict)."""

    num_documents: int = 0
    num_sentences: int = 0
    num_tokens: int = 0
    num_instances: int = 0
    instance_tokens: int = 0
    label_ones: int = 0  # instances with next_sentence_labels 1 (SOP swapped, NSP random next)
    no_other_document: int = 0  # NSP chunks given their true continuation: no other document
    masked_tokens: int = 0
    mask_kinds: list[int] = field(default_factory=lambda: [0, 0, 0])  # [MASK], random, kept
    ngram_counts: list[int] = field(default_factory=list)

    def add(self, other: Counters) -> None:
        for name in ("num_documents", "num_sentences", "num_tokens", "num_instances"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.instance_tokens += other.instance_tokens
        self.label_ones += other.label_ones
        self.no_other_document += other.no_other_document
        self.masked_tokens += other.masked_tokens
        self.mask_kinds = [a + b for a, b in zip(self.mask_kinds, other.mask_kinds, strict=True)]
        longest = max(len(self.ngram_counts), len(other.ngram_counts))
        self.ngram_counts = [
            (self.ngram_counts[i] if i < len(self.ngram_counts) else 0)
            + (other.ngram_counts[i] if i < len(other.ngram_counts) else 0)
            for i in range(longest)
        ]


class DocumentProcessor:
    """Turns documents into serialized `tf.train.Example`s for one set of `Settings`."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self.tokenizer = AlbertTokenizer(settings.sp_model_path, settings.do_lower_case)
        tok = self.tokenizer
        self.word_start = np.array([tok.is_word_start(i) for i in range(tok.vocab_size)], bool)
        self.masker = NgramMasker(
            self.word_start,
            tok.mask_id,
            settings.max_predictions_per_seq,
            settings.masked_lm_prob,
            settings.ngram,
        )

    def tokenize(self, lines: list[str]) -> list[np.ndarray]:
        """The document's sentences as int32 id arrays (empty ones dropped)."""
        sentences = []
        for line in lines:
            for sentence in split_sentences(line):
                ids = self.tokenizer.encode(sentence)
                if ids:
                    sentences.append(np.asarray(ids, np.int32))
        return sentences

    def process(
        self, documents: list[tuple[int, list[str]]], frame: bool = True
    ) -> tuple[list[tuple[int, bytes]], Counters]:
        """Instances of `(index, lines)` documents as `(shard, TFRecord frame of a serialized
        tf.train.Example)` (with `frame=False` the serialized Example alone, for a writer that
        frames it), in document order then duplication round then position, and their
        statistics."""
        s = self.settings
        shards: list[int] = []
        examples: list[bytes] = []
        counters = Counters(ngram_counts=[0] * (s.ngram + 1))
        tokenized = [(index, self.tokenize(lines)) for index, lines in documents]
        nonempty = [sentences for _, sentences in tokenized if sentences]  # NSP's candidates
        own = -1  # the document's index in `nonempty`
        for index, sentences in tokenized:
            own += bool(sentences)
            counters.num_documents += 1
            counters.num_sentences += len(sentences)
            counters.num_tokens += sum(len(x) for x in sentences)
            for k in range(s.dupe_factor):
                rng = np.random.default_rng([s.seed, k, index])
                pairs = self._instances(sentences, nonempty, own, rng, counters)
                examples += [self._example(pair, rng, counters) for pair in pairs]
                shards += rng.integers(s.num_shards, size=len(pairs)).tolist()
        records = frame_records(examples) if frame else examples
        return list(zip(shards, records, strict=True)), counters

    def _instances(
        self,
        sentences: list[np.ndarray],
        nonempty: list[list[np.ndarray]],
        own: int,
        rng: np.random.Generator,
        counters: Counters,
    ) -> list[SentencePair]:
        """The unmasked instances of one document (`nonempty[own]` if it has sentences) for the
        settings' sentence task; NSP draws its random next text from the other `nonempty`."""
        s = self.settings
        if s.sentence_task == "sop":
            return create_sentence_pairs(sentences, s.max_seq_length, s.short_seq_prob, rng)
        if s.sentence_task == "none":
            return create_single_segments(sentences, s.max_seq_length, s.short_seq_prob, rng)
        if not sentences:
            return []
        pairs, no_other = create_nsp_pairs(nonempty, own, s.max_seq_length, s.short_seq_prob, rng)
        counters.no_other_document += no_other
        return pairs

    def _example(self, pair: SentencePair, rng: np.random.Generator, counters: Counters) -> bytes:
        """One `[CLS] A [SEP] B [SEP]` instance (`[CLS] A [SEP]` without B), masked (unless
        `mask=False`), serialized."""
        s, tok = self.settings, self.tokenizer
        len_a = len(pair.tokens_a)
        if pair.tokens_b is None:
            length = len_a + 2
            tokens = np.concatenate(([tok.cls_id], pair.tokens_a, [tok.sep_id])).astype(np.int32)
            maskable = np.arange(1, len_a + 1)
            segment_ids = runs((0, s.max_seq_length))
            segment_starts = [1]
        else:
            len_b = len(pair.tokens_b)
            length = len_a + len_b + 3
            tokens = np.concatenate(
                ([tok.cls_id], pair.tokens_a, [tok.sep_id], pair.tokens_b, [tok.sep_id])
            ).astype(np.int32)
            maskable = np.concatenate([np.arange(1, len_a + 1), np.arange(len_a + 2, length - 1)])
            segment_ids = runs((0, len_a + 2), (1, len_b + 1), (0, s.max_seq_length - length))
            segment_starts = [1, len_a + 2]
        pad = s.max_seq_length - length
        counters.num_instances += 1
        counters.instance_tokens += length
        counters.label_ones += pair.label
        features = {
            "input_ids": None,
            "input_mask": ("int64", runs((1, length), (0, pad))),
            "segment_ids": ("int64", segment_ids),
        }
        if not s.mask:
            boundary = np.zeros(length, np.int64)
            boundary[maskable] = self.word_start[tokens[maskable]]
            boundary[segment_starts] = 1  # a segment starts a word
            features["input_ids"] = ("int64", varints(tokens, pad))
            features["token_boundary"] = ("int64", varints(boundary, pad))
            features["next_sentence_labels"] = ("int64", varints([pair.label]))
            return encode_example(features)
        masked = self.masker.mask(tokens, maskable, rng)
        num = len(masked.positions)
        empty = s.max_predictions_per_seq - num
        features["input_ids"] = ("int64", varints(masked.input_ids, pad))
        features["masked_lm_positions"] = ("int64", varints(masked.positions, empty))
        features["masked_lm_ids"] = ("int64", varints(masked.labels, empty))
        features["masked_lm_weights"] = ("float", FLOAT_ONE * num + FLOAT_ZERO * empty)
        features["next_sentence_labels"] = ("int64", varints([pair.label]))
        counters.masked_tokens += num
        now = masked.input_ids[masked.positions]
        is_mask = int((now == tok.mask_id).sum())
        kept = int(((now != tok.mask_id) & (now == masked.labels)).sum())
        counters.mask_kinds[0] += is_mask
        counters.mask_kinds[1] += num - is_mask - kept
        counters.mask_kinds[2] += kept
        for n in masked.ngram_lengths:
            counters.ngram_counts[n] += 1
        return encode_example(features)


_PROCESSOR: DocumentProcessor | None = None


def init_worker(settings: Settings) -> None:
    """Pool initializer: builds this process's `DocumentProcessor`."""
    global _PROCESSOR
    _PROCESSOR = DocumentProcessor(settings)


def process_in_worker(
    documents: list[tuple[int, list[str]]],
) -> tuple[list[tuple[int, bytes]], Counters]:
    """`DocumentProcessor.process` with the process's processor (after `init_worker`)."""
    assert _PROCESSOR is not None, "init_worker was not called"
    return _PROCESSOR.process(documents)
