"""`albert-tf serve DIR` without the serve extra: one line naming the extra, exit 2."""

from __future__ import annotations

import subprocess
import sys

# A process in which aiohttp cannot be imported, as after `pip install -e .` without [serve].
WITHOUT_AIOHTTP = """
import builtins, sys
real_import = builtins.__import__
def without_aiohttp(name, *args, **kwargs):
    if name.split(".")[0] == "aiohttp":
        raise ImportError("No module named 'aiohttp'", name="aiohttp")
    return real_import(name, *args, **kwargs)
builtins.__import__ = without_aiohttp
from albert_tf.cli import main
sys.exit(main(["serve", sys.argv[1]]))
"""


def test_serve_without_aiohttp_names_the_extra(tmp_path):
    done = subprocess.run([sys.executable, "-c", WITHOUT_AIOHTTP, str(tmp_path)],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1 and "aiohttp is missing" in lines[0] and ".[serve]" in lines[0]
