"""The lab's statistics: accuracy of estimated against true advantages, and paired comparisons over seeds.

Accuracy (one value per bootstrap replicate). Every function takes row weights ``w`` of shape [n] or
[B, n] (B bootstrap replicates: the weight of a row is how often its episode group was drawn, times
its population weight where the sample is stratified) and returns one value per replicate. With all
weights 1 they are the textbook statistics:

    pearson(x, y)        Σ w(x−x̄)(y−ȳ) / √(Σ w(x−x̄)² · Σ w(y−ȳ)²),   means weighted
    spearman(x, y)       pearson of the weighted mid-ranks (ties share their mean rank)
    sign_agreement       Σ w·[sign x = sign y] / Σ w   (rows selected by the caller)
    affine_rmse(x, y)    √(min_{α,β} Σ w(y − α − βx)² / Σ w): the error left after the best affine
                         rescaling of the estimate x, in the units of the truth y

A statistic that is undefined for a replicate (no weight, or a constant side) is NaN. Beside them:
the Monte-Carlo standard error of the truth with a Jeffreys floor (``monte_carlo_se``), the noise
ceiling it implies (``noise_ceiling``), inverse-inclusion-probability weights of a stratified sample
(``inclusion_weights``) and correlations with a group-bootstrap interval (``bootstrap_correlations``).

Comparison over seeds. d_s = endpoint(treatment, seed s) − endpoint(control, seed s), one value per
paired seed, [S]: ``paired_t``, ``sign_test``, ``sign_flip_test``, ``tost``, the power of the paired t
test (``paired_t_power``, ``minimum_detectable_difference``), Holm's adjustment across a family of
contrasts (``holm``), and the crossed seed × game bootstrap of a [S, G] matrix (``crossed_bootstrap``).
Distributions come from ``scipy.stats``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from scipy import optimize
from scipy import stats as distributions

Alternative = Literal["greater", "less", "two-sided"]
"""The alternative hypothesis about the mean paired difference: > 0, < 0, or ≠ 0."""
OneSided = Literal["greater", "less"]
Sides = Literal["one-sided", "two-sided"]


def _as_weights(w: np.ndarray) -> np.ndarray:
    w = np.asarray(w, dtype=np.float64)
    return w[None, :] if w.ndim == 1 else w


def quantile_bins(values: np.ndarray, bins: int = 5) -> np.ndarray:
    """[N] int in [0, bins): the quantile bin of each value over all values (ties broken by position,
    so equal values may straddle a bin edge and every bin gets its share)."""
    values = np.asarray(values, dtype=np.float64)
    order = np.argsort(values, kind="stable")
    out = np.empty(len(values), dtype=np.int64)
    out[order] = (np.arange(len(values)) * bins) // max(1, len(values))
    return out


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


def mixture_coefficients(truth: np.ndarray, episode: np.ndarray, step: np.ndarray,
                         w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(a, b) of the weighted least-squares fit truth ≈ a·episode + b·step (no intercept), per replicate.

    Normal equations: [[Σw e², Σw e s], [Σw e s, Σw s²]]·(a, b) = (Σw e y, Σw s y).

    Args:
      truth, episode, step: [n] (A, A^E, A^S of the same rows).
      w: [n] or [B, n] row weights.
    Returns:
      a, b: [B] each; NaN where the normal equations are singular (|det| ≤ 1e-10·Σw e²·Σw s²: a
      collinear or empty side).
    """
    truth, episode, step = (np.asarray(v, np.float64) for v in (truth, episode, step))
    w = _as_weights(w)
    see, sss, ses = (w * episode * episode).sum(1), (w * step * step).sum(1), (w * episode * step).sum(1)
    sey, ssy = (w * episode * truth).sum(1), (w * step * truth).sum(1)
    det = see * sss - ses * ses
    with np.errstate(invalid="ignore", divide="ignore"):
        a = (sey * sss - ssy * ses) / det
        b = (ssy * see - sey * ses) / det
    ok = np.abs(det) > 1e-10 * np.maximum(see * sss, 1e-300)
    return np.where(ok, a, np.nan), np.where(ok, b, np.nan)


