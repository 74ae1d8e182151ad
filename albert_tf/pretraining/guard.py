"""The divergence guard: a loss spike or a non-finite loss or weight rolls the run back.

Pretraining from scratch that blows up is the most common complaint about ALBERT and BERT
(google-research/albert#29: loss blew up at step 220k; a lower learning rate fixed it). PaLM and
OPT restarted from an earlier checkpoint, skipping the batches around the spike, and OPT also
lowered the learning rate. The guard does both, on the host, after every loop:

- a loop is **bad** when one of its steps has a non-finite loss, or its mean loss exceeds
  `spike_factor` times the guard's reference: the lowest median of `WINDOW` consecutive loops
  seen so far (armed once `MIN_HISTORY` loops are in; a falling loss never trips it, a loss that
  creeps up does);
- before any checkpoint is written the weights are checked too: a non-finite weight makes the
  loop bad, so **no checkpoint ever holds a NaN or an infinity**;
- a bad loop restores the last checkpoint (weights, optimizer slots, step), keeps reading the
  data where it is (the batches since that checkpoint are skipped), and multiplies the learning
  rate by `LR_DECAY`. After `max_rollbacks` rollbacks the next bad loop stops the run with a
  DivergenceError: one line naming the step, the loss and the last good checkpoint.

Each rollback is recorded in `guard.json` in the run directory (written before training goes
on), so a resumed run reads the data from the same place and uses the same learning-rate scale
as the run that rolled back: resumption stays exact. The reference level starts again on resume.

A run can also fail without a spike: it **stalls** (transformers#4727, loss stuck at 7.27), its
model predicting the commonest pieces whatever the context. `stalled` tells so at the end of a
run with held-out data: its MLM accuracy is no better than always answering the commonest masked
piece of that data (`commonest_share`), and `pretrain` says so in one line.
"""

from __future__ import annotations

import dataclasses
import json
import math
import statistics
from collections import deque
from pathlib import Path

import numpy as np

from albert_tf.errors import AlbertError
from albert_tf.io_utils import atomic_file

GUARD_FILE = "guard.json"
WINDOW = 20  # loops per median of the reference level
MIN_HISTORY = 5  # loops before a spike can be called
LR_DECAY = 0.5  # learning-rate factor per rollback
DEFAULT_SPIKE_FACTOR = 1.5
DEFAULT_MAX_ROLLBACKS = 3
STALL_MARGIN = 0.01  # MLM accuracy within this of the commonest piece's share: learned no context


class DivergenceError(AlbertError):
    """Pretraining diverged again after the allowed rollbacks (the last checkpoint is intact)."""


@dataclasses.dataclass(frozen=True)
class Rollback:
    """One rollback: the bad loop's last step and loss, the step restored, the batches skipped."""

    detected_step: int
    loss: float
    reference: float | None
    restored_step: int
    skipped_batches: int
    lr_scale: float
    reason: str


class DivergenceGuard:
    """Calls bad loops and keeps the rollback record; see the module docstring."""

    def __init__(self, spike_factor: float, max_rollbacks: int, record: Path | None) -> None:
        self.spike_factor = spike_factor
        self.max_rollbacks = max_rollbacks
        self.record = record
        self.rollbacks: list[Rollback] = []
        self.recent: deque[float] = deque(maxlen=WINDOW)
        self.reference: float | None = None

    # === The record (guard.json) ===

    def load(self, resumed_step: int) -> None:
        """Reads guard.json's rollbacks that happened before `resumed_step`'s checkpoint was
        the run's present (restored_step <= resumed_step); later ones will happen again."""
        if self.record is None or not self.record.is_file():
            return
        entries = json.loads(self.record.read_text())["rollbacks"]
        self.rollbacks = [Rollback(**e) for e in entries if e["restored_step"] <= resumed_step]

    def save(self) -> None:
        if self.record is None:
            return
        with atomic_file(self.record) as tmp:
            tmp.write_text(
                json.dumps({"rollbacks": [dataclasses.asdict(r) for r in self.rollbacks]}, indent=1)
                + "\n"
            )

    @property
    def skipped_batches(self) -> int:
        """Batches skipped by all rollbacks: the data position is step + this."""
        return sum(r.skipped_batches for r in self.rollbacks)

    @property
    def lr_scale(self) -> float:
        return LR_DECAY ** len(self.rollbacks)

    # === Calling a loop ===

    def check_losses(self, losses: list[float]) -> str | None:
        """Why the loop with these per-step losses is bad (None when it is fine); a fine loop
        joins the reference window."""
        if not all(math.isfinite(x) for x in losses):
            return "non-finite loss"
        mean = sum(losses) / len(losses)
        if self.reference is not None and mean > self.spike_factor * self.reference:
            return f"loss spike ({mean:.3f} > {self.spike_factor:g} x {self.reference:.3f})"
        self.recent.append(mean)
        if len(self.recent) >= MIN_HISTORY:
            median = statistics.median(self.recent)
            self.reference = median if self.reference is None else min(self.reference, median)
        return None

    def roll_back(self, step: int, loss: float, restored_step: int, reason: str) -> Rollback:
        """Records a rollback from the bad loop ending at `step` to checkpoint `restored_step`,
        or raises DivergenceError when the rollbacks are used up."""
        if len(self.rollbacks) >= self.max_rollbacks:
            raise DivergenceError(
                f"pretraining diverged at step {step} ({reason}) after {len(self.rollbacks)} "
                f"rollbacks; the last good checkpoint is step {restored_step}: lower "
                "--learning-rate (LAMB: scale it with the square root of the batch size) and "
                "resume or start again"
            )
        rollback = Rollback(
            detected_step=step,
            loss=loss,
            reference=self.reference,
            restored_step=restored_step,
            skipped_batches=step - restored_step,
            lr_scale=LR_DECAY ** (len(self.rollbacks) + 1),
            reason=reason,
        )
        self.rollbacks.append(rollback)
        self.recent.clear()  # the level after a rollback is the restored one, at a lower rate
        self.save()
        return rollback


def commonest_share(batches) -> float:
    """The MLM accuracy of always answering the most frequent masked piece of `batches` (model
    batches with `masked_lm_ids` and `masked_lm_weights`), weighted as the MLM accuracy is; nan
    without masked positions."""
    ids, weights = [np.zeros(0, np.int64)], [np.zeros(0)]
    for batch in batches:
        ids.append(np.asarray(batch["masked_lm_ids"], np.int64).ravel())
        weights.append(np.asarray(batch["masked_lm_weights"], np.float64).ravel())
    counts = np.bincount(np.concatenate(ids), weights=np.concatenate(weights))
    total = counts.sum()
    return float(counts.max() / total) if total > 0 else math.nan


def stalled(mlm_accuracy: float, baseline: float) -> str | None:
    """One line when a run's held-out MLM accuracy is no better than `baseline`
    (`commonest_share` of the held-out data) plus STALL_MARGIN; None when it learned more."""
    if math.isnan(baseline) or mlm_accuracy > baseline + STALL_MARGIN:
        return None
    return (
        f"held-out MLM accuracy {mlm_accuracy:.4f} is no better than always answering the "
        f"commonest piece ({baseline:.4f}): the run stalled and learned no context; try a lower "
        "--learning-rate, more --warmup-steps or more steps"
    )
