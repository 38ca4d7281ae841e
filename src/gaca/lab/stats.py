"""Accuracy statistics of estimated against true advantages, weighted so that a bootstrap is one call.

Every function takes row weights ``w`` of shape [n] or [B, n] (B bootstrap replicates: the weight of
a row is how often its episode group was drawn) and returns one value per replicate. With all
weights 1 they are the textbook statistics:

    pearson(x, y)        Σ w(x−x̄)(y−ȳ) / √(Σ w(x−x̄)² · Σ w(y−ȳ)²),   means weighted
    spearman(x, y)       pearson of the weighted mid-ranks (ties share their mean rank)
    sign_agreement       Σ w·[sign x = sign y] / Σ w   (rows selected by the caller)
    affine_rmse(x, y)    √(min_{α,β} Σ w(y − α − βx)² / Σ w): the error left after the best affine
                         rescaling of the estimate x, in the units of the truth y

A statistic that is undefined for a replicate (no weight, or a constant side) is NaN.
"""

from __future__ import annotations

import numpy as np


def _as_weights(w: np.ndarray) -> np.ndarray:
    w = np.asarray(w, dtype=np.float64)
    return w[None, :] if w.ndim == 1 else w


def weighted_moments(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, ...]:
    """Weighted covariance terms of x, y [n] under weights w [B, n]: (Σw, cov, var x, var y), each [B]."""
    total = w.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mx = (w * x).sum(axis=1) / total
        my = (w * y).sum(axis=1) / total
    dx, dy = x[None, :] - mx[:, None], y[None, :] - my[:, None]
    return total, (w * dx * dy).sum(axis=1), (w * dx * dx).sum(axis=1), (w * dy * dy).sum(axis=1)


def pearson(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Weighted Pearson correlation. x, y: [n]; w: [n] or [B, n]. Returns [B]."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    _, cov, vx, vy = weighted_moments(x, y, _as_weights(w))
    with np.errstate(invalid="ignore", divide="ignore"):
        r = cov / np.sqrt(vx * vy)
    tiny = 1e-12 * np.maximum(1.0, np.maximum(np.abs(x).max(initial=0), np.abs(y).max(initial=0))) ** 2
    return np.where((vx > tiny) & (vy > tiny), r, np.nan)


def midranks(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Weighted mid-ranks [B, n] of x [n]: a row's rank is the weight of the smaller values plus
    (its value's weight + 1)/2, so tied values share their mean rank (the usual ranks when w = 1)."""
    x = np.asarray(x, np.float64)
    w = _as_weights(w)
    values, inverse = np.unique(x, return_inverse=True)
    replicates, count = w.shape[0], len(values)
    index = (np.arange(replicates)[:, None] * count + inverse[None, :]).ravel()
    per_value = np.bincount(index, weights=np.broadcast_to(w, (replicates, len(x))).ravel(),
                            minlength=replicates * count).reshape(replicates, count)
    below = np.cumsum(per_value, axis=1) - per_value
    return (below + (per_value + 1.0) / 2.0)[:, inverse]


def spearman(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Weighted Spearman correlation (Pearson of weighted mid-ranks). x, y: [n]; w: [n] or [B, n]."""
    w = _as_weights(w)
    rx, ry = midranks(x, w), midranks(y, w)
    total = w.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mx = (w * rx).sum(axis=1) / total
        my = (w * ry).sum(axis=1) / total
        dx, dy = rx - mx[:, None], ry - my[:, None]
        vx, vy = (w * dx * dx).sum(axis=1), (w * dy * dy).sum(axis=1)
        r = (w * dx * dy).sum(axis=1) / np.sqrt(vx * vy)
    return np.where((vx > 1e-12) & (vy > 1e-12), r, np.nan)


def sign_agreement(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Weighted share of rows where sign(x) = sign(y) (an estimate of exactly 0 never agrees with a
    nonzero truth). x, y: [n]; w: [n] or [B, n]. Returns [B]."""
    w = _as_weights(w)
    agree = (np.sign(np.asarray(x, np.float64)) == np.sign(np.asarray(y, np.float64))).astype(np.float64)
    total = w.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, (w * agree).sum(axis=1) / total, np.nan)


def affine_rmse(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """√(weighted mean of the residual of y on α + βx, least squares). x, y: [n]; w: [n] or [B, n]."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    total, cov, vx, vy = weighted_moments(x, y, _as_weights(w))
    with np.errstate(invalid="ignore", divide="ignore"):
        explained = np.where(vx > 0, cov * cov / vx, 0.0)
        return np.sqrt(np.maximum(vy - explained, 0.0) / total)


def group_bootstrap_weights(groups: np.ndarray, replicates: int, rng: np.random.Generator) -> np.ndarray:
    """[B, n] row weights of a bootstrap over groups: each replicate draws as many groups as there
    are, with replacement, and a row weighs how often its group was drawn. groups: [n] int labels."""
    labels, inverse = np.unique(np.asarray(groups), return_inverse=True)
    draws = rng.integers(0, len(labels), size=(replicates, len(labels)))
    index = (np.arange(replicates)[:, None] * len(labels) + draws).ravel()
    counts = np.bincount(index, minlength=replicates * len(labels)).reshape(replicates, len(labels))
    return counts[:, inverse].astype(np.float64)


def interval(values: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    """Percentile interval of bootstrap replicates (NaN replicates ignored; NaN when all are)."""
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return float("nan"), float("nan")
    lo, hi = np.quantile(finite, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def mixture_weight(truth: np.ndarray, episode: np.ndarray, step: np.ndarray, w: np.ndarray) -> np.ndarray:
    """w* = b/(a + b) of the least-squares fit truth ≈ a·episode + b·step (no intercept), per replicate.

    Args:
      truth, episode, step: [n] (A, A^E, A^S of the same rows).
      w: [n] or [B, n] row weights.
    Returns:
      [B]; NaN where the 2x2 normal equations are singular.
    """
    truth, episode, step = (np.asarray(v, np.float64) for v in (truth, episode, step))
    w = _as_weights(w)
    see, sss, ses = (w * episode * episode).sum(1), (w * step * step).sum(1), (w * episode * step).sum(1)
    sey, ssy = (w * episode * truth).sum(1), (w * step * truth).sum(1)
    det = see * sss - ses * ses
    with np.errstate(invalid="ignore", divide="ignore"):
        a = (sey * sss - ssy * ses) / det
        b = (ssy * see - sey * ses) / det
        out = b / (a + b)
    scale = np.maximum(see * sss, 1e-300)
    return np.where(np.abs(det) > 1e-10 * scale, out, np.nan)


__all__ = ["affine_rmse", "group_bootstrap_weights", "interval", "midranks", "mixture_weight", "pearson",
           "sign_agreement", "spearman", "weighted_moments"]
