"""Scoring estimated credit against the Monte-Carlo truth, and the optimal mixture per criticality bin.

``score_settings`` gives, for every estimator setting and every subset of steps, four statistics
(``gaca.lab.stats``) with a bootstrap interval over episode groups (all statistics of one replicate
use the same draw):

    pearson, spearman     correlation of the estimate with the true advantage
    sign                  sign agreement on the steps whose truth is more than 2 SE from 0
    affine_rmse           error left after the best affine rescaling, in return units

``optimal_mixture`` regresses the truth on the two signals GACA mixes, A ≈ a·A^E + b·A^S, per
criticality quintile over steps with a step-level peer, and reports w* = b/(a + b).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from gaca.lab import stats

METRICS = ("pearson", "spearman", "sign", "affine_rmse")
#: Larger is better for every metric but the error.
HIGHER_IS_BETTER = {"pearson": True, "spearman": True, "sign": True, "affine_rmse": False}


def _summary(full: float, replicates: np.ndarray) -> dict[str, float]:
    lo, hi = stats.interval(replicates)
    return {"value": float(full), "lo": lo, "hi": hi}


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
) -> dict[str, dict[str, dict[str, dict[str, float]]]]:
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
    Returns:
      result[subset][label][metric] = {"value", "lo", "hi"} (95% percentile interval), and
      result[subset]["_steps"] = {"value": number of steps, ...}.
    """
    weights = stats.group_bootstrap_weights(groups, replicates, rng)
    significant = np.abs(truth) > 2 * truth_se
    out: dict[str, dict[str, dict[str, dict[str, float]]]] = {}
    for name, mask in subsets.items():
        mask = np.asarray(mask, dtype=bool)
        y, w_full, w_boot = truth[mask], np.ones(int(mask.sum())), weights[:, mask]
        sig = significant[mask]
        per_label: dict[str, dict[str, dict[str, float]]] = {
            "_steps": {"count": {"value": float(mask.sum()), "lo": float("nan"), "hi": float("nan")},
                       "significant": {"value": float(sig.sum()), "lo": float("nan"), "hi": float("nan")}}}
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
            per_label[label] = row
        if reference is not None and reference in estimates:
            for label in estimates:
                for metric in ("pearson", "spearman"):
                    full, boot = replicate_values[label, metric]
                    ref_full, ref_boot = replicate_values[reference, metric]
                    per_label[label][f"delta_{metric}"] = _summary(full - ref_full, boot - ref_boot)
        out[name] = per_label
    return out


def optimal_mixture(
    truth: np.ndarray,
    episode: np.ndarray,
    step: np.ndarray,
    criticality: np.ndarray,
    has_peer: np.ndarray,
    groups: np.ndarray,
    *,
    bins: int = 5,
    replicates: int,
    rng: np.random.Generator,
) -> list[dict[str, float]]:
    """w* per criticality quantile bin over the steps with a step-level peer.

    Args:
      truth: [n] true advantage; episode, step: [n] A^E and A^S; criticality: [n] c; has_peer: [n] bool.
      groups: [n] episode-group labels (bootstrap unit).
    Returns:
      One dict per bin: its mean criticality, step count, w* with a bootstrap interval.
    """
    from gaca.lab.select import quantile_bins

    peer = np.asarray(has_peer, dtype=bool)
    idx = np.flatnonzero(peer)
    out = []
    if idx.size == 0:
        return out
    bin_of = quantile_bins(np.asarray(criticality)[idx], bins)
    weights = stats.group_bootstrap_weights(np.asarray(groups)[idx], replicates, rng)
    for b in range(bins):
        rows = idx[bin_of == b]
        sel = bin_of == b
        if rows.size < 3:
            continue
        full = stats.mixture_weight(truth[rows], episode[rows], step[rows], np.ones(rows.size))[0]
        boot = stats.mixture_weight(truth[rows], episode[rows], step[rows], weights[:, sel])
        out.append({"bin": b, "criticality_mean": float(np.mean(criticality[rows])), "steps": int(rows.size),
                    **{f"w_star_{k}": v for k, v in _summary(full, boot).items()}})
    return out


def per_step_optimal_weight(truth: np.ndarray, episode: np.ndarray, step: np.ndarray, scale: float,
                            *, min_gap: float = 0.1) -> np.ndarray:
    """The weight w_i that makes scale·((1 − w)A^E + w·A^S) hit the truth at step i:
    w_i = (A_i/scale − A^E_i) / (A^S_i − A^E_i); NaN where |A^S − A^E| < ``min_gap`` (no information)."""
    gap = step - episode
    with np.errstate(invalid="ignore", divide="ignore"):
        w = (truth / scale - episode) / gap
    return np.where(np.abs(gap) >= min_gap, w, np.nan)


__all__ = ["HIGHER_IS_BETTER", "METRICS", "optimal_mixture", "per_step_optimal_weight", "score_settings"]
