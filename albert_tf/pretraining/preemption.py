"""How `pretrain` ends when the machine goes away: SIGTERM, a lost worker, a torn checkpoint.

- **Preemption.** TPU VMs and spot VMs send SIGTERM and kill the process a grace period later
  (about 30 s). While `pretrain` runs, `StopSignals` turns SIGTERM and SIGINT into a flag; the
  trainer reads it at the end of each host loop (a compiled loop of N steps cannot be cut
  short), writes a checkpoint at that step and returns; the CLI then exits with
  EXIT_PREEMPTED. Under MultiWorkerMirroredStrategy the flag is all-reduced at every loop
  boundary (TrainLoop.agree), so a signal to any one worker stops every worker at the same
  step. tf.distribute's PreemptionCheckpointHandler would do this on GCP GPU VMs, but it raises
  NotImplementedError for CPU and TPU workers, hence a handler of our own.
- **Lost worker.** When a peer dies, TensorFlow aborts the collective the survivors are in (or
  enter next) with an error naming the peer's task; `lost_worker` turns it into WorkerLost,
  which the CLI prints as one line before exiting with EXIT_WORKER_LOST.
- **Torn checkpoint.** A process killed while saving can leave a newest checkpoint that does not
  restore (tensorflow/tensorflow#61552); `restorable_checkpoint` falls back to the one before it.
"""

from __future__ import annotations

import json
import os
import re
import signal
import threading
from collections.abc import Callable

import tensorflow as tf

from albert_tf.checkpoint import check_checkpoint_files, tf_error_reason
from albert_tf.errors import CheckpointError

# sysexits.h's EX_TEMPFAIL: "a temporary failure; the user is invited to retry". The run wrote a
# checkpoint at the step it stopped at: the same command resumes it.
EXIT_PREEMPTED = 75
# sysexits.h's EX_UNAVAILABLE: a worker the run needs is gone. The run resumes, from its last
# checkpoint, when every worker runs the same command again.
EXIT_WORKER_LOST = 69

_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopSignals:
    """A context in which SIGTERM and SIGINT ask the run to stop instead of killing it.

    `requested` is the first signal's name ("SIGTERM", "SIGINT") or None. A second SIGINT
    raises KeyboardInterrupt (Ctrl-C twice stops at once); a second SIGTERM changes nothing.
    Handlers can only be installed from the main thread: elsewhere the context does nothing.
    The previous handlers come back on exit.
    """

    def __init__(self) -> None:
        self.requested: str | None = None
        self._previous: dict[int, object] = {}

    def _handle(self, signum: int, frame) -> None:
        if self.requested is not None and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.requested = self.requested or signal.Signals(signum).name

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            for signum in _STOP_SIGNALS:
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()


class WorkerLost(RuntimeError):
    """A multi-worker run lost a worker: `worker` names it (task and address when known)."""

    def __init__(self, worker: str, reason: str, step: int, checkpoint: str | None) -> None:
        self.worker, self.reason, self.step, self.checkpoint = worker, reason, step, checkpoint
        kept = (
            f"rerun every worker to resume from {checkpoint}"
            if checkpoint
            else "no checkpoint was written: rerun every worker to start again"
        )
        super().__init__(f"lost worker {worker} at step {step} ({reason}); {kept}")


# TensorFlow's errors when a collective's peer is gone: connection reset or refused
# (Unavailable), the health check or coordination service aborting collectives (Unavailable,
# Aborted, Cancelled), a restarted peer (FailedPrecondition), a collective timeout (DeadlineExceeded).
_PEER_ERRORS = (
    tf.errors.UnavailableError,
    tf.errors.AbortedError,
    tf.errors.CancelledError,
    tf.errors.FailedPreconditionError,
    tf.errors.DeadlineExceededError,
)
_TASK = re.compile(r"/job:(\w+)/replica:\d+/task:(\d+)")


def lost_worker(error: Exception, step: int, checkpoint: str | None) -> WorkerLost | None:
    """WorkerLost for a TensorFlow error that says a collective's peer is gone, else None.

    The worker is named by its task (`worker 1`) and, from TF_CONFIG, its address.
    """
    if not isinstance(error, _PEER_ERRORS):
        return None
    message = getattr(error, "message", "") or str(error)
    task = _TASK.search(message)
    if task is None:
        worker = "(not named by TensorFlow)"
    else:
        job, index = task.group(1), int(task.group(2))
        worker = f"{job} {index}"
        address = _cluster_address(job, index)
        if address:
            worker += f" ({address})"
    # The message opens with "Graph execution error:" and the op's trace; the cause is further on.
    cause = re.search(r"aborted by: ([^\n]+)", message) or re.search(
        r'grpc_message:"([^"]+)"', message
    )
    reason = cause.group(1) if cause else tf_error_reason(error)
    # "Error reported from /job:worker/task:1: The following tasks ... heartbeats):" (the
    # coordination service): the task is named already.
    reason = re.sub(r"^Error reported from \S+: ", "", reason).strip().rstrip(":")
    return WorkerLost(worker, reason, step, checkpoint)


def _cluster_address(job: str, index: int) -> str | None:
    try:
        cluster = json.loads(os.environ.get("TF_CONFIG", "{}")).get("cluster", {})
        return cluster[job][index]
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        return None


def restorable_checkpoint(directory: str, warn: Callable[[str], None], chief: bool) -> str | None:
    """The newest checkpoint in `directory` whose files read whole, or None if there is none.

    A newer one that does not (a save cut short, tensorflow/tensorflow#61552) is reported with
    one `warn` line; the chief also drops it from the checkpoint list, so that the next saves
    rotate complete checkpoints (its files stay on disk until a save of the same step replaces
    them). CheckpointError when no checkpoint reads whole.
    """
    state = tf.train.get_checkpoint_state(directory)
    if state is None or not state.model_checkpoint_path:
        return None
    paths = list(state.all_model_checkpoint_paths) or [state.model_checkpoint_path]
    torn: list[tuple[str, CheckpointError]] = []
    for prefix in reversed(paths):
        try:
            check_checkpoint_files(prefix)
        except CheckpointError as e:
            torn.append((prefix, e))
            continue
        for bad, error in torn:
            warn(f"checkpoint {bad} does not restore ({error}); resuming from {prefix}")
        if torn and chief:
            _forget(directory, state, {bad for bad, _ in torn})
        return prefix
    raise torn[0][1]


def _forget(directory: str, state, prefixes: set[str]) -> None:
    """Rewrites the checkpoint list in `directory` without `prefixes`."""
    kept = [
        (path, stamp)
        for path, stamp in zip(
            state.all_model_checkpoint_paths,
            state.all_model_checkpoint_timestamps or [None] * len(state.all_model_checkpoint_paths),
            strict=True,
        )
        if path not in prefixes
    ]
    stamps = [stamp for _, stamp in kept]
    tf.compat.v1.train.update_checkpoint_state(
        directory,
        kept[-1][0],
        all_model_checkpoint_paths=[path for path, _ in kept],
        all_model_checkpoint_timestamps=stamps if None not in stamps else None,
        last_preserved_timestamp=state.last_preserved_timestamp,
    )