def mixture_weight(truth: np.ndarray, episode: np.ndarray, step: np.ndarray, w: np.ndarray) -> np.ndarray:
    """w* = b/(a + b) of the least-squares fit truth ≈ a·episode + b·step (no intercept), per replicate.

    Args:
      truth, episode, step: [n] (A, A^E, A^S of the same rows).
      w: [n] or [B, n] row weights.
    Returns:
      [B]; NaN where the 2x2 normal equations are singular (``mixture_coefficients``).
    """
    a, b = mixture_coefficients(truth, episode, step, w)
    with np.errstate(invalid="ignore", divide="ignore"):
        return b / (a + b)


@dataclass(frozen=True)
class Estimate:
    """A full-sample value with a percentile bootstrap interval."""

    value: float
    lo: float
    hi: float


def estimate(full: float, replicates: np.ndarray, level: float = 0.95) -> Estimate:
    """``Estimate`` of ``full`` with the ``level`` percentile interval of ``replicates`` [B] (``interval``)."""
    return Estimate(float(full), *interval(np.asarray(replicates, np.float64), level))


def ratio_identified(denominator: float, replicates: np.ndarray, level: float = 0.95) -> tuple[bool, float]:
    """Whether a ratio N/D has a bounded bootstrap interval: D's replicates keep D's sign.

    A replicate is unstable when D* is NaN, 0, or of the sign opposite to the full-sample D. The ratio
    is identified when the unstable share is at most (1 − level)/2: then D's percentile interval
    excludes 0. Otherwise D* crosses 0 and N/D* runs to ±∞ inside the percentile range, the bootstrap
    form of Fieller's condition (a ratio's confidence set is a bounded interval only where its
    denominator differs significantly from 0; Fieller 1954, J. R. Stat. Soc. B 16:175).

    Args:
      denominator: full-sample D.
      replicates: [B] D of each bootstrap replicate.
    Returns:
      (identified, unstable share); (False, 1.0) where D is NaN or 0, or there is no replicate.
    """
    replicates = np.asarray(replicates, np.float64)
    if not np.isfinite(denominator) or denominator == 0 or replicates.size == 0:
        return False, 1.0
    with np.errstate(invalid="ignore"):
        unstable = float(np.mean(~(np.sign(replicates) == np.sign(denominator))))
    return unstable <= (1 - level) / 2 + 1e-12, unstable


# ---- the Monte-Carlo truth: its standard error, the noise ceiling, population weights ----


def jeffreys_floor(successes: np.ndarray, draws: np.ndarray | int, upper: np.ndarray | float = 1.0) -> np.ndarray:
    """R·√(p̂(1 − p̂)/M) with p̂ = (k + ½)/(M + 1), the Jeffreys posterior mean of a success rate.

    The standard error a sample of M Bernoulli(p) draws scaled to {0, R} has at p = p̂. Where all M
    draws agree (k = 0 or k = M) the sample sd is 0, but the rate is not known exactly: p̂ is
    1/(2(M + 1)) away from the observed 0 or 1. Source: the Jeffreys prior Beta(½, ½), whose posterior
    after k of M is Beta(k + ½, M − k + ½) with mean (k + ½)/(M + 1) (Brown, Cai & DasGupta 2001,
    Statistical Science 16:101, the Jeffreys interval).

    Args:
      successes: [K] k in [0, M]; draws: [K] or scalar M; upper: [K] or scalar R.
    Returns:
      [K]; NaN where M < 2.
    """
    k, m = np.broadcast_arrays(np.asarray(successes, np.float64), np.asarray(draws, np.float64))
    with np.errstate(invalid="ignore", divide="ignore"):
        p = (k + 0.5) / (m + 1.0)
        se = upper * np.sqrt(p * (1.0 - p) / m)
    return np.where(m >= 2, se, np.nan)


