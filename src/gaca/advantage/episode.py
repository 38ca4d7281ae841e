"""Episode-level credit: the whole trajectory's return against its episode group (GRPO, RLOO)."""

from __future__ import annotations

from typing import Literal

import torch

from gaca.advantage.layout import Layout
from gaca.advantage.normalize import Norm, group_normalize
from gaca.advantage.segments import segment_sum

EpisodeStats = Literal["trajectory", "step"]


def episode_returns(reward: torch.Tensor, traj: torch.Tensor, num_trajs: int) -> torch.Tensor:
    """Undiscounted episode return R(τ) = Σ_t r_t.

    Args:
      reward: [N] float step rewards.
      traj:   [N] int64 dense trajectory ids.
    Returns:
      [num_trajs] float64.
    """
    return segment_sum(reward.to(torch.float64), traj, num_trajs)


def episode_advantage(
    traj_return: torch.Tensor,
    layout: Layout,
    *,
    norm: Norm = "mean_std",
    eps: float = 1e-6,
    episode_stats: EpisodeStats = "trajectory",
    leave_one_out: bool = False,
) -> torch.Tensor:
    """Episode-level advantage A^E(τ), broadcast to every step row of τ.

    A^E(τ) = (R(τ) − mean_g R) / (std_g R + eps)  (GRPO, Shao et al. 2024, arXiv:2402.03300),
    or the leave-one-out baseline with ``leave_one_out`` (RLOO).

    ``episode_stats`` says what a group's mean/std are taken over:
      - "trajectory" (default): each trajectory counts once, so a long failing trajectory does
        not outweigh a short successful one; this is the statistic GRPO defines.
      - "step": each step row counts (verl-agent's GiGPO code does this), which weights a
        trajectory by its length.

    Args:
      traj_return: [num_trajs] float64 R(τ).
      layout:      the batch layout (dense ids).
    Returns:
      [N] float64, row i gets A^E of its trajectory.
    """
    if episode_stats == "trajectory":
        per_traj, _ = group_normalize(
            traj_return, layout.traj_group, layout.num_groups, norm=norm, eps=eps, leave_one_out=leave_one_out
        )
        return per_traj.index_select(0, layout.traj)
    if episode_stats == "step":
        per_row, _ = group_normalize(
            traj_return.index_select(0, layout.traj), layout.group, layout.num_groups, norm=norm, eps=eps,
            leave_one_out=leave_one_out,
        )
        return per_row
    raise ValueError(f"episode_stats must be 'trajectory' or 'step', got {episode_stats!r}")


__all__ = ["EpisodeStats", "episode_advantage", "episode_returns"]
