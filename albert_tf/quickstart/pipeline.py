"""`albert-tf quickstart`: the whole pipeline on the embedded corpus, in a few minutes on a CPU.

corpus -> SentencePiece vocabulary -> pretraining data (training and held out) -> pretrain the
`tiny` preset for a fixed wall time, evaluating on the held-out data as it goes -> export TF-Hub
encoder + preprocess modules -> held-out figures beside their baselines (evaluation.py) ->
demos, trained beside random init (demos.py), then the same demos with the shipped pretrained
`albert_en_mini` -> curves.png (curves.py) -> load
the modules with hub.KerasLayer, here and in a new Python process.

Everything lands in one output directory, built atomically (a temporary sibling renamed into
place once the artifacts are complete); the figures, demos and reload then read it, and
`results.json` is written last:

  corpus/corpus.txt, corpus/heldout.txt   the embedded corpus (preprocess/corpus.py)
  spm.model, spm.vocab                    the SentencePiece vocabulary
  data/, heldout_data/                    pretraining TFRecords (training, held out)
  pretrain/                               the pretrained checkpoint directory (+ TensorBoard logs)
  hub/encoder, hub/preprocess             the TF-Hub modules
  curves.png                              training loss and held-out MLM accuracy against steps
  results.json                            every measured figure, with its baselines
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from albert_tf.config import PRESETS
from albert_tf.dtypes import resolve_dtype
from albert_tf.environment import check_tensorflow_hub
from albert_tf.errors import ConfigError
from albert_tf.export.bundle import export_bundle
from albert_tf.io_utils import atomic_dir, atomic_file, check_can_create, check_output_path
from albert_tf.preprocess.corpus import build_default_corpus
from albert_tf.preprocess.pretraining_data import create_pretraining_data
from albert_tf.preprocess.spm_train import train_sentencepiece
from albert_tf.preprocess.tokenizer import AlbertTokenizer
from albert_tf.pretraining.settings import PretrainSettings
from albert_tf.quickstart import evaluation as qe
from albert_tf.quickstart.curves import plot_curves
from albert_tf.quickstart.demos import DemoFigures, run_demos, shipped_demos
from albert_tf.quickstart.evaluation import HeldOut, Scores
from albert_tf.quickstart.reload import finish_new_process, hub_pooled_output, start_new_process
from albert_tf.quickstart.report import print_demo_margins, print_next_steps, print_scores

DEFAULT_OUT = "albert_quickstart"
DEFAULT_MINUTES = 4.0  # pretraining wall time at most
VOCAB_SIZE = 5000  # unigram on ~1.4 MB of text allows at most ~6,800 pieces
SEQ_LENGTH = 128
MAX_PREDICTIONS = 20
BATCH_SIZE = 32
LEARNING_RATE = 1e-2  # LAMB; the tiny preset learns fastest here in a few hundred steps
STEPS_PER_SECOND = 3.0  # tiny preset, batch 32 x 128, 2 CPU cores (sets the LR schedule)
EVALUATIONS = 8  # held-out evaluations during pretraining (points of the accuracy curve)
SEED = 12345
SHIPPED_MODEL = "albert_en_mini"  # shown beside the quickstart's own model in the demos
RELOAD_SENTENCE = "Return the number of items in the list."


@dataclass(frozen=True)
class QuickstartResult:
    """What a quickstart run produced and measured (results.json). Accuracies are fractions."""

    out_dir: str
    encoder_dir: str
    preprocess_dir: str
    checkpoint_dir: str
    curves: str
    vocab_size: int
    minutes: float
    pretrain_steps: int
    heldout_examples: int  # sentence pairs (SOP)
    heldout_masked_tokens: int  # blanks (MLM)
    heldout: dict[str, dict[str, float]]  # trained / random_init / unigram -> Scores
    demos: dict[str, dict]  # fill_in_the_blank / neighbours: median ranks by predictor, items
    # The same demos with the shipped pretrained model (albert_tf.pretrained) as "trained".
    shipped_demos: dict[str, dict] = field(default_factory=dict)
    train_history: list[dict] = field(default_factory=list)
    eval_history: list[dict] = field(default_factory=list)
    seconds: float = 0.0
    dtype: str = ""  # the compute dtype pretraining ran in (bfloat16 or float32)


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
    dtype: str = "auto",
) -> QuickstartResult:
    """Runs the quickstart pipeline into `out` (see the module docstring) and returns its figures.

    `dtype` is pretraining's compute dtype ("auto": bfloat16 where the CPU has AMX or AVX-512
    BF16, else float32). Raises ConfigError for a non-positive `minutes` or an unknown `dtype`,
    and OutputError when `out` exists (without `overwrite`, and not written by a previous
    quickstart) or cannot be written, before any heavy work.
    """
    target = validate_arguments(out, minutes, overwrite)
    dtype = resolve_dtype(dtype, "CPU")
    steps = _Steps(9, log)
    log(f"albert-tf quickstart: a tiny ALBERT from scratch on CPU, into {target}")
    if is_quickstart_output(target):
        log("      (replacing the previous quickstart's output there when this run completes)")
    with atomic_dir(target, overwrite=True) as work:
        sp_model, vocab_size, config, history = _build(work, target, minutes, dtype, steps)

    # The outputs are complete and in place: a new process reloads them while this one measures.
    reload = start_new_process(target / "hub", RELOAD_SENTENCE)
    try:
        measured = _measure(target, sp_model, config, vocab_size, history, steps, log)
        steps.start("Loading the modules with hub.KerasLayer, here and in a new Python process")
        drift = finish_new_process(reload, hub_pooled_output(target / "hub", RELOAD_SENTENCE))
        steps.done(f"pooled_output matches across processes within {drift:.1e}")
    finally:
        if reload.poll() is None:
            reload.kill()
            reload.wait()
    result = QuickstartResult(
        out_dir=str(target),
        encoder_dir=str(target / "hub" / "encoder"),
        preprocess_dir=str(target / "hub" / "preprocess"),
        checkpoint_dir=str(target / "pretrain"),
        curves=str(measured.curves),
        vocab_size=vocab_size,
        minutes=minutes,
        pretrain_steps=history.step,
        heldout_examples=measured.heldout.size,
        heldout_masked_tokens=measured.heldout.masked,
        heldout={k: asdict(v) for k, v in measured.scores.items()},
        demos=_demo_record(measured.demos),
        shipped_demos=_demo_record(measured.shipped),
        train_history=history.train_history,
        eval_history=history.eval_history,
        seconds=time.monotonic() - steps.started,
        dtype=dtype,
    )
    with atomic_file(target / "results.json") as tmp:
        tmp.write_text(json.dumps(asdict(result), indent=2) + "\n")
    print_next_steps(result, log)
    return result


@dataclass
class _Measured:
    """Steps 6-8's figures: the held-out set, the scores, the demos and the curves file."""

    heldout: HeldOut
    scores: dict[str, Scores]
    demos: DemoFigures
    shipped: DemoFigures
    curves: Path