def monte_carlo_se(returns: np.ndarray, *, upper: float = 1.0) -> np.ndarray:
    """Standard error of the mean of M Monte-Carlo returns bounded in [0, R], per step.

    SE = sd/√M with the sample sd (ddof = 1) where the M returns differ. Where all M agree at the
    value v, the Jeffreys floor of an outcome never seen in M draws,
        SE = max(v, R − v)·√(p̂(1 − p̂)/M),   p̂ = ½/(M + 1)   (k = 0; k = M gives the same p̂(1 − p̂)):
    for success returns (v = 0 or v = R) this is ``jeffreys_floor(k, M, R)`` with k = 0 or M
    successes. For a constant discounted return v ∈ (0, R) it is our reconstruction: v is one outcome
    of a two-point variable whose unseen other outcome is the farther bound of [0, R].

    Args:
      returns: [..., M] float in [0, R] (K steps × M continuations is [K, M]).
      upper: R, the largest possible return.
    Returns:
      [...]; NaN where M < 2.
    Raises:
      ValueError: a return outside [0, R] or not finite (the first bad index is named).
    """
    r = np.asarray(returns, np.float64)
    bad = ~(np.isfinite(r) & (r >= 0) & (r <= upper))
    if bad.any():
        index = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ValueError(f"returns must lie in [0, {upper}]: returns{list(index)} = {r[index]}")
    m = r.shape[-1]
    if m < 2:
        return np.full(r.shape[:-1], np.nan)
    sample = r.std(axis=-1, ddof=1) / math.sqrt(m)
    value = r[..., 0]
    floor = jeffreys_floor(np.zeros_like(value), m, np.maximum(value, upper - value))
    return np.where(np.ptp(r, axis=-1) == 0, floor, sample)


def monte_carlo_se_from_counts(successes: np.ndarray, draws: np.ndarray | int, *,
                               upper: float = 1.0) -> np.ndarray:
    """``monte_carlo_se`` of M returns in {0, R} given by their success count k, per step.

    SE = R·√(k(M − k)/(M(M − 1)))/√M (the sample sd of k values R and M − k values 0, ddof = 1, over
    √M) where 0 < k < M, and ``jeffreys_floor(k, M, R)`` where k = 0 or k = M.

    Args:
      successes: [K] int k in [0, M]; draws: [K] or scalar M.
    Returns:
      [K]; NaN where M < 2.
    Raises:
      ValueError: k outside [0, M].
    """
    k, m = np.broadcast_arrays(np.asarray(successes, np.float64), np.asarray(draws, np.float64))
    if np.any((k < 0) | (k > m)):
        first = int(np.flatnonzero((k < 0) | (k > m))[0])
        raise ValueError(f"successes must lie in [0, draws]: successes[{first}] = {k[first]}, draws {m[first]}")
    with np.errstate(invalid="ignore", divide="ignore"):
        sample = upper * np.sqrt(k * (m - k) / (m * (m - 1))) / np.sqrt(m)
    se = np.where((k == 0) | (k == m), jeffreys_floor(k, m, upper), sample)
    return np.where(m >= 2, se, np.nan)


def noise_ceiling(truth: np.ndarray, se: np.ndarray) -> float:
    """The correlation a perfect estimate could reach against this noisy truth: √(1 − mean SE² / var).

    The truth is t = A + e with Monte-Carlo error e of variance SE² per step, so for any estimate x,
    corr(x, t) ≤ corr(A, t) = √(var A / var t) = √(1 − mean(SE²)/var(t)) (Spearman's correction for
    attenuation, 1904, Am. J. Psychol. 15:72, with reliability 1 − error variance / observed
    variance). var(t) is the sample variance (ddof = 1); the ceiling is 0 where the noise exceeds it.

    Args:
      truth, se: [n] Monte-Carlo advantage and its standard error.
    Returns:
      float; NaN where n < 2 or var(t) = 0.
    """
    truth, se = np.asarray(truth, np.float64), np.asarray(se, np.float64)
    if truth.size < 2:
        return math.nan
    var = float(np.var(truth, ddof=1))
    return float(math.sqrt(max(0.0, 1.0 - float(np.mean(se**2)) / var))) if var > 0 else math.nan


