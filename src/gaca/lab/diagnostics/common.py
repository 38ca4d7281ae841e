"""What the diagnostics share: their error, a run's config, its training environments."""

from __future__ import annotations

from pathlib import Path

from gaca.config import from_dict
from gaca.envs import EnvPool
from gaca.persist import read_json
from gaca.train.config import TrainConfig


class DiagnosticError(ValueError):
    """A diagnostic asked of something it cannot read (a setting or seed the matrix lacks, a key no run logs)."""


def run_config(run_dir: str | Path) -> TrainConfig:
    """The ``TrainConfig`` a ``gaca train`` run directory was started with (its ``config.json``)."""
    data = read_json(Path(run_dir) / "config.json")
    if data is None:
        raise FileNotFoundError(f"{run_dir} holds no config.json: give a gaca train run directory")
    return from_dict(TrainConfig, data)


def train_pool(cfg: TrainConfig, groups: int | None = None) -> EnvPool:
    """The run's training environments, as its iterations have them: ``groups`` episode groups of
    ``rollout.group_size`` (default ``rollout.tasks_per_iter`` groups) on the train split."""
    groups = cfg.rollout.tasks_per_iter if groups is None else groups
    return EnvPool.for_split(cfg.env, cfg.env.train_split, groups * cfg.rollout.group_size,
                             num_games=cfg.env.num_train_games)


__all__ = ["DiagnosticError", "run_config", "train_pool"]
