"""What a training run ran, as opposed to what it was asked to run: the processes (segments)
that took its steps, each one's dtype and hardware, and every setting that changed between them,
at the step it changed.

A run that is stopped and resumed is several processes, and nothing forces them to agree: a
resume may pass another --dtype, "auto" may resolve to another dtype on another machine, and a
settings file in the run directory may have been edited by hand. `RunLog` keeps, in the run
directory's `RUN_LOG_FILE`, the settings each segment started with and compares them with the
next one's, so the run's record says what happened instead of repeating the last command line.
`pretrain` and `distill` keep one; `finetune` runs in one process and records its dtype, steps
and hardware directly (`hardware`).

On disk: {"settings": the latest segment's, "segments": [{"from_step", "to_step", "steps_taken",
"dtype", "hardware", "ended"}], "settings_changes": [{"step", "key", "old", "new"}]}. A segment's
`ended` is "finished", "time" or a signal's name; None while it runs, and so also for a process
that was killed (its `to_step` is then the last checkpoint it saved).
"""

from __future__ import annotations

import json
import os
from typing import Any

import tensorflow as tf

from albert_tf.environment import cpuinfo_field
from albert_tf.io_utils import atomic_remote_file, is_file, is_remote, join, write_json

RUN_LOG_FILE = "run_log.json"
# Settings that change no step of the run: they are left out of the comparison.
UNRECORDED = frozenset({"overwrite", "quiet", "progress"})


def hardware() -> dict[str, Any]:
    """{"cpu": the CPU's model name, "cores": visible cores, "accelerators": GPU/TPU names}."""
    accelerators = []
    for device in tf.config.list_physical_devices("GPU"):
        details = tf.config.experimental.get_device_details(device)
        accelerators.append(details.get("device_name", device.name))
    accelerators += [device.name for device in tf.config.list_logical_devices("TPU")]
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        "cpu": cpuinfo_field("model name") or "unknown",
        "cores": cores,
        "accelerators": accelerators,
    }


def settings_changes(before: dict, after: dict, step: int) -> list[dict[str, Any]]:
    """One {"step", "key", "old", "new"} per setting (but UNRECORDED) that differs."""
    keys = sorted((before.keys() | after.keys()) - UNRECORDED)
    return [
        {"step": step, "key": key, "old": before.get(key), "new": after.get(key)}
        for key in keys
        if before.get(key) != after.get(key)
    ]


class RunLog:
    """The run directory's `RUN_LOG_FILE` (see the module docstring); local paths or URLs."""

    def __init__(self, directory: str | os.PathLike):
        self.path = join(directory, RUN_LOG_FILE)
        self.settings: dict[str, Any] = {}
        self.segments: list[dict[str, Any]] = []
        self.changes: list[dict[str, Any]] = []
        if is_file(self.path):
            data = json.loads(_read(self.path))
            self.settings = data["settings"]
            self.segments = data["segments"]
            self.changes = data["settings_changes"]

    def begin(
        self, step: int, settings: dict, dtype: str, machine: dict | None = None
    ) -> list[dict[str, Any]]:
        """Starts a segment at restored step `step` with `settings` (JSON values) in resolved
        `dtype` on `machine` (default: `hardware()`), and returns the settings that differ from
        the previous segment's (also kept in the log, at `step`)."""
        changed = settings_changes(self.settings, settings, step) if self.segments else []
        self.changes += changed
        self.settings = settings
        self.segments.append(
            {
                "from_step": step,
                "to_step": step,
                "steps_taken": 0,
                "dtype": dtype,
                "hardware": hardware() if machine is None else machine,
                "ended": None,
            }
        )
        self.write()
        return changed

    def reached(self, step: int, taken: int, ended: str | None = None) -> None:
        """The running segment reached `step` after `taken` steps (more than `step` minus its
        first step where a rollback repeated some); `ended` says why it stopped, if it did."""
        segment = self.segments[-1]
        segment.update(to_step=step, steps_taken=taken, ended=ended)
        self.write()

    def write(self) -> None:
        record = {
            "settings": self.settings,
            "segments": self.segments,
            "settings_changes": self.changes,
        }
        if not is_remote(self.path):
            write_json(self.path, record)
            return
        with atomic_remote_file(self.path) as tmp, tf.io.gfile.GFile(tmp, "w") as f:
            f.write(json.dumps(record, indent=1) + "\n")

    def summary(self) -> dict[str, Any]:
        """What the run ran, for its record: "steps" (the step reached), "steps_taken" (every
        step any segment took, repeats included), "dtype" ([{"from_step", "to_step", "dtype"}],
        consecutive segments of one dtype merged), "hardware" (each machine once),
        "settings_changes" and "segments"."""
        dtypes: list[dict[str, Any]] = []
        machines: list[dict[str, Any]] = []
        for segment in self.segments:
            if dtypes and dtypes[-1]["dtype"] == segment["dtype"]:
                dtypes[-1]["to_step"] = segment["to_step"]
            else:
                dtypes.append({k: segment[k] for k in ("from_step", "to_step", "dtype")})
            if segment["hardware"] not in machines:
                machines.append(segment["hardware"])
        return {
            "steps": self.segments[-1]["to_step"] if self.segments else 0,
            "steps_taken": sum(s["steps_taken"] for s in self.segments),
            "dtype": dtypes,
            "hardware": machines,
            "settings_changes": self.changes,
            "segments": self.segments,
        }


def _read(path: str) -> str:
    if not is_remote(path):
        with open(path, encoding="utf-8") as f:
            return f.read()
    return tf.io.gfile.GFile(path).read()
