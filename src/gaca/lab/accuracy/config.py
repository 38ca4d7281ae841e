"""What ``gaca lab accuracy`` measures, and how much it spends."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gaca import validate


@dataclass
class AccuracyConfig:
    """The lab's settings for one accuracy measurement (``gaca lab accuracy RUN key=value ...``)."""

    groups: int = 16
    """G: episode groups sampled from the checkpoint's policy (distinct train games)."""
    group_size: int = 0
    """N: trajectories per group (0: the run's ``rollout.group_size``)."""
    steps: int = 480
    """K: recorded steps that get a Monte-Carlo truth (stratified; every step when the batch has fewer)."""
    continuations: int = 16
    """M: continuations per step for Q and again for V (>= 2)."""
    seed: int = 0
    """Seeds the game draw, the rollout, the step sample, the continuations and the bootstrap."""
    bootstrap: int = 1000
    """Bootstrap replicates (over episode groups) of every interval."""
    num_envs: int = 256
    """Environments stepped at once by the continuations (one policy call per step for all of them)."""
    num_workers: int = 0
    """Environment worker processes (0: in this process; the native engine is fast enough)."""
    split: str = ""
    """Split the games come from ('': the run's ``env.train_split``, as in training)."""
    threads: int = 0
    """torch threads (0: the run's ``threads``)."""
    progress: bool = True
    """Show progress bars."""

    def __post_init__(self) -> None:
        validate.integer("groups", self.groups, 1)
        validate.integer("group_size", self.group_size, 0)
        validate.integer("steps", self.steps, 1)
        validate.integer("continuations", self.continuations, 2)
        validate.integer("bootstrap", self.bootstrap, 10)
        validate.integer("num_envs", self.num_envs, 1)
        validate.integer("num_workers", self.num_workers, 0)
        validate.integer("threads", self.threads, 0)

    @classmethod
    def quick(cls, **overrides: Any) -> AccuracyConfig:
        """A run of about two minutes on a tiny checkpoint (the test suite's)."""
        return cls(**{"groups": 4, "steps": 48, "continuations": 4, "bootstrap": 200, "num_envs": 96, **overrides})


__all__ = ["AccuracyConfig"]