def inclusion_weights(sample_cells: np.ndarray, population_cells: np.ndarray) -> np.ndarray:
    """Inverse-inclusion-probability row weights of a stratified sample: w_i = N_h / n_h.

    Row i of the sample lies in cell h; N_h rows of the population and n_h rows of the sample are in
    h, so each sampled row stands for N_h/n_h population rows and Σ_i w_i = N (Horvitz & Thompson
    1952, JASA 47:663; Lohr, Sampling: Design and Analysis, ch. 3). Multiply them into the bootstrap
    weights (``group_bootstrap_weights(...) * w``) to get population-weighted statistics.

    Args:
      sample_cells: [n] cell labels of the sampled rows.
      population_cells: [N] cell labels of every row the sample was drawn from.
    Returns:
      [n] float.
    Raises:
      ValueError: a sampled cell holds more rows than the population has in it (a sample is a subset).
    """
    sample_cells, population_cells = np.asarray(sample_cells), np.asarray(population_cells)
    labels, inverse, n_h = np.unique(sample_cells, return_inverse=True, return_counts=True)
    big_n = np.array([np.count_nonzero(population_cells == h) for h in labels])
    if np.any(big_n < n_h):
        h = labels[int(np.flatnonzero(big_n < n_h)[0])]
        raise ValueError(f"sample cell {h.item()!r} has more rows than the population holds in it")
    return (big_n / n_h)[inverse].astype(np.float64)


@dataclass(frozen=True)
class Correlations:
    """Pearson and Spearman correlation of an estimate with the truth, each with a bootstrap interval."""

    pearson: Estimate
    spearman: Estimate


def bootstrap_correlations(x: np.ndarray, y: np.ndarray, groups: np.ndarray, *, replicates: int,
                           rng: np.random.Generator, row_weights: np.ndarray | None = None,
                           level: float = 0.95) -> Correlations:
    """Weighted Pearson and Spearman of an estimate x with the truth y, with group-bootstrap intervals.

    Replicate b weighs row i by c_b(g_i)·w_i: how often its group was drawn (``group_bootstrap_weights``)
    times its row weight (1, or ``inclusion_weights`` for the population-weighted view of a stratified
    sample). The full-sample value uses w alone.

    Args:
      x, y: [n]; groups: [n] bootstrap-unit labels; row_weights: [n] or None (all 1).
    """
    w = np.ones(len(y)) if row_weights is None else np.asarray(row_weights, np.float64)
    boot = group_bootstrap_weights(groups, replicates, rng) * w[None, :]
    return Correlations(*(estimate(fn(x, y, w)[0], fn(x, y, boot), level)
                          for fn in (pearson, spearman)))


# ---- comparisons over paired seeds ----


def _differences(d: np.ndarray) -> np.ndarray:
    d = np.asarray(d, np.float64)
    if d.ndim != 1:
        raise ValueError(f"d must be one paired difference per seed, shape [S]; got shape {d.shape}")
    if not np.all(np.isfinite(d)):
        raise ValueError(f"d must be finite: d[{int(np.flatnonzero(~np.isfinite(d))[0])}] is not")
    return d


def _spread(d: np.ndarray) -> tuple[float, float]:
    """(sd, se) of d with ddof = 1; NaN where n < 2 or the sd is 0 (at rounding level)."""
    if d.size < 2:
        return math.nan, math.nan
    sd = float(d.std(ddof=1))
    if sd <= 1e-12 * float(np.abs(d).max()):
        return 0.0, math.nan
    return sd, sd / math.sqrt(d.size)


@dataclass(frozen=True)
class PairedT:
    """Paired t test over seeds (Student 1908; e.g. Rice, Mathematical Statistics, §11.3)."""

    n: int
    mean: float
    sd: float
    """Sample sd of d (ddof = 1)."""
    se: float
    """sd/√n."""
    t: float
    df: int
    alternative: OneSided
    p: float
    """One-sided p in the declared direction: P(T ≥ t) for "greater", P(T ≤ t) for "less"."""
    p_two_sided: float
    level: float
    lo: float
    """The two-sided (1 − α) interval of the mean: mean ∓ t_{1−α/2, n−1}·se."""
    hi: float


