import os
import stat
import uuid
from pathlib import Path

import pytest

from albert_tf.errors import OutputError
from albert_tf.io_utils import (
    atomic_dir,
    atomic_file,
    atomic_remote_file,
    is_file,
    is_remote,
    join,
    parent,
    path_str,
)


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


# === tf.io.gfile URLs ===


def test_urls_are_remote_and_keep_their_scheme():
    assert is_remote("gs://bucket/run") and is_remote("ram://x") and not is_remote("/tmp/gs:")
    assert not is_remote("run/gs://x") and not is_remote(Path("C:/x"))
    assert join("gs://bucket/run", "logs", "train") == "gs://bucket/run/logs/train"
    assert join(Path("run"), "logs") == str(Path("run") / "logs")
    assert parent("gs://bucket/run/ckpt-1.index") == "gs://bucket/run"
    assert parent("gs://bucket/run/") == "gs://bucket"
    assert path_str("gs://bucket/run/") == "gs://bucket/run/"
    assert path_str(Path("./run/")) == "run"


def test_atomic_remote_file_replaces_and_cleans_up():
    import tensorflow as tf

    root = f"ram://io-utils-{uuid.uuid4().hex}"
    target = join(root, "f.txt")
    tf.io.gfile.makedirs(root)
    try:
        for text in ("one", "two"):
            with atomic_remote_file(target) as tmp, tf.io.gfile.GFile(tmp, "w") as f:
                f.write(text)
                assert not tf.io.gfile.exists(target) or tf.io.gfile.GFile(target).read() == "one"
        with pytest.raises(ValueError), atomic_remote_file(target) as tmp:
            tf.io.gfile.GFile(tmp, "w").close()
            raise ValueError
        assert tf.io.gfile.GFile(target).read() == "two"
        assert tf.io.gfile.listdir(root) == ["f.txt"]
        assert is_file(target) and not is_file(root) and not is_file(join(root, "g"))
    finally:
        tf.io.gfile.rmtree(root)
