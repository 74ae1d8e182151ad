"""`albert-tf quickstart`: pretrain, export and check a tiny ALBERT on the embedded corpus.

`pipeline` runs the steps and writes the output directory; `evaluation` measures the held-out
figures and their baselines; `demos` runs the fill-in-the-blank and nearest-neighbour demos; `report`
prints them; `curves` draws curves.png; `reload` loads the exported modules in a new process.
Importing this package does not import TensorFlow.
"""

from albert_tf.quickstart.pipeline import (
    DEFAULT_MINUTES,
    DEFAULT_OUT,
    QuickstartResult,
    run_quickstart,
    validate_arguments,
)

__all__ = [
    "DEFAULT_MINUTES",
    "DEFAULT_OUT",
    "QuickstartResult",
    "run_quickstart",
    "validate_arguments",
]