def paired_t(d: np.ndarray, *, alternative: OneSided = "greater", alpha: float = 0.05) -> PairedT:
    """Paired t test of mean d = 0 over seeds: t = d̄/(s/√n), T ~ t_{n−1} under the null.

    Args:
      d: [S] paired differences, one per seed.
      alternative: the declared direction of the one-sided p.
      alpha: the interval is at level 1 − α.
    Returns:
      ``PairedT``; t, p and the interval are NaN where n < 2 or the sd is 0 (sd = 0, se NaN): a t
      test needs an estimate of the spread (the exact tests below still apply).
    """
    d = _differences(d)
    n = d.size
    mean = float(d.mean()) if n else math.nan
    sd, se = _spread(d)
    t, df = mean / se, max(n - 1, 0)
    p_greater, p_less = distributions.t.sf(t, df), distributions.t.cdf(t, df)
    q = distributions.t.ppf(1 - alpha / 2, df) if n >= 2 else math.nan
    return PairedT(n=n, mean=mean, sd=sd, se=se, t=float(t), df=df, alternative=alternative,
                   p=float(p_greater if alternative == "greater" else p_less),
                   p_two_sided=float(2 * distributions.t.sf(abs(t), df)), level=1 - alpha,
                   lo=float(mean - q * se), hi=float(mean + q * se))


@dataclass(frozen=True)
class SignTest:
    """Exact sign test of a zero median difference (Conover, Practical Nonparametric Statistics, §3.4)."""

    n: int
    """Nonzero differences, the binomial's trials."""
    ties: int
    """Differences of exactly 0, dropped."""
    positive: int
    alternative: Alternative
    p: float


def sign_test(d: np.ndarray, *, alternative: Alternative = "greater") -> SignTest:
    """Exact sign test: under the null the number of positive differences K ~ Binomial(n, ½).

    p = P(K ≥ k) ("greater"), P(K ≤ k) ("less"), or scipy's two-sided binomial p (the probability of
    outcomes no more likely than k; for p = ½ it is min(1, 2·min of the one-sided)). Zeros are
    dropped and counted in ``ties``.

    Args:
      d: [S] paired differences.
    Returns:
      ``SignTest``; p is NaN where no difference is nonzero.
    """
    d = _differences(d)
    ties, positive = int(np.count_nonzero(d == 0)), int(np.count_nonzero(d > 0))
    n = d.size - ties
    p = distributions.binomtest(positive, n, 0.5, alternative=alternative).pvalue if n else math.nan
    return SignTest(n=n, ties=ties, positive=positive, alternative=alternative, p=float(p))


@dataclass(frozen=True)
class SignFlipTest:
    """Permutation test of a zero mean by flipping the signs of the paired differences."""

    n: int
    mean: float
    alternative: Alternative
    p: float
    exact: bool
    """All 2^n sign vectors were enumerated; else ``resamples`` random ones."""
    resamples: int


def _all_flip_sums(values: np.ndarray) -> np.ndarray:
    """[2^k] Σ_i s_i v_i over every sign vector s ∈ {±1}^k (bit i of the index is s_i = −1)."""
    bits = (np.arange(2 ** values.size)[:, None] >> np.arange(values.size)[None, :]) & 1
    return (1 - 2 * bits) @ values


def _exact_flip_counts(d: np.ndarray, observed: float, tol: float) -> tuple[int, int]:
    """(#{s: Σ s_i d_i ≥ observed − tol}, #{s: Σ s_i d_i ≤ observed + tol}) over all 2^n s.

    Meet in the middle: the 2^n sums are a + b over the 2^⌊n/2⌋ sums a of the first half and the
    sorted 2^⌈n/2⌉ sums b of the second; each a counts its b by binary search.
    """
    half = d.size // 2
    first, second = _all_flip_sums(d[:half]), np.sort(_all_flip_sums(d[half:]))
    above = second.size - np.searchsorted(second, observed - tol - first, side="left")
    below = np.searchsorted(second, observed + tol - first, side="right")
    return int(above.sum()), int(below.sum())


def _random_flip_counts(d: np.ndarray, observed: float, tol: float, resamples: int,
                        rng: np.random.Generator, chunk: int = 65536) -> tuple[int, int]:
    above = below = 0
    for start in range(0, resamples, chunk):
        signs = 1.0 - 2.0 * rng.integers(0, 2, size=(min(chunk, resamples - start), d.size))
        sums = signs @ d
        above += int(np.count_nonzero(sums >= observed - tol))
        below += int(np.count_nonzero(sums <= observed + tol))
    return above, below


