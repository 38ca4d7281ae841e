"""Atomic checkpoints: the policy artifact, optimizer, RNG states, trainer state and config in one file.

``save_checkpoint`` writes through ``gaca.persist.atomic_write``, so a crash while writing leaves the
previous checkpoint intact (a stale temporary file is removed at the next start of the run). The
policy is stored as a ``gaca.policy.PolicyArtifact`` (its config, weights, and the tokenizer files
of a policy whose tokenizer the run fitted): weights, tokenizer and config are one unit and cannot
be mismatched by a later run writing into the same directory.
"""

from __future__ import annotations

import pickle
import random
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

from gaca.persist import atomic_write
from gaca.policy import ArtifactError, PolicyArtifact

CHECKPOINT_NAME = "checkpoint.pt"
FORMAT_VERSION = 3
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


def save_checkpoint(path: str | Path, *, policy: PolicyArtifact, optimizer: torch.optim.Optimizer,
                    trainer_state: dict[str, Any], config: dict[str, Any]) -> Path:
    """Atomically write {policy artifact, optimizer, rng, trainer, config} to ``path``."""
    payload = {
        "format": FORMAT_VERSION,
        "policy": policy.to_payload(),
        "optimizer": optimizer.state_dict(),
        "rng": rng_state(),
        "trainer": trainer_state,
        "config": config,
    }
    return atomic_write(path, lambda f: torch.save(payload, f))


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Read a checkpoint written by ``save_checkpoint``; a one-line ``CheckpointError`` for anything else.

    ``path`` is a run directory or a checkpoint file. The payload's ``policy`` is a ``PolicyArtifact``.
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
    if payload["format"] != FORMAT_VERSION:
        raise CheckpointError(f"{path}: checkpoint format {payload['format']!r} is not supported by this gaca "
                              f"(it reads format {FORMAT_VERSION})")
    missing = [k for k in PAYLOAD_KEYS if k not in payload]
    if missing:
        raise CheckpointError(f"{path}: the checkpoint lacks {missing}; it is damaged")
    try:
        payload["policy"] = PolicyArtifact.from_payload(payload["policy"])
    except ArtifactError as e:
        raise CheckpointError(f"{path}: {e}") from e
    return payload


__all__ = [
    "CHECKPOINT_NAME",
    "CheckpointError",
    "load_checkpoint",
    "rng_state",
    "save_checkpoint",
    "set_rng_state",
]
