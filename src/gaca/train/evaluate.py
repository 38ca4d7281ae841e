"""Held-out evaluation: play each held-out task once and report success, length and invalid actions."""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import torch

from gaca.rollout.collect import EnvPoolLike, RolloutConfig, Trajectory, collect_rollouts


@dataclass
class EvalStats:
    """Results of one evaluation."""

    success: float
    """Share of held-out episodes won."""
    per_family: dict[str, float] = field(default_factory=dict)
    """Success rate per task family (``info["task_type"]``)."""
    episode_length: float = 0.0
    """Mean steps per episode."""
    invalid_ratio: float = 0.0
    """Share of steps with a malformed response or an inadmissible action."""
    episodes: int = 0
    forward_passes: int = 0
    seconds: float = 0.0

    def metrics(self, prefix: str = "eval") -> dict[str, float]:
        """Flat namespaced metrics (``eval/success``, ``eval/success/<family>``, …)."""
        out = {
            f"{prefix}/success": self.success,
            f"{prefix}/episode_length": self.episode_length,
            f"{prefix}/invalid_ratio": self.invalid_ratio,
            f"{prefix}/episodes": float(self.episodes),
        }
        for fam, rate in sorted(self.per_family.items()):
            out[f"{prefix}/success/{fam}"] = rate
        return out


def summarize_trajectories(trajs: list[Trajectory]) -> EvalStats:
    """Success overall and per family, mean length and invalid-step ratio of finished episodes."""
    if not trajs:
        raise ValueError("no trajectories to summarize")
    fam: dict[str, list[bool]] = defaultdict(list)
    for t in trajs:
        fam[t.task_type or "unknown"].append(t.won)
    steps = sum(t.length for t in trajs)
    return EvalStats(
        success=sum(t.won for t in trajs) / len(trajs),
        per_family={k: sum(v) / len(v) for k, v in fam.items()},
        episode_length=steps / len(trajs),
        invalid_ratio=sum(t.invalid for t in trajs) / max(1, steps),
        episodes=len(trajs),
    )


def evaluate(
    policy: Any,
    pool: EnvPoolLike,
    seeds: list[int],
    rollout_cfg: RolloutConfig,
    *,
    temperature: float | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
) -> EvalStats:
    """Play every seed once (group size 1) in chunks of the pool's size, without gradients."""
    import time

    cfg = dataclasses.replace(
        rollout_cfg,
        temperature=rollout_cfg.temperature if temperature is None else temperature,
        top_p=rollout_cfg.top_p if top_p is None else top_p,
    )
    t0 = time.perf_counter()
    trajs: list[Trajectory] = []
    passes = 0
    with torch.no_grad():
        for start in range(0, len(seeds), pool.num_envs):
            chunk = list(seeds[start : start + pool.num_envs])
            batch = collect_rollouts(policy, pool, chunk, cfg, group_size=1, generator=generator)
            trajs.extend(batch.trajectories)
            passes += batch.forward_passes
    stats = summarize_trajectories(trajs)
    stats.forward_passes = passes
    stats.seconds = time.perf_counter() - t0
    return stats


__all__ = ["EvalStats", "evaluate", "summarize_trajectories"]