def sign_flip_test(d: np.ndarray, *, alternative: Alternative = "greater", exact_max: int = 20,
                   resamples: int = 100_000, rng: np.random.Generator | None = None) -> SignFlipTest:
    """Sign-flip permutation test of mean d = 0 (the paired-sample permutation test).

    Under the null each d_s is symmetric about 0, so the statistic T = Σ_s d_s (the mean times n) is
    as likely as T* = Σ_s ε_s d_s for any signs ε ∈ {±1}^n (Fisher 1935, The Design of Experiments,
    §21; Good, Permutation Tests, ch. 3). With n ≤ ``exact_max`` all 2^n sign vectors are enumerated:
    p = #{T* ≥ T}/2^n ("greater"), #{T* ≤ T}/2^n ("less"); beyond, ``resamples`` random sign
    vectors from ``rng`` give p = (1 + #{T* ≥ T})/(1 + resamples) (Phipson & Smyth 2010, Stat. Appl.
    Genet. Mol. Biol. 9:39). Two-sided: min(1, 2·min(p_greater, p_less)), as scipy's
    ``permutation_test``. Ties T* = T count toward the p (tolerance 1e-10·Σ|d| for rounding).

    Args:
      d: [S] paired differences.
      rng: required when n > exact_max.
    Returns:
      ``SignFlipTest``; p is NaN where n = 0.
    """
    d = _differences(d)
    n, observed = d.size, float(d.sum())
    if n == 0:
        return SignFlipTest(n=0, mean=math.nan, alternative=alternative, p=math.nan, exact=True, resamples=0)
    tol = 1e-10 * float(np.abs(d).sum())
    exact = n <= exact_max
    if exact:
        (above, below), total, extra = _exact_flip_counts(d, observed, tol), 2**n, 0
    else:
        if rng is None:
            raise ValueError(f"sign_flip_test needs an rng beyond exact_max = {exact_max} seeds (n = {n})")
        (above, below), total, extra = _random_flip_counts(d, observed, tol, resamples, rng), resamples, 1
    p_greater, p_less = (above + extra) / (total + extra), (below + extra) / (total + extra)
    p = {"greater": p_greater, "less": p_less, "two-sided": min(1.0, 2 * min(p_greater, p_less))}[alternative]
    return SignFlipTest(n=n, mean=observed / n, alternative=alternative, p=float(p), exact=exact, resamples=total)


def holm(p: np.ndarray) -> np.ndarray:
    """Holm's step-down adjusted p-values of a family of m hypotheses (Holm 1979, Scand. J. Stat. 6:65).

    With p_(1) ≤ … ≤ p_(m) sorted, p̃_(i) = max_{j ≤ i} min(1, (m − j + 1)·p_(j)); rejecting where
    p̃ ≤ α is Holm's procedure at family-wise error α. Returned in the input order, monotone in p,
    capped at 1. A NaN p (an undefined contrast) still counts in m, so the family stays the declared
    one; it sorts last, is never rejected, and its adjusted p is NaN.

    Args:
      p: [m] p-values.
    Returns:
      [m] adjusted p-values.
    """
    p = np.asarray(p, np.float64)
    m = p.size
    filled = np.where(np.isnan(p), 1.0, p)
    order = np.argsort(filled, kind="stable")
    stepped = np.minimum(1.0, (m - np.arange(m)) * filled[order])
    out = np.empty(m)
    out[order] = np.maximum.accumulate(stepped)
    return np.where(np.isnan(p), np.nan, out)


@dataclass(frozen=True)
class Tost:
    """Two one-sided t tests of equivalence within ±margin (Schuirmann 1987, J. Pharmacokinet. Biopharm. 15:657)."""

    n: int
    mean: float
    se: float
    df: int
    margin: float
    alpha: float
    t_lower: float
    """(d̄ + δ)/se, testing H0: μ ≤ −δ against μ > −δ."""
    p_lower: float
    t_upper: float
    """(d̄ − δ)/se, testing H0: μ ≥ +δ against μ < +δ."""
    p_upper: float
    p: float
    """max(p_lower, p_upper), the TOST p."""
    equivalent: bool
    """p < α: equivalently, the (1 − 2α) interval lies inside (−δ, +δ)."""
    lo: float
    """The (1 − 2α) interval of the mean: d̄ ∓ t_{1−α, n−1}·se."""
    hi: float


