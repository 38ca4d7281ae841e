"""gaca.persist: atomic files and directories, and what a crash leaves behind."""

from __future__ import annotations

import pytest

from gaca.persist import atomic_directory, atomic_write, read_json, remove_stale_tmp, write_json


def test_atomic_write_replaces_whole_and_a_failed_write_keeps_the_old_file(tmp_path):
    path = tmp_path / "sub" / "f.bin"
    atomic_write(path, b"first")
    atomic_write(path, "second")  # text is UTF-8
    assert path.read_bytes() == b"second"

    def crash(f):
        f.write(b"half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        atomic_write(path, crash)
    assert path.read_bytes() == b"second" and sorted(p.name for p in path.parent.iterdir()) == ["f.bin"]


def test_json_round_trip_and_default(tmp_path):
    path = tmp_path / "r.json"
    assert read_json(path) is None and read_json(path, {}) == {}
    write_json(path, {"b": 1, "a": [1.5, None]}, indent=None, sort_keys=True)
    assert path.read_text() == '{"a": [1.5, null], "b": 1}\n'
    assert read_json(path) == {"a": [1.5, None], "b": 1}


def test_atomic_directory_appears_whole_keeps_a_winner_and_leaves_nothing_on_error(tmp_path):
    target = tmp_path / "model"
    with atomic_directory(target) as tmp:
        (tmp / "weights").write_text("w1")
        assert not target.exists()
    assert (target / "weights").read_text() == "w1"
    with atomic_directory(target) as tmp:  # another process got there first: its copy stays
        (tmp / "weights").write_text("w2")
    assert (target / "weights").read_text() == "w1"
    with pytest.raises(RuntimeError), atomic_directory(tmp_path / "never") as tmp:
        (tmp / "x").write_text("x")
        raise RuntimeError("rejected")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]


def test_remove_stale_tmp_clears_only_what_interrupted_writes_left(tmp_path):
    (tmp_path / ".checkpoint.pt.abc.tmp").write_bytes(b"half")
    (tmp_path / ".games.def.tmp").mkdir()
    (tmp_path / "keep.tmp").write_text("not ours: no leading dot")
    (tmp_path / "checkpoint.pt").write_text("good")
    removed = remove_stale_tmp(tmp_path)
    assert sorted(p.name for p in removed) == [".checkpoint.pt.abc.tmp", ".games.def.tmp"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.pt", "keep.tmp"]


def test_written_files_get_the_usual_permissions(tmp_path):
    import os

    mask = os.umask(0o022)
    try:
        path = atomic_write(tmp_path / "f", b"x")
    finally:
        os.umask(mask)
    assert path.stat().st_mode & 0o777 == 0o644  # not mkstemp's 0600: records and caches are shared
