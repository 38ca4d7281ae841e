"""HGPO: hierarchy-of-groups policy optimization (He et al. 2026, arXiv:2602.22817, ICLR 2026).

GiGPO compares the returns of steps that start from the same state. HGPO observes that two such
steps may still have seen different histories (the agent's prompt carries its last few
observations), and compares each step within a hierarchy of groups of increasing history
consistency, then mixes the comparisons.

Level j = 1..K+1 of step i: the steps of i's episode group whose last j anchors agree with i's (i's
own anchor and the j−1 before it in its trajectory), so level 1 is GiGPO's step group and each
level refines the one below (G_1 ⊇ G_2 ⊇ ... ⊇ G_{K+1}). A step at position t < j−1 of its
trajectory has no level j. In each level group of two or more steps:

    A_j,i = (G_i − mean_{G_j(i)} G) / (std_{G_j(i)} G + eps)        (or G_i − mean with norm='mean')

with G_i the discounted return. The levels are mixed with weights growing with the history length:

    A_i = Σ_{j∈V(i)} w_j·A_j,i / (Σ_{j∈V(i)} w_j + eps),   w_j = (j + 1)^α

over the valid levels V(i) of row i: those where i has a peer and the group's returns are not all
equal (a level with no signal leaves the mix instead of pulling it to 0). Optionally the episode
advantage A^E joins as level 0 (weight 1, ``base_group`` in the code), valid where the episode
group's scores are not all equal.

Source: the paper's abstract and the authors' released code (verl-agent's ``recipe/hgpo``,
``core_hgpo.py``; defaults K = ``history_length`` = 2, α = ``length_weight_alpha`` = 1,
``mode`` = mean_std_norm, ``base_group`` = False, population std). The paper's text beyond its
abstract was not available to us: the equations above are those of the code. Our choices:
- "history context" = the sequence of the step's last j anchors (what the code keys on); actions
  are not part of it, as in the code. It is derived inside the estimator from the rows' anchors in
  (trajectory, step) order: no rollout field beyond GiGPO's.
- std: unbiased (gaca's convention) unless ``conventions='verl-agent'``, which takes the code's
  population std.
- Which levels are left out: the code tests A_j,i ≠ 0, which drops the all-equal levels and, as a
  side effect, a step that sits exactly at its group's mean; its float32 mean of equal returns can
  also miss 0 by a rounding error and keep a level with no signal. We test the group instead (all
  its returns equal, exact in floats): the two agree except for a step exactly at the mean of a
  group whose returns differ, which we keep (it adds 0 to the numerator, its weight to the
  denominator).
  ``hgpo_zero_levels='keep'`` counts every level with a peer (the plain weighted mean).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

from gaca.advantage.layout import Layout
from gaca.advantage.normalize import Norm, group_normalize
from gaca.advantage.segments import dense_ids, segment_all_equal

ZeroLevels = Literal["skip", "keep"]


def history_groups(layout: Layout, anchor_key: torch.Tensor, depth: int) -> list[tuple[torch.Tensor, int]]:
    """Dense ids of each row's history groups, levels j = 1..depth+1.

    Level j groups the rows of one episode group whose last j anchors are equal: key_1(i) =
    (group, a_i), key_j(i) = (key_{j−1}(i), a_{prev_{j−1}(i)}) with prev_m(i) the row m steps before i
    in its trajectory (rows in (trajectory, step) order). A row at position t < j−1 of its trajectory
    has no level j (id −1).

    Args:
      layout:     the batch layout.
      anchor_key: [N] int64 anchor keys (exact anchors or their similarity-cluster keys).
      depth:      K >= 0, the number of previous anchors of the deepest level.
    Returns:
      [(ids [N] int64, −1 where absent; number of groups)] for j = 1..K+1.
    """
    order = layout.order
    n = order.shape[0]
    anchor_sorted = anchor_key.index_select(0, order)
    traj_sorted = layout.traj.index_select(0, order)
    start = (torch.cumsum(layout.traj_len, 0) - layout.traj_len).index_select(0, traj_sorted)
    position = torch.arange(n, device=order.device) - start
    # Anchors made dense once: each level is then one sort of (parent key, anchor) pairs, whose
    # codes stay below N·N, far from 2^63.
    anchor_dense, num_anchors = dense_ids(anchor_sorted)
    key, num = dense_ids(layout.group.index_select(0, order) * num_anchors + anchor_dense)
    levels_sorted = [(key, num)]
    for j in range(2, depth + 2):
        rows = torch.nonzero(position >= j - 1).squeeze(1)
        deeper = torch.full((n,), -1, dtype=torch.int64, device=order.device)
        if rows.numel():
            earlier = anchor_dense.index_select(0, rows - (j - 1))
            sub, num = dense_ids(key.index_select(0, rows) * num_anchors + earlier)
            deeper.index_copy_(0, rows, sub)
        else:
            num = 0
        key = deeper
        levels_sorted.append((key, num))
    return [(torch.empty_like(ids).index_copy_(0, order, ids), count) for ids, count in levels_sorted]


@dataclass(frozen=True)
class HgpoTerms:
    """HGPO's advantage and its parts, all [N] in the batch's row order.

    Attributes:
      advantage:  A_i, the weighted mix of the valid levels (and of A^E as level 0, if given).
      step_level: the history levels' part of A_i: Σ_{j≥1} w_j·A_j,i / (Σ_{j∈V(i)} w_j + eps).
      weight:     the history levels' share of the weights, Σ_{j≥1} w_j / (Σ_{j∈V(i)} w_j + eps).
      has_peer:   bool, i has a level-1 (GiGPO) peer.
    """

    advantage: torch.Tensor
    step_level: torch.Tensor
    weight: torch.Tensor
    has_peer: torch.Tensor


def hgpo_advantage(
    returns: torch.Tensor,
    levels: list[tuple[torch.Tensor, int]],
    *,
    alpha: float = 1.0,
    norm: Norm = "mean_std",
    eps: float = 1e-6,
    unbiased: bool = True,
    zero_levels: ZeroLevels = "skip",
    base: torch.Tensor | None = None,
    base_valid: torch.Tensor | None = None,
) -> HgpoTerms:
    """HGPO's aggregated advantage (module docstring):
    A_i = Σ_{j∈V(i)} w_j·A_j,i / (Σ_{j∈V(i)} w_j + eps), w_j = (j + 1)^α, A_0 = A^E (``base``, weight 1).

    Level j ≥ 1 is in V(i) when i's level-j group has two or more rows and (``zero_levels='skip'``)
    their returns are not all equal; level 0 when ``base`` is given and ``base_valid``_i.

    Args:
      returns:    [N] float, the discounted return G_i from row i onward.
      levels:     ``history_groups`` output, levels j = 1, 2, ...
      base:       optional [N] float, A^E as level 0.
      base_valid: [N] bool, where level 0 counts (required with ``base``).
    Returns:
      ``HgpoTerms`` in the dtype of ``returns``.
    Reference: He et al. 2026, arXiv:2602.22817, and its code (verl-agent ``recipe/hgpo``).
    """
    if zero_levels not in ("skip", "keep"):
        raise ValueError(f"hgpo_zero_levels must be 'skip' or 'keep', got {zero_levels!r}")
    numerator = torch.zeros_like(returns)
    total_weight = torch.zeros_like(returns)
    has_peer = torch.zeros(returns.shape[0], dtype=torch.bool, device=returns.device)
    for j, (ids, num) in enumerate(levels, start=1):
        present = ids >= 0
        # Rows without level j go to an extra segment, whose statistics are never used: every
        # reduction stays one pass over all N rows, with no gather of the level's rows.
        segments = torch.where(present, ids, num)
        adv, size = group_normalize(returns, segments, num + 1, norm=norm, eps=eps, unbiased=unbiased)
        valid = present & (size > 1)
        if j == 1:
            has_peer = valid.clone()
        if zero_levels == "skip":
            valid &= ~segment_all_equal(returns, segments, num + 1).index_select(0, segments)
        weight = float(j + 1) ** alpha
        numerator += torch.where(valid, adv, 0.0) * weight
        total_weight += valid.to(returns.dtype) * weight
    base_numerator = base_weight = torch.zeros_like(returns)
    if base is not None:
        if base_valid is None:
            raise ValueError("hgpo_advantage: base needs base_valid (where level 0 counts)")
        base_numerator = torch.where(base_valid, base.to(returns.dtype), 0.0)
        base_weight = base_valid.to(returns.dtype)
    denominator = total_weight + base_weight + eps
    return HgpoTerms(advantage=(numerator + base_numerator) / denominator, step_level=numerator / denominator,
                     weight=total_weight / denominator, has_peer=has_peer)


__all__ = ["HgpoTerms", "ZeroLevels", "hgpo_advantage", "history_groups"]
