"""`albert_tf.run_record`: the run log that pretrain and distill keep, read back across processes
(the trainers' own tests resume real runs; these cover what a resume cannot show cheaply)."""

from __future__ import annotations

import json

from albert_tf.run_record import RUN_LOG_FILE, RunLog, hardware

MACHINE = {"cpu": "a CPU", "cores": 2, "accelerators": []}
SETTINGS = {"train_steps": 5000, "dtype": "auto", "quiet": False, "seed": 1}


def test_a_killed_process_a_dtype_change_and_a_hand_edit_are_all_recorded(tmp_path):
    first = RunLog(tmp_path)
    assert first.begin(0, SETTINGS, "bfloat16", MACHINE) == []
    first.reached(100, 100)  # its checkpoint at step 100; then it is killed (no end)
    # A new process resumes from that checkpoint: its own log, read from the file.
    second = RunLog(tmp_path)
    assert second.segments[0]["ended"] is None and second.segments[0]["to_step"] == 100
    changed = second.begin(100, {**SETTINGS, "dtype": "float32", "quiet": True}, "float32", MACHINE)
    assert changed == [{"step": 100, "key": "dtype", "old": "auto", "new": "float32"}]  # not quiet
    second.reached(169, 69, "SIGTERM")
    third = RunLog(tmp_path)
    third.begin(169, {**SETTINGS, "dtype": "float32", "train_steps": 2000}, "float32", MACHINE)
    third.reached(2000, 1831, "finished")
    ran = RunLog(tmp_path).summary()
    assert ran["steps"] == 2000 and ran["steps_taken"] == 2000
    assert ran["dtype"] == [
        {"from_step": 0, "to_step": 100, "dtype": "bfloat16"},
        {"from_step": 100, "to_step": 2000, "dtype": "float32"},
    ]
    assert ran["settings_changes"] == [
        {"step": 100, "key": "dtype", "old": "auto", "new": "float32"},
        {"step": 169, "key": "train_steps", "old": 5000, "new": 2000},
    ]
    assert ran["hardware"] == [MACHINE]
    assert [s["ended"] for s in ran["segments"]] == [None, "SIGTERM", "finished"]
    on_disk = json.loads((tmp_path / RUN_LOG_FILE).read_text())
    assert on_disk["settings"]["train_steps"] == 2000  # the latest process's


def test_hardware_names_the_cpu_and_counts_its_cores():
    machine = hardware()
    assert machine["cpu"] and machine["cores"] >= 1 and isinstance(machine["accelerators"], list)