def tost(d: np.ndarray, margin: float, *, alpha: float = 0.05) -> Tost:
    """Equivalence test of the mean paired difference at ±``margin`` (δ > 0).

    p_lower = P(T ≥ (d̄ + δ)/se), p_upper = P(T ≤ (d̄ − δ)/se), T ~ t_{n−1}; equivalent at α where
    max(p_lower, p_upper) < α.

    Args:
      d: [S] paired differences; margin: δ in the units of d.
    Returns:
      ``Tost``; t, p and the interval NaN (not equivalent) where n < 2 or the sd is 0.
    """
    if not margin > 0:
        raise ValueError(f"margin must be > 0, got {margin}")
    d = _differences(d)
    n = d.size
    mean = float(d.mean()) if n else math.nan
    _, se = _spread(d)
    df = max(n - 1, 0)
    t_lower, t_upper = (mean + margin) / se, (mean - margin) / se
    p_lower, p_upper = float(distributions.t.sf(t_lower, df)), float(distributions.t.cdf(t_upper, df))
    p = max(p_lower, p_upper) if math.isfinite(se) else math.nan
    q = distributions.t.ppf(1 - alpha, df) if n >= 2 else math.nan
    return Tost(n=n, mean=mean, se=se, df=df, margin=margin, alpha=alpha, t_lower=float(t_lower),
                p_lower=p_lower, t_upper=float(t_upper), p_upper=p_upper, p=p, equivalent=bool(p < alpha),
                lo=float(mean - q * se), hi=float(mean + q * se))


def paired_t_power(difference: float, n: int, sd: float, *, alpha: float = 0.05,
                   sides: Sides = "one-sided") -> float:
    """Power of the paired t test at a true mean difference δ, from the noncentral t distribution.

    With df = n − 1 and noncentrality λ = δ√n/σ, the statistic follows t'_{df}(λ). One-sided (the
    alternative δ > 0): power = P(t' > t_{1−α, df}); two-sided: P(t' > t_{1−α/2, df}) +
    P(t' < −t_{1−α/2, df}) (Cohen 1988, Statistical Power Analysis for the Behavioral Sciences,
    ch. 2; Julious 2004, Stat. Med. 23:1921). A one-sided test of "less" has the power at −δ.

    Args:
      difference: δ; n: seeds; sd: σ of the paired differences.
    Returns:
      float; NaN where n < 2 or σ ≤ 0.
    """
    if n < 2 or not sd > 0:
        return math.nan
    df, nc = n - 1, difference * math.sqrt(n) / sd
    if sides == "one-sided":
        return float(distributions.nct.sf(distributions.t.ppf(1 - alpha, df), df, nc))
    q = distributions.t.ppf(1 - alpha / 2, df)
    return float(distributions.nct.sf(q, df, nc) + distributions.nct.cdf(-q, df, nc))


@dataclass(frozen=True)
class DetectableDifference:
    """The smallest true mean difference the paired t test detects with the given power."""

    n: int
    sd: float
    alpha: float
    power: float
    sides: Sides
    difference: float
    """From the noncentral t: ``paired_t_power(difference, ...) = power``."""
    normal: float
    """The normal approximation (z_{1−α(/2)} + z_{power})·σ/√n, smaller at small n."""


def minimum_detectable_difference(n: int, sd: float, *, alpha: float = 0.05, power: float = 0.8,
                                  sides: Sides = "one-sided") -> DetectableDifference:
    """Minimum detectable difference δ of the paired t test: the root in δ ≥ 0 of
    ``paired_t_power(δ, n, sd, alpha, sides) = power`` (Brent's method on the noncentrality).

    Args:
      n: seeds; sd: σ of the paired differences; power: the target, in (α, 1).
    Returns:
      ``DetectableDifference``; NaN differences where n < 2 or σ ≤ 0.
    """
    if not alpha < power < 1:
        raise ValueError(f"power must lie in (alpha, 1) = ({alpha}, 1), got {power}")
    z = distributions.norm.ppf(1 - (alpha if sides == "one-sided" else alpha / 2)) + distributions.norm.ppf(power)
    if n < 2 or not sd > 0:
        return DetectableDifference(n, sd, alpha, power, sides, math.nan, math.nan)
    unit = sd / math.sqrt(n)

    def gap(nc: float) -> float:
        return paired_t_power(nc * unit, n, sd, alpha=alpha, sides=sides) - power

    upper = z + 1.0
    while gap(upper) < 0:
        upper *= 2
    nc = optimize.brentq(gap, 0.0, upper, xtol=1e-12)
    return DetectableDifference(n, sd, alpha, power, sides, float(nc * unit), float(z * unit))


