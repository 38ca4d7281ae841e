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
    row_penalty: torch.Tensor | None = None,
    lone_keeps_value: bool = False,
    row_weight: torch.Tensor | None = None,
) -> torch.Tensor:
    """Episode-level advantage A^E(τ), broadcast to every step row of τ.

    A^E(τ) = (R(τ) − mean_g R) / (std_g R + eps)  (GRPO, Shao et al. 2024, arXiv:2402.03300),
    or the leave-one-out baseline with ``leave_one_out`` (RLOO).

    ``episode_stats`` says what a group's mean/std are taken over:
      - "trajectory" (default): each trajectory counts once, so a long failing trajectory does
        not outweigh a short successful one; this is the statistic GRPO defines.
      - "step": each step row counts (verl-agent's GiGPO code does this), which weights a
        trajectory by its length. Row i's score is then S_i = R(τ(i)) − p_i with ``row_penalty``
        p (verl-agent's invalid-action penalty, applied after summing), so the rows of one
        trajectory may differ. With ``row_weight`` w, row i counts w_i times (a trainer's padding
        copies of it, which verl-agent counts as rows; see ``group_normalize``).

    Args:
      traj_return: [num_trajs] float64 R(τ).
      layout:      the batch layout (dense ids).
      row_penalty: [N] float, p_i ("step" statistics only); None: 0.
      row_weight:  [N] int64 >= 1, w_i ("step" statistics only); None: 1.
      lone_keeps_value: a group of one member keeps its value (see ``group_normalize``).
    Returns:
      [N] float64, row i gets A^E of its trajectory (of its own score, with a row penalty).
    """
    if episode_stats == "trajectory":
        if row_penalty is not None or row_weight is not None:
            raise ValueError("a row penalty or row weight needs episode statistics over step rows "
                             "(episode_stats='step')")
        per_traj, _ = group_normalize(
            traj_return, layout.traj_group, layout.num_groups, norm=norm, eps=eps, leave_one_out=leave_one_out,
            lone_keeps_value=lone_keeps_value,
        )
        return per_traj.index_select(0, layout.traj)
    if episode_stats == "step":
        score = traj_return.index_select(0, layout.traj)
        if row_penalty is not None:
            score = score - row_penalty.to(score.dtype)
        per_row, _ = group_normalize(
            score, layout.group, layout.num_groups, norm=norm, eps=eps, leave_one_out=leave_one_out,
            lone_keeps_value=lone_keeps_value, weight=row_weight,
        )
        return per_row
    raise ValueError(f"episode_stats must be 'trajectory' or 'step', got {episode_stats!r}")


__all__ = ["EpisodeStats", "episode_advantage", "episode_returns"]
