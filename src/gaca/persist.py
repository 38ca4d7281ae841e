"""Crash-safe files: the one way gaca writes anything it must not lose (pure Python, any layer may use it).

    atomic_write(path, text_or_bytes)            # a reader sees the old file or the new one, never half
    atomic_write(path, lambda f: torch.save(obj, f))   # or stream into the temporary file
    write_json(path, obj); read_json(path)
    with atomic_directory(target) as tmp: ...    # fill tmp; it becomes target (or loses a race to it)

A file is written to a temporary name in its own directory (unique per process, so concurrent
writers never share one), flushed and fsynced, then renamed over the target with ``os.replace``,
which is atomic on POSIX; the directory is fsynced after, so the rename survives a power cut. A
crash at any point leaves the previous file intact and at most a ``*.tmp`` file, which
``remove_stale_tmp`` clears. A directory is assembled under a temporary name and renamed into
place the same way; when another process got there first, its copy is kept.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

TMP_SUFFIX = ".tmp"


def _file_mode() -> int:
    """The mode a newly created file gets under the process's umask (mkstemp's files are 0600)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def _fsync_directory(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # a platform or file system without directory handles
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(path: str | os.PathLike[str], content: str | bytes | Callable[[IO[bytes]], None]) -> Path:
    """Replace ``path`` by ``content`` atomically and durably (module docstring).

    Args:
      path: the target file (its directory is created).
      content: the text (UTF-8) or bytes to write, or a function that writes into the open binary file.
    Returns:
      ``path`` as a ``Path``.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=TMP_SUFFIX, dir=path.parent)
    tmp = Path(tmp_name)
    try:
        os.fchmod(fd, _file_mode())
        with os.fdopen(fd, "wb") as f:
            if callable(content):
                content(f)
            else:
                f.write(content.encode() if isinstance(content, str) else content)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_directory(path.parent)
    return path


def write_json(path: str | os.PathLike[str], data: Any, *, indent: int | None = 1, **dumps: Any) -> Path:
    """``atomic_write`` of ``data`` as JSON (one trailing newline); ``indent=None`` writes one line;
    ``dumps``: further ``json.dumps`` options (``sort_keys``, ``default``)."""
    return atomic_write(path, json.dumps(data, indent=indent, **dumps) + "\n")


def read_json(path: str | os.PathLike[str], default: Any = None) -> Any:
    """The JSON in ``path``; ``default`` when there is no such file."""
    path = Path(path)
    return json.loads(path.read_text()) if path.is_file() else default


@contextlib.contextmanager
def atomic_directory(target: str | os.PathLike[str]) -> Iterator[Path]:
    """Assemble a directory under a temporary name; on success it becomes ``target``.

    When ``target`` appeared meanwhile (another process built the same thing), that copy is kept and
    the temporary one discarded; on an exception nothing is left behind.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=TMP_SUFFIX, dir=target.parent))
    try:
        yield tmp
        try:
            os.replace(tmp, target)
        except OSError:  # target exists and is not empty: another process won the race
            if not target.is_dir():
                raise
        _fsync_directory(target.parent)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def remove_stale_tmp(directory: str | os.PathLike[str]) -> list[Path]:
    """Delete the temporary files and directories an interrupted ``atomic_write`` or
    ``atomic_directory`` left directly in ``directory``; returns what was removed."""
    removed = []
    directory = Path(directory)
    if not directory.is_dir():
        return removed
    for p in directory.iterdir():
        if p.name.startswith(".") and p.name.endswith(TMP_SUFFIX):
            if p.is_dir():
                shutil.rmtree(p, ignore_errors=True)
            else:
                p.unlink(missing_ok=True)
            removed.append(p)
    return removed


__all__ = ["TMP_SUFFIX", "atomic_directory", "atomic_write", "read_json", "remove_stale_tmp", "write_json"]
