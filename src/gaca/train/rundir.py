"""The run directory: every check a run needs before it writes its first byte, and what it owns there.

A new run refuses a directory that already holds files (``--resume`` continues the run in it,
``--overwrite`` removes gaca's own files first); a resumed run must find a readable checkpoint
trained with the same model. The policy's model and device, the environment's package and the
trackers' packages are checked here too, so that a run that cannot start fails before anything is
built or written.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path
from typing import Any

from gaca.config import to_dict
from gaca.envs import ENVIRONMENTS
from gaca.persist import remove_stale_tmp as remove_tmp_files
from gaca.policy import check_policy_source
from gaca.train.checkpoint import CHECKPOINT_NAME, load_checkpoint
from gaca.train.config import TrainConfig
from gaca.train.trackers import TRACKERS

logger = logging.getLogger(__name__)

#: What a run writes into its directory (``--overwrite`` removes exactly these).
#: The trackers' own files (``TrackerBackend.files``) are removed too.
RUN_FILES = (CHECKPOINT_NAME, "metrics.jsonl", "config.json", "tokenizer",
             "success.png", "diagnostics.png")
#: Policy settings that may change on resume (they do not change the weights' shapes or meaning).
RESUMABLE_POLICY_KEYS = ("cache_dir", "device")


class RunError(RuntimeError):
    """A run that cannot start or continue as asked (the message says what to do)."""


def _check_writable(run_dir: Path) -> None:
    parent = run_dir
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise RunError(f"cannot create out_dir {run_dir}: {parent} is a file, not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise RunError(f"cannot write to out_dir {run_dir}: no write permission on {parent}")


def _check_environment(cfg: TrainConfig) -> None:
    try:
        ENVIRONMENTS[cfg.env.name].resolved_factory()
    except ImportError as e:
        raise RunError(f"environment {cfg.env.name!r} cannot be loaded ({e}); install what it needs "
                       f"(pip install 'gaca[{cfg.env.name}]')") from e


def _check_trackers(cfg: TrainConfig) -> None:
    for name in cfg.trackers:
        missing = TRACKERS[name].missing(name)
        if missing:
            raise RunError(missing)


def check_resumable(cfg: TrainConfig, payload: dict[str, Any], where: Path) -> None:
    """The checkpoint's model must be the config's model: compare the ``policy`` tables."""
    saved, now = dict(payload["config"].get("policy", {})), to_dict(cfg)["policy"]
    changed = [k for k in now if k not in RESUMABLE_POLICY_KEYS and saved.get(k, now[k]) != now[k]]
    if changed:
        diff = ", ".join(f"policy.{k}={saved[k]!r} (config: {now[k]!r})" for k in changed)
        raise RunError(f"--resume: {where} was trained with {diff}; resume with the run's own settings "
                       "(drop those overrides) or start a new run in another out_dir")


def preflight(cfg: TrainConfig, *, resume: bool, overwrite: bool) -> dict[str, Any] | None:
    """Every check before the first byte is written; the checkpoint's payload when resuming.

    Raises:
      RunError, FileNotFoundError, CheckpointError, ModelNotFoundError, DeviceNotAvailableError:
      one line each, naming what is wrong and what to do.
    """
    run_dir = Path(cfg.out_dir)
    if resume and overwrite:
        raise RunError("--resume continues the run in out_dir and --overwrite removes it: give one of them")
    check_policy_source(cfg.policy)
    _check_environment(cfg)
    _check_trackers(cfg)
    _check_writable(run_dir)
    if resume:
        ckpt = run_dir / CHECKPOINT_NAME
        if not ckpt.is_file():
            raise FileNotFoundError(f"no checkpoint at {ckpt}: nothing to resume (start the run without --resume)")
        payload = load_checkpoint(ckpt)
        check_resumable(cfg, payload, ckpt)
        return payload
    if run_dir.is_dir() and any(run_dir.iterdir()) and not overwrite:
        held = ", ".join(sorted(p.name for p in run_dir.iterdir())[:6])
        raise RunError(f"out_dir {run_dir} is not empty ({held}): continue that run with --resume, start it over "
                       "with --overwrite, or choose another out_dir")
    return None


def clear_run_files(run_dir: Path) -> None:
    """Remove what an earlier run wrote into ``run_dir`` (``RUN_FILES`` and the trackers' files), nothing else."""
    for name in RUN_FILES + tuple(f for backend in TRACKERS.values() for f in backend.files):
        path = run_dir / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
    logger.warning("--overwrite: removed the earlier run's files from %s", run_dir)


def remove_stale_tmp(run_dir: Path) -> None:
    """Delete files left half-written by a crash, e.g. a checkpoint (the previous one is intact)."""
    for stale in remove_tmp_files(run_dir):
        logger.info("removed %s, left by an interrupted write", stale)


__all__ = ["RUN_FILES", "RunError", "check_resumable", "clear_run_files", "preflight", "remove_stale_tmp"]
