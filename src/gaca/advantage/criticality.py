"""Criticality: how uncertain the policy was at a step, from its own sampled log-probs.

GACA reuses the rollout's log-probs: no extra model call. The score is the step's mean per-token
negative log-likelihood, normalized within its trajectory (the abstract of arXiv:2609.12424:
"normalizes the sampled response's mean per-token NLL within each trajectory"; the three
normalizations below are our reconstruction, selectable so that they can be compared).
"""

from __future__ import annotations

from typing import Literal

import torch

from gaca.advantage.layout import Layout
from gaca.advantage.segments import segment_count, segment_mean_std, segment_sum

Criticality = Literal["zscore", "ratio", "rank"]


def response_nll(logprob_sum: torch.Tensor, token_count: torch.Tensor) -> torch.Tensor:
    """Mean per-token NLL of each step's response: ℓ_i = −(1/|mask_i|) Σ_k mask_ik·logp_ik.

    Args:
      logprob_sum: [N] float, Σ_k mask_ik·logp_ik (``StepBatch.logprob_sum``).
      token_count: [N] int64 ≥ 1, |mask_i|.
    Returns:
      [N] float64.
    """
    return -logprob_sum.to(torch.float64) / token_count.to(torch.float64)


def _centered_rank(nll: torch.Tensor, layout: Layout) -> torch.Tensor:
    """Centered rank 2·r/(T−1) − 1 within each trajectory; ties get their average rank."""
    # Sort by (trajectory, nll): nll inside trajectory blocks, via a stable two-pass argsort.
    by_nll = torch.argsort(nll, stable=True)
    order = by_nll.index_select(0, torch.argsort(layout.traj.index_select(0, by_nll), stable=True))
    traj_sorted = layout.traj.index_select(0, order)
    nll_sorted = nll.index_select(0, order)
    n = nll.shape[0]
    start_of_traj = torch.cumsum(layout.traj_len, 0) - layout.traj_len
    start = start_of_traj.index_select(0, traj_sorted).to(torch.float64)
    position = torch.arange(n, dtype=torch.float64, device=nll.device) - start
    new_run = torch.ones(n, dtype=torch.bool, device=nll.device)
    new_run[1:] = (traj_sorted[1:] != traj_sorted[:-1]) | (nll_sorted[1:] != nll_sorted[:-1])
    run = torch.cumsum(new_run, 0) - 1
    num_runs = int(run[-1]) + 1
    mean_position = segment_sum(position, run, num_runs) / segment_count(run, num_runs).to(torch.float64)
    length = layout.traj_len.index_select(0, traj_sorted).to(torch.float64)
    rank = mean_position.index_select(0, run)
    centered = torch.where(length > 1, 2.0 * rank / (length - 1).clamp(min=1) - 1.0, 0.0)
    return torch.empty_like(centered).index_copy_(0, order, centered)


def criticality_score(
    nll: torch.Tensor, layout: Layout, *, method: Criticality = "zscore", eps: float = 1e-6
) -> torch.Tensor:
    """Criticality c_i of each step: its NLL normalized within its trajectory τ.

    zscore: c_i = (ℓ_i − mean_τ ℓ) / (std_τ ℓ + eps)
    ratio:  c_i = (ℓ_i − mean_τ ℓ) / (|mean_τ ℓ| + eps)   (= ℓ_i/mean_τ ℓ − 1 for mean_τ ℓ > 0)
    rank:   c_i = 2·rank_τ(ℓ_i)/(T − 1) − 1 ∈ [−1, 1], ties averaged
    A trajectory of one step, or with constant ℓ, gives c = 0 under every method. zscore is
    invariant to adding a constant to all of a trajectory's log-probs.

    Args:
      nll:    [N] float64 ℓ_i (``response_nll``).
      layout: the batch layout (trajectory ids).
    Returns:
      [N] float64.
    """
    if method == "rank":
        return _centered_rank(nll, layout)
    counts = layout.traj_len
    mean, std = segment_mean_std(nll, layout.traj, layout.num_trajs, counts)
    row_count = counts.index_select(0, layout.traj)
    centered = torch.where(row_count > 1, nll - mean.index_select(0, layout.traj), 0.0)
    if method == "zscore":
        return centered / (std.index_select(0, layout.traj) + eps)
    if method == "ratio":
        return centered / (mean.index_select(0, layout.traj).abs() + eps)
    raise ValueError(f"criticality must be 'zscore', 'ratio' or 'rank', got {method!r}")


__all__ = ["Criticality", "criticality_score", "response_nll"]
