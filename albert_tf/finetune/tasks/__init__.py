"""The fine-tuning tasks, registered here and nowhere else.

Each task is a `Task` subclass in its own module of this package (see `base.Task` for what it
provides). Adding a task is one new module and one line in `REGISTRY`. Modules are imported when
a task is used, so listing the names (the CLI's `--task` choices) needs no TensorFlow.
"""

from __future__ import annotations

import importlib

from albert_tf.errors import ConfigError
from albert_tf.finetune.tasks.base import Task, TaskData, TaskSettings

# task name -> "module:class" under albert_tf.finetune.tasks
REGISTRY = {
    "classify": "classify:Classify",
    "regress": "regress:Regress",
    "squad": "squad:Squad",
    "multiple-choice": "multiple_choice:MultipleChoice",
    "tag": "tag:Tag",
}
TASK_NAMES = tuple(REGISTRY)

__all__ = ["REGISTRY", "TASK_NAMES", "Task", "TaskData", "TaskSettings", "get_task"]


def get_task(settings: TaskSettings) -> Task:
    """The task named by `settings.task`, bound to `settings` (ConfigError if unknown or the
    settings do not fit it)."""
    if settings.task not in REGISTRY:
        raise ConfigError(f"unknown task {settings.task!r} (tasks: {', '.join(TASK_NAMES)})")
    module, name = REGISTRY[settings.task].split(":")
    task = getattr(importlib.import_module(f"{__name__}.{module}"), name)(settings)
    task.validate()
    return task
