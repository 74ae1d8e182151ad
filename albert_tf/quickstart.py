"""`albert-tf quickstart`: the whole pipeline on the embedded corpus, in a few minutes on a CPU.

corpus -> SentencePiece vocabulary -> pretraining data -> pretrain the `tiny` preset for a fixed
wall time -> export TF-Hub encoder + preprocess modules -> load them with `hub.KerasLayer` ->
fill-in-the-blank and sentence-similarity demos -> held-out top-5 accuracy of the masked-LM ->
reload the modules in a new Python process.

Everything lands in one output directory, built atomically (a temporary sibling renamed into
place once the artifacts are complete); the demos and the new-process check then read the
modules from there, and `results.json` is written last:

  corpus/corpus.txt, corpus/heldout.txt   the embedded corpus (preprocess/corpus.py)
  spm.model, spm.vocab                    the SentencePiece vocabulary
  data/                                   pretraining TFRecords
  pretrain/                               the pretrained checkpoint directory (+ TensorBoard logs)
  hub/encoder, hub/preprocess             the TF-Hub modules
  results.json                            the measured figures
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from albert_tf.environment import check_tensorflow_hub
from albert_tf.errors import ConfigError
from albert_tf.io_utils import atomic_dir, atomic_file, check_can_create, check_output_path

DEFAULT_OUT = "albert_quickstart"
DEFAULT_MINUTES = 4.0  # pretraining wall time; the whole quickstart takes 3-6 min on 2 cores
VOCAB_SIZE = 5000  # unigram on ~1.4 MB of text allows at most ~6,800 pieces
SEQ_LENGTH = 128
MAX_PREDICTIONS = 20
BATCH_SIZE = 32
LEARNING_RATE = 1e-2  # LAMB; the tiny preset learns fastest here in a few hundred steps
STEPS_PER_SECOND = 3.0  # tiny preset, batch 32 x 128, 2 CPU cores (sets the LR schedule)
EVAL_TOKENS = 100
SEED = 12345

# Sentences in the corpus's own domain, with the word the demo masks.
FILL_IN_THE_BLANK = (
    ("Return the number of [MASK] in the list.", "items"),
    ("If the file does not [MASK], an exception is raised.", "exist"),
    ("This method is called when the [MASK] is closed.", "connection"),
    ("The default [MASK] is None.", "value"),
)
SIMILARITY_PAIRS = (
    ("Return the number of items in the list.", "Count the elements of the sequence."),
    ("Open the file for reading.", "Read the contents of a file."),
    ("Open the file for reading.", "The thread acquires the lock before it runs."),
)


@dataclass(frozen=True)
class QuickstartResult:
    """What a quickstart run produced and measured."""

    out_dir: str
    encoder_dir: str
    preprocess_dir: str
    checkpoint_dir: str
    vocab_size: int
    pretrain_steps: int
    top5_accuracy: float  # over `eval_tokens` masked held-out tokens
    eval_tokens: int
    chance: float  # 5 / vocab_size
    seconds: float


def is_quickstart_output(path: Path) -> bool:
    """True for a directory a completed quickstart wrote (rerunning the quickstart replaces it)."""
    return (path / "results.json").is_file() and (path / "hub" / "encoder").is_dir()


def validate_arguments(out: str | os.PathLike, minutes: float, overwrite: bool) -> Path:
    """Checks the arguments and the install before any heavy work; raises ConfigError,
    OutputError or InstallError (tensorflow_hub cannot be imported).

    An existing `out` is refused without `overwrite`, unless a previous quickstart wrote it.
    """
    if not isinstance(minutes, (int, float)) or not math.isfinite(minutes) or minutes <= 0:
        raise ConfigError(f"--minutes must be a positive number, got {minutes:g}")
    check_tensorflow_hub()  # the demo loads the exported modules with it
    target = Path(out).expanduser().absolute()
    check_output_path(target, overwrite or is_quickstart_output(target))
    return check_can_create(target)


class _Steps:
    """Numbered progress lines with elapsed time per step."""

    def __init__(self, total: int, log: Callable[[str], None]):
        self.total, self.log, self.number = total, log, 0
        self.started = self.step_started = time.monotonic()

    def start(self, title: str) -> None:
        self.number += 1
        self.step_started = time.monotonic()
        self.log(f"\n[{self.number}/{self.total}] {title}")

    def done(self, summary: str) -> None:
        self.log(f"      {summary} ({time.monotonic() - self.step_started:.0f} s)")


def run_quickstart(
    out: str | os.PathLike = DEFAULT_OUT,
    minutes: float = DEFAULT_MINUTES,
    overwrite: bool = False,
    log: Callable[[str], None] = lambda line: print(line, flush=True),
) -> QuickstartResult:
    """Runs the quickstart pipeline into `out` (see the module docstring) and returns its figures.

    Raises ConfigError for a non-positive `minutes` and OutputError when `out` exists (without
    `overwrite`, and not written by a previous quickstart) or cannot be written, before any heavy
    work.
    """
    target = validate_arguments(out, minutes, overwrite)
    steps = _Steps(8, log)
    log(f"albert-tf quickstart: a tiny ALBERT from scratch on CPU, into {target}")
    if is_quickstart_output(target):
        log("      (replacing the previous quickstart's output there when this run completes)")
    with atomic_dir(target, overwrite=True) as work:
        steps.start("Building the corpus from the standard library's docstrings and pydoc topics")
        from preprocess.corpus import build_default_corpus

        corpus = build_default_corpus(work / "corpus")
        steps.done(
            f"{corpus.train_documents} training documents ({corpus.train_bytes / 1e6:.1f} MB), "
            f"{corpus.heldout_documents} held out ({corpus.heldout_bytes / 1e3:.0f} kB)"
        )

        steps.start(f"Training a SentencePiece vocabulary of {VOCAB_SIZE} pieces")
        from preprocess.spm_train import train_sentencepiece

        sp_model = Path(train_sentencepiece([str(corpus.train)], VOCAB_SIZE, str(work / "spm")))
        vocab_size = _vocab_size(sp_model)
        steps.done(f"{sp_model.name}: {vocab_size} pieces")

        steps.start(f"Creating pretraining data (sequence length {SEQ_LENGTH}, n-gram MLM + SOP)")
        from preprocess.pretraining_data import create_pretraining_data

        stats = create_pretraining_data(
            [str(corpus.train)],
            str(sp_model),
            str(work / "data"),
            max_seq_length=SEQ_LENGTH,
            max_predictions_per_seq=MAX_PREDICTIONS,
            dupe_factor=2,
            seed=SEED,
            num_shards=2,
        )
        steps.done(f"{stats['num_instances']} instances in {target / 'data'}")

        steps.start(f"Pretraining the tiny preset for {minutes:g} min on the CPU")
        checkpoint_dir, pretrain_steps = _pretrain(work, sp_model, vocab_size, minutes)
        steps.done(f"{pretrain_steps} steps of batch {BATCH_SIZE}")

        steps.start("Exporting the TF-Hub encoder and preprocess modules")
        from export.bundle import export_bundle

        export_bundle(str(checkpoint_dir), str(work / "hub"), sp_model=str(sp_model))
        steps.done(f"{target / 'hub'}: encoder/, preprocess/")

        heldout = target / "corpus" / corpus.heldout.name

    # The outputs are complete and in place: a new process reloads them while this one demos.
    sentence = SIMILARITY_PAIRS[0][0]
    reload = _start_new_process(target / "hub", sentence)
    try:
        steps.start("Loading the modules with hub.KerasLayer: fill-in-the-blank and similarity")
        demo = _Demo(target / "hub", target / sp_model.name)
        demo.fill_in_the_blank(log)
        demo.similarity(log)
        steps.done("demos done")

        steps.start(f"Measuring top-5 masked-LM accuracy on {EVAL_TOKENS} held-out tokens")
        accuracy, counted = demo.heldout_top5_accuracy(heldout)
        chance = 5 / vocab_size
        steps.done(
            f"top-5 accuracy {accuracy:.1%} over {counted} masked tokens "
            f"(chance {chance:.2%}, {accuracy / chance:.0f}x chance)"
        )

        steps.start("Reloading the modules with hub.KerasLayer in a new Python process")
        drift = _finish_new_process(reload, demo.pooled_output(sentence))
        steps.done(f"pooled_output matches this process within {drift:.1e}")
    finally:
        if reload.poll() is None:
            reload.kill()
            reload.wait()
    result = QuickstartResult(
        out_dir=str(target),
        encoder_dir=str(target / "hub" / "encoder"),
        preprocess_dir=str(target / "hub" / "preprocess"),
        checkpoint_dir=str(target / "pretrain"),
        vocab_size=vocab_size,
        pretrain_steps=pretrain_steps,
        top5_accuracy=accuracy,
        eval_tokens=counted,
        chance=chance,
        seconds=time.monotonic() - steps.started,
    )
    with atomic_file(target / "results.json") as tmp:
        tmp.write_text(json.dumps(asdict(result), indent=2) + "\n")
    _print_next_steps(result, log)
    return result


def _vocab_size(sp_model: Path) -> int:
    from preprocess.tokenizer import AlbertTokenizer

    return AlbertTokenizer(sp_model).vocab_size


def _pretrain(work: Path, sp_model: Path, vocab_size: int, minutes: float) -> tuple[Path, int]:
    """Pretrains the tiny preset on work/data for `minutes`; returns (checkpoint dir, steps).

    The learning-rate schedule is laid out for the steps expected in that time on a 2-core CPU;
    the wall-time limit ends training wherever it is.
    """
    from albert_tf.config import PRESETS
    from albert_tf.pretraining.settings import PretrainSettings
    from albert_tf.pretraining.trainer import pretrain

    config = PRESETS["tiny"].replace(vocab_size=vocab_size)
    output = work / "pretrain"
    train_steps = max(int(minutes * 60 * STEPS_PER_SECOND), 10)
    settings = PretrainSettings(
        data=str(work / "data" / "*.tfrecord"),
        config=config,
        output=str(output),
        train_steps=train_steps,
        batch_size=BATCH_SIZE,
        learning_rate=LEARNING_RATE,
        warmup_steps=train_steps // 10,
        sp_model=str(sp_model),
        save_every=train_steps,
        eval_every=train_steps,
        log_every=50,
        minutes=minutes,
        seed=SEED,
    )
    result = pretrain(settings)
    return output, int(result.step)


class _Demo:
    """The exported modules, loaded the way a user loads them."""

    def __init__(self, hub_dir: Path, sp_model: Path):
        import numpy as np
        import tensorflow as tf

        # tensorflow_hub 0.16 imports pkg_resources, which warns on every import.
        warnings.filterwarnings("ignore", message="pkg_resources is deprecated")
        import tensorflow_hub as hub
        import tensorflow_text  # noqa: F401  (registers the ops the preprocess module uses)

        from preprocess.tokenizer import AlbertTokenizer

        self.np, self.tf = np, tf
        self.preprocess = hub.KerasLayer(str(hub_dir / "preprocess"))
        self.encoder = hub.KerasLayer(str(hub_dir / "encoder"))
        self.tokenize = self.preprocess.resolved_object.tokenize
        self.mlm = self.encoder.resolved_object.mlm
        special = self.tokenize.get_special_tokens_dict()
        self.cls_id = int(special["start_of_sequence_id"])
        self.sep_id = int(special["end_of_segment_id"])
        self.mask_id = int(special["mask_id"])
        self.pad_id = int(special["padding_id"])
        self.pieces = AlbertTokenizer(sp_model)

    def _ids(self, text: str) -> list[int]:
        ids = self.tokenize(self.tf.constant([text]))
        return [int(i) for i in ids.flat_values.numpy()]

    def _batch(self, rows: list[list[int]]) -> dict:
        np = self.np
        ids = np.full((len(rows), SEQ_LENGTH), self.pad_id, np.int32)
        for i, row in enumerate(rows):
            row = [self.cls_id, *row[: SEQ_LENGTH - 2], self.sep_id]
            ids[i, : len(row)] = row
        return dict(
            input_word_ids=ids,
            input_mask=(ids != self.pad_id).astype(np.int32),
            input_type_ids=np.zeros_like(ids),
        )

    def _top5(self, rows: list[list[int]], positions: list[int]):
        """Top-5 ids at one masked position per row: int [B, 5]."""
        inputs = self._batch(rows)
        # +1: the [CLS] token _batch puts in front.
        inputs["masked_lm_positions"] = self.np.array([[p + 1] for p in positions], self.np.int32)
        logits = self.mlm({k: self.tf.constant(v) for k, v in inputs.items()})["mlm_logits"]
        return self.tf.math.top_k(logits[:, 0, :], k=5).indices.numpy()

    def fill_in_the_blank(self, log: Callable[[str], None]) -> None:
        rows, positions = [], []
        for sentence, _ in FILL_IN_THE_BLANK:
            before, after = sentence.split("[MASK]")
            left = self._ids(before) if before.strip() else []
            rows.append([*left, self.mask_id, *(self._ids(after) if after.strip() else [])])
            positions.append(len(left))
        for (sentence, answer), top in zip(
            FILL_IN_THE_BLANK, self._top5(rows, positions), strict=True
        ):
            words = [p.replace("▁", "") or "▁" for p in self.pieces.convert_ids_to_tokens(top)]
            mark = "✓" if answer in words else " "
            log(f"      {mark} {sentence}  ->  {', '.join(words)}   (answer: {answer})")

    def mean_pooled(self, sentences: list[str]):
        """Mean of sequence_output over real tokens: float [B, H]."""
        inputs = self.preprocess(self.tf.constant(sentences))
        sequence = self.encoder(inputs)["sequence_output"]  # [B, S, H]
        mask = self.tf.cast(inputs["input_mask"], sequence.dtype)[:, :, None]  # [B, S, 1]
        return (self.tf.reduce_sum(sequence * mask, 1) / self.tf.reduce_sum(mask, 1)).numpy()

    def similarity(self, log: Callable[[str], None]) -> None:
        np = self.np
        for a, b in SIMILARITY_PAIRS:
            u, v = self.mean_pooled([a, b])
            cosine = float(u @ v / (np.linalg.norm(u) * np.linalg.norm(v)))
            log(f"      cosine {cosine:+.3f}  {a!r} ~ {b!r}")

    def pooled_output(self, sentence: str) -> list[float]:
        inputs = self.preprocess(self.tf.constant([sentence]))
        return self.encoder(inputs)["pooled_output"].numpy()[0].tolist()

    def heldout_top5_accuracy(self, heldout: Path) -> tuple[float, int]:
        """Masks one token (not special, not punctuation-only) in each of the first EVAL_TOKENS
        held-out sentences of 6+ tokens, at a seeded random position; returns (accuracy, count).
        """
        rng = self.np.random.default_rng(SEED)
        rows, positions, answers = [], [], []
        for line in heldout.read_text(encoding="utf-8").splitlines():
            ids = self._ids(line)[: SEQ_LENGTH - 2] if line.strip() else []
            candidates = [i for i, t in enumerate(ids) if self._is_word_piece(t)]
            if len(ids) < 6 or not candidates:
                continue
            position = int(rng.choice(candidates))
            answers.append(ids[position])
            ids[position] = self.mask_id
            rows.append(ids)
            positions.append(position)
            if len(rows) == EVAL_TOKENS:
                break
        top = self._top5(rows, positions)
        hits = sum(answer in row for answer, row in zip(answers, top.tolist(), strict=True))
        return hits / len(rows), len(rows)

    def _is_word_piece(self, token_id: int) -> bool:
        piece = self.pieces.convert_ids_to_tokens([token_id])[0].replace("▁", "")
        return any(ch.isalnum() for ch in piece)


# Run by _start_new_process: loads both modules as a user would and prints pooled_output.
_NEW_PROCESS_SCRIPT = """
import json, sys, warnings
warnings.filterwarnings("ignore", message="pkg_resources is deprecated")
import tensorflow as tf, tensorflow_hub as hub, tensorflow_text
preprocess = hub.KerasLayer(sys.argv[1] + "/preprocess")
encoder = hub.KerasLayer(sys.argv[1] + "/encoder")
outputs = encoder(preprocess(tf.constant([sys.argv[2]])))
print(json.dumps(outputs["pooled_output"].numpy()[0].tolist()))
"""


def _start_new_process(hub_dir: Path, sentence: str) -> subprocess.Popen:
    """Starts a fresh interpreter that loads `hub_dir`'s modules with hub.KerasLayer and prints
    the pooled_output of `sentence` as JSON."""
    return subprocess.Popen(
        [sys.executable, "-c", _NEW_PROCESS_SCRIPT, str(hub_dir), sentence],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
    )


def _finish_new_process(process: subprocess.Popen, expected: list[float]) -> float:
    """Waits for `_start_new_process`; returns the largest difference of its pooled_output from
    `expected`. Raises RuntimeError if the new process failed or its outputs differ."""
    stdout, stderr = process.communicate()
    if process.returncode != 0:
        raise RuntimeError(f"reloading the modules in a new process failed:\n{stderr}")
    pooled = json.loads(stdout.strip().splitlines()[-1])
    if len(pooled) != len(expected):
        raise RuntimeError(f"pooled_output has {len(pooled)} values in a new process")
    drift = max(abs(a - b) for a, b in zip(pooled, expected, strict=True))
    if drift > 1e-4:
        raise RuntimeError(f"pooled_output differs in a new process by {drift}")
    return drift


def _print_next_steps(result: QuickstartResult, log: Callable[[str], None]) -> None:
    out = result.out_dir
    log(
        f"""
Done in {result.seconds / 60:.1f} min. Held-out top-5 masked-LM accuracy: \
{result.top5_accuracy:.1%} (chance {result.chance:.2%}).

TF-Hub modules (hub.KerasLayer / hub.load / keras.layers.TFSMLayer):
  encoder:    {result.encoder_dir}
  preprocess: {result.preprocess_dir}
Checkpoint directory (for pretrain --init-checkpoint, finetune --init, export): \
{result.checkpoint_dir}

Next:
  tensorboard --logdir {out}/pretrain
  albert-tf params --config base
  albert-tf pretrain --data '{out}/data/*.tfrecord' --config tiny --output my_run
  albert-tf finetune --task classify --train train.tsv --eval dev.tsv \
--init {result.checkpoint_dir} --output my_classifier
  albert-tf export --checkpoint {result.checkpoint_dir} --output my_hub
  jupyter notebook colab/   (sentiment with hub.KerasLayer, pretraining, conversion, parameters)"""
    )