@dataclass(frozen=True)
class CrossedBootstrap:
    """Percentile interval of a mean paired difference over seeds × shared games."""

    mean: float
    lo: float
    hi: float
    level: float
    seeds: int
    games: int
    replicates: np.ndarray = field(repr=False, compare=False)
    """[B] the statistic of each replicate."""


def crossed_bootstrap(d: np.ndarray, *, replicates: int, rng: np.random.Generator,
                      level: float = 0.95) -> CrossedBootstrap:
    """Crossed (pigeonhole) bootstrap of the mean of d [S, G] when every seed plays the same G games.

    Replicate b draws S seeds s*_1..s*_S and G games g*_1..g*_G with replacement, independently
    (seeds first, then games, from ``rng``); the game draw is shared by all seeds because the games
    are. Its statistic is the mean of the S·G drawn cells,
        T*_b = (1/(SG)) Σ_i Σ_j d[s*_i, g*_j] = u_bᵀ d v_b / (SG),
    with u_b [S] and v_b [G] the draw counts. Under d = μ + a_s + b_g + e_sg the bootstrap variance
    is var(row means)/S + var(column means)/G + mean(e²)/(SG) (population variances of the two-way
    decomposition), mildly conservative in the interaction term (Owen 2007, Ann. Appl. Stat. 1:386;
    McCullagh 2000, Bernoulli 6:285, shows no resampling of a crossed array is exact).

    Args:
      d: [S, G] paired differences per seed and game.
    Returns:
      ``CrossedBootstrap`` with the ``level`` percentile interval; NaN interval where S < 2 (no
      seed-to-seed variation to resample). With G = 1 it is the ordinary bootstrap over seeds.
    Raises:
      ValueError: d not 2-D, empty, or not finite.
    """
    d = np.asarray(d, np.float64)
    if d.ndim != 2 or d.size == 0 or not np.all(np.isfinite(d)):
        raise ValueError(f"d must be a finite [seeds, games] matrix, got shape {d.shape}")
    s, g = d.shape
    seeds = _draw_counts(rng.integers(0, s, size=(replicates, s)), s)
    games = _draw_counts(rng.integers(0, g, size=(replicates, g)), g)
    values = ((seeds @ d) * games).sum(axis=1) / (s * g)
    lo, hi = interval(values, level) if s >= 2 else (math.nan, math.nan)
    return CrossedBootstrap(float(d.mean()), lo, hi, level, s, g, values)


def _draw_counts(draws: np.ndarray, size: int) -> np.ndarray:
    """[B, size] how often each index was drawn, from draws [B, k]."""
    replicates = draws.shape[0]
    index = (np.arange(replicates)[:, None] * size + draws).ravel()
    return np.bincount(index, minlength=replicates * size).reshape(replicates, size).astype(np.float64)


__all__ = [
    "Alternative",
    "Correlations",
    "CrossedBootstrap",
    "DetectableDifference",
    "Estimate",
    "OneSided",
    "PairedT",
    "Sides",
    "SignFlipTest",
    "SignTest",
    "Tost",
    "affine_rmse",
    "bootstrap_correlations",
    "crossed_bootstrap",
    "estimate",
    "group_bootstrap_weights",
    "holm",
    "inclusion_weights",
    "interval",
    "jeffreys_floor",
    "midranks",
    "minimum_detectable_difference",
    "mixture_coefficients",
    "mixture_weight",
    "monte_carlo_se",
    "monte_carlo_se_from_counts",
    "noise_ceiling",
    "paired_t",
    "paired_t_power",
    "pearson",
    "quantile_bins",
    "ratio_identified",
    "sign_agreement",
    "sign_flip_test",
    "sign_test",
    "spearman",
    "tost",
    "weighted_moments",
]
