import os
import stat

import pytest

from albert_tf.errors import OutputError
from albert_tf.io_utils import atomic_dir, atomic_file


def test_atomic_dir_renames_on_success_with_umask_mode(tmp_path):
    target = tmp_path / "out"
    with atomic_dir(target) as tmp:
        (tmp / "a.txt").write_text("x")
        assert not target.exists()
    assert (target / "a.txt").read_text() == "x"
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(target.stat().st_mode) == 0o777 & ~umask
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_atomic_dir_leaves_nothing_on_error(tmp_path):
    with pytest.raises(RuntimeError), atomic_dir(tmp_path / "out") as tmp:
        (tmp / "half").write_text("x")
        raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []


def test_atomic_dir_refuses_existing_unless_overwrite(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "old").write_text("old")
    with pytest.raises(OutputError, match="already exists"), atomic_dir(tmp_path / "out"):
        pass
    with atomic_dir(tmp_path / "out", overwrite=True) as tmp:
        (tmp / "new").write_text("new")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["new"]
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_atomic_file_replaces_and_cleans_up(tmp_path):
    target = tmp_path / "f.txt"
    with atomic_file(target) as tmp:
        tmp.write_text("one")
    with pytest.raises(ValueError), atomic_file(target) as tmp:
        tmp.write_text("two")
        raise ValueError
    assert target.read_text() == "one"
    assert [p.name for p in tmp_path.iterdir()] == ["f.txt"]


def test_output_under_a_file_is_an_output_error(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(OutputError, match="cannot create"), atomic_dir(tmp_path / "file" / "out"):
        pass