def _measure(
    target: Path, sp_model: Path, config, vocab_size: int, history, steps: _Steps, log
) -> _Measured:
    """Steps 6-8 on the written `target`: held-out figures beside their baselines, the demos
    (trained beside random init, then the shipped model) and curves.png."""
    steps.start("Held-out figures beside their baselines")
    counts, models, scores, heldout = _held_out(target, config, vocab_size, log)
    steps.done(f"{heldout.masked} masked tokens in {heldout.size} held-out sentence pairs")

    steps.start("Demos: trained beside random init")
    tokenizer = AlbertTokenizer(target / sp_model.name)
    special = {k: tokenizer.convert_tokens_to_ids([t])[0] for k, t in _SPECIAL.items()}
    demos = run_demos(models, tokenizer, counts, special, log)
    print_demo_margins(demos, log)
    curves = plot_curves(
        history.train_history,
        history.eval_history,
        scores["unigram"].mlm_top1,
        scores["random_init"].mlm_top1,
        target / "curves.png",
    )
    steps.done(f"curves: {curves}")

    steps.start(f"The same demos with {SHIPPED_MODEL}, pretrained by albert-tf and shipped")
    shipped = shipped_demos(SHIPPED_MODEL, SEED, log)
    print_demo_margins(shipped, log)
    steps.done(f"{SHIPPED_MODEL}: see its model card (docs/models/albert_en_mini.md)")

    return _Measured(heldout, scores, demos, shipped, curves)


