"""Atomic checkpoints: model, optimizer, RNG states and trainer state in one file.

``save_checkpoint`` writes ``<path>.tmp`` then ``os.replace``s it onto ``path``, so a crash while
writing leaves the previous checkpoint intact.
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import numpy as np
import torch

CHECKPOINT_NAME = "checkpoint.pt"
FORMAT_VERSION = 1


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


def save_checkpoint(path: str | Path, *, policy_state: dict[str, Any], optimizer: torch.optim.Optimizer,
                    trainer_state: dict[str, Any], config: dict[str, Any]) -> Path:
    """Atomically write {policy, optimizer, rng, trainer, config} to ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "format": FORMAT_VERSION,
        "policy": policy_state,
        "optimizer": optimizer.state_dict(),
        "rng": rng_state(),
        "trainer": trainer_state,
        "config": config,
    }
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        torch.save(payload, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return path


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Read a checkpoint written by ``save_checkpoint`` (a clear error when it is missing)."""
    path = Path(path)
    if path.is_dir():
        path = path / CHECKPOINT_NAME
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}: give a run directory or a {CHECKPOINT_NAME} file")
    payload = torch.load(path, map_location="cpu", weights_only=False)
    if payload.get("format") != FORMAT_VERSION:
        raise ValueError(f"{path}: unsupported checkpoint format {payload.get('format')!r}")
    return payload


__all__ = ["CHECKPOINT_NAME", "load_checkpoint", "rng_state", "save_checkpoint", "set_rng_state"]
