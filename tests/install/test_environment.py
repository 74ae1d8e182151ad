"""A setuptools without pkg_resources (which tensorflow-hub 0.16.1 imports) is named in one line."""

from __future__ import annotations

import sys

import pytest

from albert_tf import cli
from albert_tf.commands import params
from albert_tf.environment import check_tensorflow_hub
from albert_tf.errors import InstallError
from tests.helpers import one_error_line


@pytest.fixture
def no_pkg_resources(monkeypatch):
    """As after `pip install torch` upgraded setuptools past 81: no pkg_resources module."""
    monkeypatch.setitem(sys.modules, "pkg_resources", None)


def test_check_names_the_fix(no_pkg_resources):
    with pytest.raises(InstallError, match=r"no pkg_resources .*pip install \"setuptools<82\""):
        check_tensorflow_hub()


def test_quickstart_stops_before_writing(no_pkg_resources, capsys, tmp_path):
    assert cli.main(["quickstart", "--output", str(tmp_path / "qs")]) == 2
    line = one_error_line(capsys.readouterr().err, "quickstart")
    assert "error: tensorflow_hub cannot be imported: setuptools" in line
    assert list(tmp_path.iterdir()) == []


def test_any_command_that_meets_the_import(monkeypatch, capsys):
    def run(args):
        raise ModuleNotFoundError("No module named 'pkg_resources'", name="pkg_resources")

    monkeypatch.setattr(params, "run", run)
    assert cli.main(["params", "--config", "tiny"]) == 2
    assert 'pip install -e ".[hf]"' in one_error_line(capsys.readouterr().err, "params")


def test_other_missing_modules_keep_their_traceback(monkeypatch):
    def run(args):
        raise ModuleNotFoundError("No module named 'torch'", name="torch")

    monkeypatch.setattr(params, "run", run)
    with pytest.raises(ModuleNotFoundError, match="torch"):
        cli.main(["params", "--config", "tiny"])