def _build(work: Path, target: Path, minutes: float, dtype: str, steps: _Steps):
    """Steps 1-5 into `work` (which becomes `target`): corpus, vocabulary, pretraining data,
    the pretrained tiny model and its TF-Hub modules. Returns (sp_model, vocab_size, config,
    the pretraining result)."""
    steps.start("Building the corpus from the standard library's docstrings and pydoc topics")
    corpus = build_default_corpus(work / "corpus")
    steps.done(
        f"{corpus.train_documents} training documents ({corpus.train_bytes / 1e6:.1f} MB), "
        f"{corpus.heldout_documents} held out ({corpus.heldout_bytes / 1e3:.0f} kB)"
    )

    steps.start(f"Training a SentencePiece vocabulary of {VOCAB_SIZE} pieces")
    sp_model = Path(train_sentencepiece([str(corpus.train)], VOCAB_SIZE, str(work / "spm")))
    vocab_size = _vocab_size(sp_model)
    steps.done(f"{sp_model.name}: {vocab_size} pieces")

    steps.start(f"Creating pretraining data (sequence length {SEQ_LENGTH}, n-gram MLM + SOP)")
    train_count = _pretraining_data(corpus.train, sp_model, work / "data", dupe_factor=2)
    heldout_count = _pretraining_data(
        corpus.heldout, sp_model, work / "heldout_data", dupe_factor=1
    )
    steps.done(f"{train_count} training instances, {heldout_count} held out")

    steps.start(f"Pretraining the tiny preset for {minutes:g} min on the CPU")
    config, history = _pretrain(work, sp_model, vocab_size, minutes, dtype)
    steps.done(f"{history.step} steps of batch {BATCH_SIZE}")

    steps.start("Exporting the TF-Hub encoder and preprocess modules")
    export_bundle(str(work / "pretrain"), str(work / "hub"), sp_model=str(sp_model))
    steps.done(f"{target / 'hub'}: encoder/, preprocess/")
    return sp_model, vocab_size, config, history


def _held_out(target: Path, config, vocab_size: int, log: Callable[[str], None]):
    """Step 6: the trained model, random weights and the unigram guess on the held-out data.
    Returns (training piece counts, the two models, their Scores, the held-out examples)."""
    import tensorflow as tf

    heldout = qe.read_examples(str(target / "heldout_data" / "*.tfrecord"), config)
    training = qe.read_examples(str(target / "data" / "*.tfrecord"), config)
    counts = qe.piece_counts(training, vocab_size)
    models = {
        "trained": qe.load_model(config, tf.train.latest_checkpoint(target / "pretrain"), SEED),
        "random": qe.load_model(config, None, SEED),
    }
    scores = {
        "trained": qe.model_scores(models["trained"], heldout, counts),
        "random_init": qe.model_scores(models["random"], heldout, counts),
        "unigram": qe.unigram_scores(heldout, counts, training.arrays["sentence_order_label"]),
    }
    print_scores(scores, log)
    return counts, models, scores, heldout


_SPECIAL = {"cls": "[CLS]", "sep": "[SEP]", "mask": "[MASK]"}


def _demo_record(demos) -> dict[str, dict]:
    """results.json's record of DemoFigures: median ranks by predictor, and every item."""
    return {
        name: {"median_rank": medians, "items": demos.details[name]}
        for name, medians in (("fill_in_the_blank", demos.blanks), ("neighbours", demos.neighbours))
    }


def _vocab_size(sp_model: Path) -> int:
    return AlbertTokenizer(sp_model).vocab_size


def _pretraining_data(text: Path, sp_model: Path, output: Path, dupe_factor: int) -> int:
    """Masked MLM + SOP TFRecords of `text` in `output`; returns the number of instances."""
    stats = create_pretraining_data(
        [str(text)],
        str(sp_model),
        str(output),
        max_seq_length=SEQ_LENGTH,
        max_predictions_per_seq=MAX_PREDICTIONS,
        dupe_factor=dupe_factor,
        seed=SEED,
        num_shards=2 if dupe_factor > 1 else 1,
    )
    return int(stats["num_instances"])


def _pretrain(work: Path, sp_model: Path, vocab_size: int, minutes: float, dtype: str):
    """Pretrains the tiny preset on work/data for `minutes`, evaluating on work/heldout_data
    EVALUATIONS times; returns (config, PretrainResult).

    The learning-rate schedule is laid out for the steps expected in that time on a 2-core CPU;
    the wall-time limit ends training wherever it is.
    """
    from albert_tf.pretraining.trainer import pretrain

    config = PRESETS["tiny"].replace(vocab_size=vocab_size)
    train_steps = max(int(minutes * 60 * STEPS_PER_SECOND), 10)
    settings = PretrainSettings(
        data=str(work / "data" / "*.tfrecord"),
        eval=str(work / "heldout_data" / "*.tfrecord"),
        config=config,
        output=str(work / "pretrain"),
        train_steps=train_steps,
        batch_size=BATCH_SIZE,
        learning_rate=LEARNING_RATE,
        warmup_steps=train_steps // 10,
        sp_model=str(sp_model),
        save_every=train_steps,
        eval_every=max(train_steps // EVALUATIONS, 1),
        log_every=max(min(50, train_steps // 20), 1),
        minutes=minutes,
        seed=SEED,
        dtype=dtype,
    )
    return config, pretrain(settings)
