"""Scoring estimated credit against the Monte-Carlo truth, and the optimal mixture per criticality bin.

``score_settings`` gives, for every estimator setting and every subset of steps, four statistics
(``gaca.lab.stats``) with a bootstrap interval over episode groups (all statistics of one replicate
use the same draw):

    pearson, spearman     correlation of the estimate with the true advantage
    sign                  sign agreement on the steps whose truth is more than 2 SE from 0
    affine_rmse           error left after the best affine rescaling, in return units

The mixture GACA's premise is about is fitted in ``gaca.lab.premise``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from gaca.lab import stats

METRICS = ("pearson", "spearman", "sign", "affine_rmse")
#: Larger is better for every metric but the error.
HIGHER_IS_BETTER = {"pearson": True, "spearman": True, "sign": True, "affine_rmse": False}


@dataclass
class SettingScores:
    """One setting's statistics on one subset of steps."""

    pearson: stats.Estimate
    spearman: stats.Estimate
    sign: stats.Estimate
    affine_rmse: stats.Estimate
    delta_pearson: stats.Estimate | None = None
    """Its Pearson r minus the reference setting's, from the same replicates (paired)."""
    delta_spearman: stats.Estimate | None = None

    def metric(self, name: str) -> stats.Estimate:
        return getattr(self, name)


@dataclass
class SubsetScores:
    """Every setting's statistics on one subset of steps."""

    steps: int
    significant: int
    """Steps whose truth is more than 2 SE from 0 (those the sign agreement is over)."""
    settings: dict[str, SettingScores] = field(default_factory=dict)


def _summary(full: float, replicates: np.ndarray) -> stats.Estimate:
    return stats.estimate(full, replicates)


def score_settings(
    estimates: Mapping[str, np.ndarray],
    truth: np.ndarray,
    truth_se: np.ndarray,
    groups: np.ndarray,
    subsets: Mapping[str, np.ndarray],
    *,
    replicates: int,
    rng: np.random.Generator,
    reference: str | None = None,
    row_weights: np.ndarray | None = None,
) -> dict[str, SubsetScores]:
    """Statistics of each estimate against the truth, per subset, with bootstrap intervals.

    Args:
      estimates: label -> [n] estimated advantage of the scored steps.
      truth, truth_se: [n] Monte-Carlo advantage and its standard error.
      groups: [n] episode-group label of each step (the bootstrap's unit).
      subsets: name -> [n] bool mask of the steps it holds.
      replicates: bootstrap replicates B.
      reference: a label; every setting also gets ``delta_pearson`` and ``delta_spearman``, its
        correlation minus the reference's, with an interval from the same replicates (paired: the
        differences between settings are far more certain than each correlation).
      row_weights: optional [n] weights of the rows (e.g. inverse inclusion probabilities, for
        population-level statistics), multiplied into the bootstrap's weights.
    Returns:
      subset name -> ``SubsetScores``.
    """
    weights = stats.group_bootstrap_weights(groups, replicates, rng)
    base = np.ones(len(truth)) if row_weights is None else np.asarray(row_weights, dtype=np.float64)
    significant = np.abs(truth) > 2 * truth_se
    out: dict[str, SubsetScores] = {}
    for name, mask in subsets.items():
        mask = np.asarray(mask, dtype=bool)
        y, w_full, w_boot = truth[mask], base[mask], weights[:, mask] * base[mask]
        sig = significant[mask]
        subset = SubsetScores(steps=int(mask.sum()), significant=int(sig.sum()))
        replicate_values: dict[tuple[str, str], tuple[float, np.ndarray]] = {}
        for label, estimate in estimates.items():
            x = np.asarray(estimate, dtype=np.float64)[mask]
            row = {}
            for metric, fn in (("pearson", stats.pearson), ("spearman", stats.spearman),
                               ("affine_rmse", stats.affine_rmse)):
                full, boot = fn(x, y, w_full)[0], fn(x, y, w_boot)
                replicate_values[label, metric] = (full, boot)
                row[metric] = _summary(full, boot)
            row["sign"] = _summary(stats.sign_agreement(x[sig], y[sig], w_full[sig])[0],
                                   stats.sign_agreement(x[sig], y[sig], w_boot[:, sig]))
            subset.settings[label] = SettingScores(**row)
        if reference is not None and reference in estimates:
            for label in estimates:
                deltas = {}
                for metric in ("pearson", "spearman"):
                    full, boot = replicate_values[label, metric]
                    ref_full, ref_boot = replicate_values[reference, metric]
                    deltas[f"delta_{metric}"] = _summary(full - ref_full, boot - ref_boot)
                subset.settings[label].delta_pearson = deltas["delta_pearson"]
                subset.settings[label].delta_spearman = deltas["delta_spearman"]
        out[name] = subset
    return out


def per_step_optimal_weight(truth: np.ndarray, episode: np.ndarray, step: np.ndarray, scale: float,
                            *, min_gap: float = 0.1) -> np.ndarray:
    """The weight w_i that makes scale·((1 − w)A^E + w·A^S) hit the truth at step i:
    w_i = (A_i/scale − A^E_i) / (A^S_i − A^E_i); NaN where |A^S − A^E| < ``min_gap`` (no information)."""
    gap = step - episode
    with np.errstate(invalid="ignore", divide="ignore"):
        w = (truth / scale - episode) / gap
    return np.where(np.abs(gap) >= min_gap, w, np.nan)


__all__ = ["HIGHER_IS_BETTER", "METRICS", "SettingScores", "SubsetScores", "per_step_optimal_weight",
           "score_settings"]
