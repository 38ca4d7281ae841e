"""Segment reductions: the vectorized building blocks (sort + scatter, no Python loop over rows).

A *segment* is a set of rows sharing a dense id in [0, S). Every function here is O(N) after the
O(N log N) sort that produced the dense ids.

Gathers in this package use ``index_select``: on a loaded CPU, advanced indexing ``x[idx]`` with
intra-op threads was measured 1000x slower than ``index_select`` on small tensors (16 ms vs 20 µs).
"""

from __future__ import annotations

import torch


def dense_ids(keys: torch.Tensor) -> tuple[torch.Tensor, int]:
    """Map arbitrary int64 keys to dense ids 0..S-1 (in sorted key order).

    Args:
      keys: [N] int64.
    Returns:
      ([N] int64 dense ids, S the number of distinct keys).
    """
    n = keys.shape[0]
    if n and int(keys.min()) == 0 and int(keys.max()) < n:
        # Keys that already are 0..S-1, every one present, are their own dense ids: no sort needed.
        counts = torch.bincount(keys)
        if bool((counts > 0).all()):
            return keys, int(counts.shape[0])
    unique, inverse = torch.unique(keys, sorted=True, return_inverse=True)
    return inverse, int(unique.shape[0])


def pair_ids(major: torch.Tensor, minor_keys: torch.Tensor) -> tuple[torch.Tensor, int]:
    """Dense ids of (major, minor) pairs; ``major`` already dense ids (0 .. M − 1).

    Args:
      major:      [N] int64 dense ids.
      minor_keys: [N] int64 arbitrary keys.
    Returns:
      ([N] int64 dense pair ids ordered by (major, minor), number of distinct pairs).
    """
    minor, num_minor = dense_ids(minor_keys)
    # M * num_minor <= N^2, far below 2^63 for any batch that fits in memory.
    return dense_ids(major * num_minor + minor)


def segment_count(ids: torch.Tensor, num_segments: int) -> torch.Tensor:
    """[S] int64 number of rows in each segment."""
    return torch.bincount(ids, minlength=num_segments)


def segment_sum(values: torch.Tensor, ids: torch.Tensor, num_segments: int) -> torch.Tensor:
    """[S] Σ_{i: ids_i = s} values_i, in the dtype of ``values``."""
    return torch.zeros(num_segments, dtype=values.dtype, device=values.device).index_add_(0, ids, values)


def segment_mean_std(
    values: torch.Tensor, ids: torch.Tensor, num_segments: int, counts: torch.Tensor | None = None,
    weight: torch.Tensor | None = None, *, unbiased: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-segment mean and standard deviation, optionally weighted; unbiased (as ``torch.std``)
    unless asked otherwise.

    With integer weights w_i (row i counted w_i times, as if repeated), n_s = Σ_{i∈s} w_i:
    mean_s = Σ_i w_i·x_i / n_s,  std_s = sqrt(Σ_i w_i·(x_i − mean_s)² / (n_s − 1)), or / n_s with
    ``unbiased=False`` (the population std); without weights w_i = 1. A segment with n_s = 1 has
    std 0 (not NaN).

    Args:
      values: [N] float.
      ids:    [N] int64 dense segment ids.
      counts: optional [S] n_s (recomputed when omitted).
      weight: optional [N] int64 >= 1 row multiplicities; None: 1.
    Returns:
      ([S] mean, [S] std), in the dtype of ``values``.
    """
    if counts is None:
        counts = segment_count(ids, num_segments) if weight is None else segment_sum(weight, ids, num_segments)
    n = counts.to(values.dtype)
    w = None if weight is None else weight.to(values.dtype)
    mean = segment_sum(values if w is None else w * values, ids, num_segments) / n.clamp(min=1)
    centered = values - mean.index_select(0, ids)
    squares = centered * centered
    dof = (n - 1) if unbiased else n
    var = segment_sum(squares if w is None else w * squares, ids, num_segments) / dof.clamp(min=1)
    return mean, var.sqrt()


def segment_min_max(values: torch.Tensor, ids: torch.Tensor, num_segments: int) -> tuple[torch.Tensor, torch.Tensor]:
    """([S] min, [S] max) of ``values`` over each segment (every segment must have a row).

    Args:
      values: [N] float.
      ids:    [N] int64 dense segment ids, each of 0..S-1 present.
    Returns:
      ([S] min, [S] max), in the dtype of ``values``.
    """
    empty = torch.empty(num_segments, dtype=values.dtype, device=values.device)
    low = empty.scatter_reduce(0, ids, values, reduce="amin", include_self=False)
    high = empty.clone().scatter_reduce_(0, ids, values, reduce="amax", include_self=False)
    return low, high


def segment_all_equal(values: torch.Tensor, ids: torch.Tensor, num_segments: int) -> torch.Tensor:
    """[S] bool: every row of the segment holds the same value (exact comparison; an empty segment
    counts as equal).

    Each row is compared with one row of its segment (whichever ``index_copy_`` wrote last: any
    member serves), which is cheaper than a segment min and max.

    Args:
      values: [N] float.
      ids:    [N] int64 dense segment ids.
    Returns:
      [S] bool.
    """
    representative = torch.zeros(num_segments, dtype=values.dtype, device=values.device).index_copy_(0, ids, values)
    differs = values != representative.index_select(0, ids)
    return torch.bincount(ids[differs], minlength=num_segments) == 0


def discounted_returns_sorted(rewards: torch.Tensor, is_last: torch.Tensor, gamma: float) -> torch.Tensor:
    """Discounted return of each row, rows sorted by (trajectory, step).

    G_t = Σ_{k=t}^{T−1} γ^(k−t) r_k, i.e. G_t = r_t + γ·G_{t+1} with G_T = 0 inside a trajectory.

    Computed by pointer jumping (a parallel prefix scan of the linear recurrence): after j rounds
    each row holds the sum over its next 2^j rows, so ceil(log2 T_max) rounds of O(N) gathers
    suffice, with no cross-trajectory cancellation (unlike a global reverse cumsum of γ^(−t) r_t).

    Args:
      rewards: [N] float, r_t in trajectory-then-step order.
      is_last: [N] bool, True on the last row of each trajectory.
      gamma:   discount γ in [0, 1].
    Returns:
      [N] float64 returns G_t.
    """
    n = rewards.shape[0]
    returns = rewards.to(torch.float64).clone()
    coef = torch.full((n,), float(gamma), dtype=torch.float64, device=rewards.device).masked_fill_(is_last, 0.0)
    if n == 0 or gamma == 0.0:
        return returns
    jump = torch.arange(1, n + 1, device=rewards.device).clamp_(max=n - 1)
    # Longest run of non-last rows + 1 bounds the trajectory length.
    last_positions = torch.nonzero(is_last).squeeze(1)
    lengths = torch.diff(last_positions, prepend=last_positions.new_tensor([-1]))
    max_len = int(lengths.max())
    span = 1
    while span < max_len:
        returns = returns + coef * returns.index_select(0, jump)
        coef = coef * coef.index_select(0, jump)
        jump = jump.index_select(0, jump)
        span *= 2
    return returns


__all__ = [
    "dense_ids",
    "discounted_returns_sorted",
    "pair_ids",
    "segment_all_equal",
    "segment_count",
    "segment_mean_std",
    "segment_min_max",
    "segment_sum",
]
