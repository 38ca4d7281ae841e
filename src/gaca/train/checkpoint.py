"""Atomic checkpoints: model, optimizer, RNG states, trainer state, config and tokenizer in one file.

``save_checkpoint`` writes ``<path>.tmp`` then ``os.replace``s it onto ``path``, so a crash while
writing leaves the previous checkpoint intact (a stale ``.tmp`` is removed at the next start of the
run). The checkpoint carries the config it was trained with and, for a model whose tokenizer was
fitted by the run (``tiny``), the tokenizer's files: weights, tokenizer and config are one unit and
cannot be mismatched by a later run writing into the same directory.
"""

from __future__ import annotations

import os
import pickle
import random
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

CHECKPOINT_NAME = "checkpoint.pt"
FORMAT_VERSION = 2
#: Keys every checkpoint holds.
PAYLOAD_KEYS = ("format", "policy", "optimizer", "rng", "trainer", "config")


class CheckpointError(ValueError):
    """A checkpoint file that is missing, unreadable, not gaca's, or not this run's."""


def rng_state() -> dict[str, Any]:
    """Python, NumPy and torch (CPU, and CUDA when present) global RNG states."""
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore what ``rng_state`` returned."""
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def tmp_path(path: str | Path) -> Path:
    """Where ``save_checkpoint`` writes before the atomic rename."""
    path = Path(path)
    return path.with_name(path.name + ".tmp")


def save_checkpoint(path: str | Path, *, policy_state: dict[str, Any], optimizer: torch.optim.Optimizer,
                    trainer_state: dict[str, Any], config: dict[str, Any],
                    tokenizer_files: dict[str, bytes] | None = None) -> Path:
    """Atomically write {policy, optimizer, rng, trainer, config, tokenizer files} to ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "format": FORMAT_VERSION,
        "policy": policy_state,
        "optimizer": optimizer.state_dict(),
        "rng": rng_state(),
        "trainer": trainer_state,
        "config": config,
        "tokenizer_files": tokenizer_files,
    }
    tmp = tmp_path(path)
    try:
        with open(tmp, "wb") as f:
            torch.save(payload, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Read a checkpoint written by ``save_checkpoint``; a one-line ``CheckpointError`` for anything else.

    ``path`` is a run directory or a checkpoint file.
    """
    path = Path(path)
    if path.is_dir():
        path = path / CHECKPOINT_NAME
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}: give a run directory or a {CHECKPOINT_NAME} file")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=False)
    except (pickle.UnpicklingError, zipfile.BadZipFile, EOFError, RuntimeError, ValueError, TypeError,
            AttributeError, ModuleNotFoundError) as e:
        raise CheckpointError(f"{path} is not a readable gaca checkpoint ({type(e).__name__}: {str(e)[:120]}); "
                              "it may be truncated or another program's file") from e
    if not isinstance(payload, dict) or "format" not in payload:
        raise CheckpointError(f"{path} is not a gaca checkpoint (a torch file without gaca's format marker)")
    if payload["format"] not in (1, FORMAT_VERSION):
        raise CheckpointError(f"{path}: checkpoint format {payload['format']!r} is not supported by this gaca "
                              f"(it reads formats 1 and {FORMAT_VERSION})")
    missing = [k for k in PAYLOAD_KEYS if k not in payload]
    if missing:
        raise CheckpointError(f"{path}: the checkpoint lacks {missing}; it is damaged")
    payload.setdefault("tokenizer_files", None)
    return payload


def tokenizer_files(directory: str | Path) -> dict[str, bytes]:
    """The files of a saved tokenizer directory, by name (what a checkpoint carries)."""
    return {p.name: p.read_bytes() for p in sorted(Path(directory).iterdir()) if p.is_file()}


def write_tokenizer_files(files: dict[str, bytes], directory: str | Path) -> Path:
    """Write ``tokenizer_files`` back into ``directory`` (replacing what is there) and return it."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (directory / name).write_bytes(data)
    return directory


__all__ = [
    "CHECKPOINT_NAME",
    "CheckpointError",
    "load_checkpoint",
    "rng_state",
    "save_checkpoint",
    "set_rng_state",
    "tmp_path",
    "tokenizer_files",
    "write_tokenizer_files",
]
