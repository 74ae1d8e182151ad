"""The quickstart's last check: the exported modules load with hub.KerasLayer in this process
and in a new Python process, and give the same pooled_output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path


def hub_pooled_output(hub_dir: Path, sentence: str) -> list[float]:
    """`sentence`'s pooled_output from the exported modules loaded with hub.KerasLayer."""
    import tensorflow as tf

    # tensorflow_hub 0.16 imports pkg_resources, which warns on every import.
    warnings.filterwarnings("ignore", message="pkg_resources is deprecated")
    import tensorflow_hub as hub
    import tensorflow_text  # noqa: F401  (registers the ops the preprocess module uses)

    preprocess = hub.KerasLayer(str(hub_dir / "preprocess"))
    encoder = hub.KerasLayer(str(hub_dir / "encoder"))
    return encoder(preprocess(tf.constant([sentence])))["pooled_output"].numpy()[0].tolist()


# Run by start_new_process: loads both modules as a user would and prints pooled_output.
_NEW_PROCESS_SCRIPT = """
import json, sys, warnings
warnings.filterwarnings("ignore", message="pkg_resources is deprecated")
import tensorflow as tf, tensorflow_hub as hub, tensorflow_text
preprocess = hub.KerasLayer(sys.argv[1] + "/preprocess")
encoder = hub.KerasLayer(sys.argv[1] + "/encoder")
outputs = encoder(preprocess(tf.constant([sys.argv[2]])))
print(json.dumps(outputs["pooled_output"].numpy()[0].tolist()))
"""


def start_new_process(hub_dir: Path, sentence: str) -> subprocess.Popen:
    """Starts a fresh interpreter that loads `hub_dir`'s modules with hub.KerasLayer and prints
    the pooled_output of `sentence` as JSON."""
    return subprocess.Popen(
        [sys.executable, "-c", _NEW_PROCESS_SCRIPT, str(hub_dir), sentence],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
    )


def finish_new_process(process: subprocess.Popen, expected: list[float]) -> float:
    """Waits for `start_new_process`; returns the largest difference of its pooled_output from
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
