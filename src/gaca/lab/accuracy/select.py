"""Which recorded steps get a Monte-Carlo truth: a sample stratified over position and criticality.

Continuations cost far more than rows, so only a budget of steps is estimated. A uniform sample
would be mostly early steps of failing episodes; stratifying gives every (position, criticality)
cell the same share: position is the step's third of its trajectory (early, middle, late) and
criticality its quintile over all rows of the batch. A cell with fewer rows than its share gives
the rest to the others. When the batch has no more rows than the budget, every row is taken.
"""

from __future__ import annotations

import numpy as np

from gaca.lab.stats import quantile_bins

POSITIONS = ("early", "middle", "late")


def position_bins(step: np.ndarray, length: np.ndarray) -> np.ndarray:
    """[N] int in {0, 1, 2}: the third of its trajectory a step lies in (floor(3t / T))."""
    step, length = np.asarray(step), np.asarray(length)
    return np.minimum(2, (3 * step) // np.maximum(length, 1))


def stratified_sample(cells: np.ndarray, budget: int, rng: np.random.Generator) -> np.ndarray:
    """Row indices: up to ``budget`` rows, as evenly over the cell labels ``cells`` [N] as they allow
    (sorted). Every row when N <= budget."""
    cells = np.asarray(cells)
    if len(cells) <= budget:
        return np.arange(len(cells))
    members = {c: rng.permutation(np.flatnonzero(cells == c)) for c in np.unique(cells)}
    taken = dict.fromkeys(members, 0)
    left = budget
    while left > 0:
        open_cells = [c for c in members if taken[c] < len(members[c])]
        share = max(1, left // len(open_cells))
        for c in open_cells:
            extra = min(share, len(members[c]) - taken[c], left)
            taken[c] += extra
            left -= extra
            if left == 0:
                break
    return np.sort(np.concatenate([members[c][: taken[c]] for c in members]))


__all__ = ["POSITIONS", "position_bins", "quantile_bins", "stratified_sample"]
