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
    lone_keeps_value: bool = False,
    unbiased: bool = True,
    weight: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Relative value of each member against its group.

    mean_std:  A_i = (x_i − b_i) / (std_{g(i)} x + eps)
    mean:      A_i =  x_i − b_i
    with baseline b_i = mean_{j∈g(i)} x_j, or with ``leave_one_out`` b_i = mean_{j∈g(i), j≠i} x_j
    (RLOO, Ahmadian et al. 2024). std is unbiased (as ``torch.std``), or the population std with
    ``unbiased=False`` (HGPO's published code, ``docs/peers.md``). A group of one member
    has no baseline: A_i = 0; with ``lone_keeps_value`` it is taken against baseline 0 and std 1
    instead, A_i = x_i / (1 + eps) (mean_std) or x_i (mean), as verl-agent's episode level does.

    With ``weight`` w, member j counts w_j times, exactly as if it were repeated w_j times: the
    group's size is n_g = Σ_{j∈g} w_j, its mean Σ w_j·x_j / n_g, its std the unbiased std of the
    repeated values; the leave-one-out baseline leaves out one of i's repeats,
    b_i = (Σ_{j∈g} w_j·x_j − x_i) / (n_g − 1); a member is alone when n_g = 1.

    Args:
      values: [M] float, one value per member.
      ids:    [M] int64 dense group id of each member.
      weight: optional [M] int64 >= 1 multiplicities; None: 1.
    Returns:
      ([M] advantage in the dtype of ``values``, [M] int64 size n_g of each member's group).
    """
    counts = segment_count(ids, num_groups) if weight is None else segment_sum(weight, ids, num_groups)
    mean, std = segment_mean_std(values, ids, num_groups, counts, weight, unbiased=unbiased)
    member_count = counts.index_select(0, ids)
    if leave_one_out:
        weighted = values if weight is None else weight.to(values.dtype) * values
        total = segment_sum(weighted, ids, num_groups)[ids]
        others = (member_count - 1).to(values.dtype)
        baseline = torch.where(member_count > 1, (total - values) / others.clamp(min=1), values)
    else:
        baseline = mean.index_select(0, ids)
    alone = member_count <= 1
    centered = torch.where(alone, values if lone_keeps_value else 0.0, values - baseline)
    if norm == "mean_std":
        scale = torch.where(alone, 1.0, std.index_select(0, ids)) if lone_keeps_value else std.index_select(0, ids)
        return centered / (scale + eps), member_count
    if norm == "mean":
        return centered, member_count
    raise ValueError(f"norm must be 'mean_std' or 'mean', got {norm!r}")


__all__ = ["Norm", "group_normalize"]
