"""Group-relative normalization, the one operation GRPO, RLOO and GiGPO's step level share."""

from __future__ import annotations

from typing import Literal

import torch

from gaca.advantage.segments import segment_count, segment_mean_std, segment_sum

Norm = Literal["mean_std", "mean"]


def group_normalize(
    values: torch.Tensor,
    ids: torch.Tensor,
    num_groups: int,
    *,
    norm: Norm = "mean_std",
    eps: float = 1e-6,
    leave_one_out: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Relative value of each member against its group.

    mean_std:  A_i = (x_i − b_i) / (std_{g(i)} x + eps)
    mean:      A_i =  x_i − b_i
    with baseline b_i = mean_{j∈g(i)} x_j, or with ``leave_one_out`` b_i = mean_{j∈g(i), j≠i} x_j
    (RLOO, Ahmadian et al. 2024). std is unbiased (as ``torch.std``). A group of one member
    has no baseline: A_i = 0.

    Args:
      values: [M] float, one value per member.
      ids:    [M] int64 dense group id of each member.
    Returns:
      ([M] advantage in the dtype of ``values``, [M] int64 size of each member's group).
    """
    counts = segment_count(ids, num_groups)
    mean, std = segment_mean_std(values, ids, num_groups, counts)
    member_count = counts.index_select(0, ids)
    if leave_one_out:
        total = segment_sum(values, ids, num_groups)[ids]
        others = (member_count - 1).to(values.dtype)
        baseline = torch.where(member_count > 1, (total - values) / others.clamp(min=1), values)
    else:
        baseline = mean.index_select(0, ids)
    centered = torch.where(member_count > 1, values - baseline, 0.0)
    if norm == "mean_std":
        return centered / (std.index_select(0, ids) + eps), member_count
    if norm == "mean":
        return centered, member_count
    raise ValueError(f"norm must be 'mean_std' or 'mean', got {norm!r}")


__all__ = ["Norm", "group_normalize"]
