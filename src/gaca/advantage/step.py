"""Step-level credit (GiGPO): discounted returns compared among steps from the same state."""

from __future__ import annotations

import difflib
from collections.abc import Sequence

import torch

from gaca.advantage.layout import Layout
from gaca.advantage.normalize import Norm, group_normalize
from gaca.advantage.segments import discounted_returns_sorted, pair_ids, segment_count


def discounted_returns(reward: torch.Tensor, layout: Layout, gamma: float) -> torch.Tensor:
    """G_t = Σ_{k≥t} γ^(k−t) r_k within each trajectory, in the batch's own row order.

    Args:
      reward: [N] float step rewards.
      layout: the batch layout (gives the (trajectory, step) order).
      gamma:  discount γ in [0, 1].
    Returns:
      [N] float64.
    """
    sorted_returns = discounted_returns_sorted(reward.index_select(0, layout.order), layout.is_last, gamma)
    return torch.empty_like(sorted_returns).index_copy_(0, layout.order, sorted_returns)


def _similarity_keys(layout: Layout, anchor: torch.Tensor, anchor_text: Sequence[str], threshold: float,
                     conventions: str = "gaca") -> torch.Tensor:
    """Replace each anchor by the anchor of its cluster of near-identical texts in its group.

    Greedy clustering per episode group: a text joins the first cluster whose representative has
    difflib ratio >= threshold, else founds a new one. gaca's conventions visit rows in (trajectory,
    step) order (``layout.order``, a function of the rows' ids, not of their positions), so the
    clusters do not depend on the order the rows come in, and compare with
    ``SequenceMatcher(None, representative, text, autojunk=False)``; verl-agent's visit rows in the
    batch's order and compare with ``SequenceMatcher(None, text, representative)`` and difflib's
    default autojunk (which ignores characters frequent in the representative when it has 200 or
    more). This is O(U²) string comparisons per group (U distinct anchors) and loops in Python;
    exact anchors (``similarity=None``) stay vectorized.
    """
    keys = anchor.clone()
    representative_of: dict[tuple[int, int], int] = {}
    clusters: dict[int, list[tuple[str, int]]] = {}
    group, anchors = layout.group.tolist(), anchor.tolist()
    verl_agent = conventions == "verl-agent"
    order = range(len(anchors)) if verl_agent else layout.order.tolist()
    for row in order:
        g, a = group[row], anchors[row]
        known = representative_of.get((g, a))
        if known is None:
            text = anchor_text[row]
            for rep_text, rep_key in clusters.setdefault(g, []):
                matcher = (difflib.SequenceMatcher(None, text, rep_text) if verl_agent
                           else difflib.SequenceMatcher(None, rep_text, text, autojunk=False))
                if matcher.real_quick_ratio() >= threshold and matcher.ratio() >= threshold:
                    known = rep_key
                    break
            if known is None:
                known = a
                clusters[g].append((text, a))
            representative_of[(g, a)] = known
        keys[row] = known
    return keys


def anchor_keys(
    layout: Layout,
    anchor: torch.Tensor,
    *,
    similarity: float | None = None,
    anchor_text: Sequence[str] | None = None,
    conventions: str = "gaca",
) -> torch.Tensor:
    """The key of each row's anchor state: the anchor itself, or with ``similarity`` in (0, 1) the
    key of its cluster of texts at least that similar (difflib ratio) in its episode group
    (GiGPO's similarity grouping; needs ``anchor_text``; ``conventions`` as in ``_similarity_keys``).

    Returns:
      [N] int64.
    """
    if similarity is None:
        return anchor
    if not 0.0 < similarity < 1.0:
        raise ValueError(f"similarity must be in (0, 1) or None, got {similarity}")
    if anchor_text is None:
        raise ValueError("similarity grouping needs StepBatch.anchor_text (the anchors' texts)")
    return _similarity_keys(layout, anchor, anchor_text, similarity, conventions)


def step_groups(
    layout: Layout,
    anchor: torch.Tensor,
    *,
    similarity: float | None = None,
    anchor_text: Sequence[str] | None = None,
    conventions: str = "gaca",
) -> tuple[torch.Tensor, int]:
    """Dense id of each row's step group S(i): same episode group, same anchor state
    (``anchor_keys``: exact anchors, or similar anchor texts merged).

    Returns:
      ([N] int64 dense step-group ids, number of step groups).
    """
    keys = anchor_keys(layout, anchor, similarity=similarity, anchor_text=anchor_text, conventions=conventions)
    return pair_ids(layout.group, keys)


def step_level_advantage(
    returns: torch.Tensor,
    step_group: torch.Tensor,
    num_step_groups: int,
    *,
    norm: Norm = "mean_std",
    eps: float = 1e-6,
    weight: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """GiGPO step-level advantage: returns normalized within anchor-state groups.

    A^S_i = (G_i − mean_{j∈S(i)} G_j) / (std_{j∈S(i)} G_j + eps); 0 where |S(i)| = 1. With
    ``weight`` w, row j counts w_j times in the mean and std (``group_normalize``).

    Args:
      returns:    [N] float, discounted return G_i from step row i onward.
      step_group: [N] int64, dense id of row i's (episode group, anchor) step group.
      weight:     optional [N] int64 >= 1 row multiplicities; None: 1.
    Returns:
      ([N] A^S in the dtype of ``returns``, [N] bool has_peer: S(i) holds another row, a copy of
      row i not counted).
    Reference: Feng et al. 2025, arXiv:2505.10978 (GiGPO), step relative advantage.
    """
    advantage, size = group_normalize(returns, step_group, num_step_groups, norm=norm, eps=eps, weight=weight)
    if weight is not None:
        size = segment_count(step_group, num_step_groups).index_select(0, step_group)
    return advantage, size > 1


__all__ = ["anchor_keys", "discounted_returns", "step_groups", "step_level_advantage"]
