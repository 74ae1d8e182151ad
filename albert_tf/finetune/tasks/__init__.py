"""The fine-tuning tasks, registered here and nowhere else.

Each task is a `Task` subclass (see `base.Task` for what it provides) in its own module of this
package, or, when it has more parts than one module holds, in its own subpackage whose `__init__`
exports the class: `squad/` (its reader and features, ALBERT's head, answer post-processing). A
task's module or package holds what only that task uses, its file reader among them
(`multiple_choice.read_race`, `tag.read_conll`, `squad.data.read_squad`); the modules beside this
package hold what several share (`data.read_text_file` for classify and regress, `features`,
`windows`, `metrics`). Adding a task is one new module (or subpackage) and one line in `REGISTRY`.
Tasks are imported when used, so listing the names (the CLI's `--task` choices) needs no TensorFlow.
"""

from __future__ import annotations

import importlib

from albert_tf.finetune.settings import TASK_NAMES, FinetuneSettings
from albert_tf.finetune.tasks.base import Task, TaskData
from albert_tf.lazy import lazy_exports

# task name (settings.TASK_NAMES, in this order) -> "module:class" under albert_tf.finetune.tasks
# (squad's is a subpackage)
REGISTRY = {
    "classify": "classify:Classify",
    "regress": "regress:Regress",
    "squad": "squad:Squad",
    "multiple-choice": "multiple_choice:MultipleChoice",
    "tag": "tag:Tag",
}

# The task classes, importable from here too (each imports its module on first use).
_CLASSES, __getattr__, __dir__ = lazy_exports(
    __name__,
    {f".{path.split(':')[0]}": path.split(":")[1] for path in REGISTRY.values()},
    globals(),
)

__all__ = ["REGISTRY", "TASK_NAMES", "Task", "TaskData", "get_task", *_CLASSES]


def get_task(settings: FinetuneSettings) -> Task:
    """The task named by `settings.task` (validated with the settings), bound to `settings`."""
    module, name = REGISTRY[settings.task].split(":")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)(settings)
