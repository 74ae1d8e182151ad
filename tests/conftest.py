"""Shared pytest fixtures: the path to tests/fixtures and tiny configs."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# onnxruntime-extensions loaded before TensorFlow, as most scripts do it (the other order goes
# through albert_tf.runtimes.onnxruntime_extensions_library; tests/export/test_onnx_export.py checks
# it in a process of its own); conftest runs before any test module imports TensorFlow.
with contextlib.suppress(ImportError):
    import onnxruntime_extensions  # noqa: F401

# Property tests run seeded and bounded; `pytest --hypothesis-profile explore` searches further.
settings.register_profile(
    "albert-tf",
    max_examples=200,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "explore", settings.get_profile("albert-tf"), max_examples=2000, derandomize=False
)
settings.load_profile("albert-tf")

REPO = Path(__file__).resolve().parents[1]
# The fixtures ship with the repository (tests/fixtures/README.md says what produced them).
# ALBERT_TF_FIXTURES may name another copy; tests/install/test_fixtures.py fails if it lies
# outside REPO.
FIXTURES = Path(os.environ.get("ALBERT_TF_FIXTURES") or REPO / "tests" / "fixtures")


@pytest.fixture(scope="session", autouse=True)
def shipped_model_cache(tmp_path_factory) -> Path:
    """Shipped models (albert_tf.pretrained) are written as checkpoint directories into a cache
    on first use: the suite's goes to a temporary folder, not the user's ~/.cache."""
    cache = tmp_path_factory.mktemp("albert_tf_cache")
    os.environ["ALBERT_TF_CACHE"] = str(cache)
    return cache


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    if not FIXTURES.is_dir():
        pytest.fail(f"fixtures not found at {FIXTURES}: they ship in tests/fixtures of a clone")
    return FIXTURES


@pytest.fixture(scope="session")
def groups(tmp_path_factory, fixtures_dir):
    """`albert_tf1_groups` converted and exported once per session (see helpers)."""
    from tests import helpers

    return helpers.export_groups_fixture(tmp_path_factory.mktemp("groups"), fixtures_dir)


@pytest.fixture(scope="session")
def sp_onnx(tmp_path_factory, fixtures_dir):
    """A tiny vocab-1000 checkpoint exported with --onnx --tflite once per session (see
    helpers); skipped without the onnx extra."""
    pytest.importorskip("onnxruntime_extensions")
    from tests import helpers

    return helpers.export_sp_onnx_fixture(tmp_path_factory.mktemp("sp_onnx"), fixtures_dir)


@pytest.fixture(scope="session")
def sp_export(tmp_path_factory, fixtures_dir):
    """A vocab-1000 encoder + preprocess bundle exported once per session (see helpers)."""
    from tests import helpers

    return helpers.export_sp_fixture(tmp_path_factory.mktemp("sp_export"), fixtures_dir)
