"""EMPG: entropy-modulated policy gradients (Wang et al. 2025, arXiv:2509.09265).

EMPG rescales each step's outcome advantage by how certain the policy was at that step and adds a
bonus for steps that lead to a confident next step. Its definitions, as the authors' project page
(empgseed-seed.github.io, "compute_empg_advantage") states them, per step i with uncertainty H_i:

    H̃_i   = (H_i − min H) / (max H − min H + eps)                 batch min-max      (paper eq. 12)
    g_i   = exp(−k·H̃_i) / mean_j exp(−k·H̃_j)                     self-calibrating scale (eq. 10)
    f_i   = exp(−k_f·H̃_i)                                         future clarity      (eq. 11)
    A'_i  = g_i·A_i + ζ·f_{i+1}·[i+1 exists in i's trajectory]                          (eq. 8)
    Â_i   = A'_i − mean_j A'_j                                      final centering      (eq. 7)

with A_i the trajectory's outcome advantage (GRPO's; the paper runs EMPG on top of GRPO and DAPO)
and the min, max and means taken over every step of the batch. Defaults k = k_f = 1, ζ = 0.1 (the
project page's). Since mean g = 1, a confident step (g > 1) of a successful trajectory gets more
credit and a confident step of a failed one more blame; an uncertain step (g < 1) gets less of
either.

Our reconstruction where the sources leave a detail open (each an ``AdvantageOptions`` field):
- H_i: the paper uses the mean per-token entropy of the step's response; we read
  ``StepBatch.entropy`` when the rollout recorded it, else the response's mean token NLL, a
  one-sample estimate of it (``uncertainty``).
- The statistics' scope: the batch (``empg_scope='batch'``, the paper) or each episode group
  (``'group'``), which keeps one task's credit independent of the other tasks in the batch.
- Centering: the project page subtracts the mean only (no division by a std); so do we.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

from gaca.advantage.layout import Layout
from gaca.advantage.segments import segment_count, segment_min_max, segment_sum

EmpgScope = Literal["batch", "group"]


def minmax_normalize(values: torch.Tensor, ids: torch.Tensor, num_segments: int, *, eps: float = 1e-6
                     ) -> torch.Tensor:
    """Min-max normalization within segments: ṽ_i = (v_i − min_s v) / (max_s v − min_s v + eps), s = s(i).

    In [0, 1); 0 on a segment whose values are all equal.

    Args:
      values: [N] float.
      ids:    [N] int64 dense segment ids (each of 0..S-1 present).
    Returns:
      [N], dtype of ``values``.
    """
    low, high = segment_min_max(values, ids, num_segments)
    low_i, high_i = low.index_select(0, ids), high.index_select(0, ids)
    return (values - low_i) / (high_i - low_i + eps)


def segment_mean(values: torch.Tensor, ids: torch.Tensor, num_segments: int) -> torch.Tensor:
    """mean_{j: s(j) = s(i)} v_j for every row i.

    Args:
      values: [N] float.
      ids:    [N] int64 dense segment ids (each of 0..S-1 present).
    Returns:
      [N], dtype of ``values``.
    """
    counts = segment_count(ids, num_segments).to(values.dtype)
    return (segment_sum(values, ids, num_segments) / counts).index_select(0, ids)


def next_step_values(values: torch.Tensor, layout: Layout) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row's value at the next step of its trajectory (the next row in step order).

    next_i = v_{i+1} and has_next_i = True where i is not its trajectory's last step; 0 and False
    on the last step.

    Args:
      values: [N] float, in the batch's row order.
      layout: the batch layout (its (trajectory, step) order).
    Returns:
      ([N] next values, dtype of ``values``; [N] bool has_next), in the batch's row order.
    """
    sorted_values = values.index_select(0, layout.order)
    following = torch.roll(sorted_values, -1)
    has_next_sorted = ~layout.is_last
    next_sorted = torch.where(has_next_sorted, following, torch.zeros((), dtype=values.dtype))
    next_values = torch.empty_like(next_sorted).index_copy_(0, layout.order, next_sorted)
    has_next = torch.empty_like(has_next_sorted).index_copy_(0, layout.order, has_next_sorted)
    return next_values, has_next


@dataclass(frozen=True)
class EmpgTerms:
    """EMPG's advantage and its parts, all [N] float64 in the batch's row order.

    Attributes:
      advantage:   Â_i, the centered modulated advantage.
      scale:       g_i, the self-calibrating scale (mean 1 over each scope).
      bonus:       ζ·f_{i+1}, the future-clarity bonus (0 on a trajectory's last step).
      uncertainty: H̃_i, the min-max normalized uncertainty in [0, 1).
    """

    advantage: torch.Tensor
    scale: torch.Tensor
    bonus: torch.Tensor
    uncertainty: torch.Tensor


def empg_advantage(
    base: torch.Tensor,
    uncertainty: torch.Tensor,
    layout: Layout,
    *,
    scope: EmpgScope = "batch",
    k: float = 1.0,
    k_future: float = 1.0,
    zeta: float = 0.1,
    eps: float = 1e-6,
) -> EmpgTerms:
    """EMPG's modulated advantage (module docstring): Â_i = A'_i − mean_{s(i)} A', with
    A'_i = g_i·A_i + ζ·f_{i+1}, g_i = exp(−k·H̃_i)/mean_{s(i)} exp(−k·H̃), f_i = exp(−k_f·H̃_i),
    H̃ the min-max normalized uncertainty over the scope s(i) (the batch, or i's episode group).

    Args:
      base:        [N] float, A_i, the outcome advantage to modulate (A^E in ``empg``).
      uncertainty: [N] float, H_i (``uncertainty.step_uncertainty``).
      layout:      the batch layout (trajectory order; episode groups for ``scope='group'``).
    Returns:
      ``EmpgTerms`` (float64).
    Reference: Wang et al. 2025, arXiv:2509.09265, eqs. 7, 8, 10-12.
    """
    if scope == "batch":
        ids = torch.zeros_like(layout.group)
        num = 1
    elif scope == "group":
        ids, num = layout.group, layout.num_groups
    else:
        raise ValueError(f"empg_scope must be 'batch' or 'group', got {scope!r}")
    h = minmax_normalize(uncertainty.to(torch.float64), ids, num, eps=eps)
    raw_scale = torch.exp(-k * h)
    scale = raw_scale / segment_mean(raw_scale, ids, num)  # the mean is >= exp(-k) > 0
    clarity_next, has_next = next_step_values(torch.exp(-k_future * h), layout)
    bonus = torch.where(has_next, zeta * clarity_next, 0.0)
    modulated = scale * base.to(torch.float64) + bonus
    advantage = modulated - segment_mean(modulated, ids, num)
    return EmpgTerms(advantage=advantage, scale=scale, bonus=bonus, uncertainty=h)


__all__ = ["EmpgScope", "EmpgTerms", "empg_advantage", "minmax_normalize", "next_step_values", "segment_mean"]
