"""GACA's premise measured against the Monte-Carlo truth: does criticality mark where A^S beats A^E?

Every statistic reads the same scored steps (``PremiseRows``): the true advantage t, the two signals
GACA mixes, A^E (episode level) and A^S (step level), the step's criticality c, whether it has a
step-level peer, its episode group (the bootstrap unit) and an optional population weight
(``stats.inclusion_weights``). docs/design.md, "The lab", names four views:

    fit_weight_map / bootstrap_weight_map   w0*, κ* of w = clip(w0 + κ·c, w_min, w_max) maximizing
                                            corr(t, (1 − w)·A^E + w·A^S); premise: κ* > 0
    interaction_model                        t ≈ a·A^E + b·A^S + c·crit·A^E + d·crit·A^S; premise: d > c
    bin_weights                              w* = b/(a + b) per criticality quantile (descriptive;
                                            flagged unidentified where a + b is not clear of 0)
    cross_fit                                fitted map minus fitted constant weight, out of sample

Rows without a step-level peer get w = 0 (GACA's ``no_peer = "episode"``): their estimate is A^E.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np

from gaca.lab import stats


@dataclass(frozen=True)
class PremiseRows:
    """The scored steps, one row each; validated on construction (arrays become float64 / bool)."""

    truth: np.ndarray
    """[n] the Monte-Carlo true advantage t."""
    episode: np.ndarray
    """[n] A^E, the episode-level advantage of the row's trajectory."""
    step: np.ndarray
    """[n] A^S, the step-level advantage (any value where the row has no peer: it is not read there)."""
    criticality: np.ndarray
    """[n] c, GACA's criticality of the step (NLL normalized within the trajectory)."""
    has_peer: np.ndarray
    """[n] bool, the row has a step-level peer."""
    groups: np.ndarray
    """[n] episode-group labels, the bootstrap and cross-fitting unit."""
    weights: np.ndarray | None = None
    """[n] row weights ≥ 0 (e.g. ``stats.inclusion_weights``); None is all 1."""

    def __post_init__(self) -> None:
        n = len(np.asarray(self.truth))
        if n == 0:
            raise ValueError("PremiseRows needs at least one row")
        for name in ("truth", "episode", "step", "criticality", "weights"):
            value = getattr(self, name)
            value = np.ones(n) if value is None else np.asarray(value, np.float64)
            _check_row(name, value, n, ~np.isfinite(value) | ((value < 0) if name == "weights" else False))
            object.__setattr__(self, name, value)
        object.__setattr__(self, "has_peer", np.asarray(self.has_peer, dtype=bool))
        object.__setattr__(self, "groups", np.asarray(self.groups))
        _check_row("has_peer", self.has_peer, n, np.zeros(n, bool))
        _check_row("groups", self.groups, n, np.zeros(n, bool))

    @property
    def gap(self) -> np.ndarray:
        """[n] A^S − A^E on rows with a peer, 0 elsewhere: the mixed estimate is A^E + w·gap."""
        return np.where(self.has_peer, self.step - self.episode, 0.0)

    def subset(self, mask: np.ndarray) -> PremiseRows:
        """The rows where ``mask`` [n] bool is True (at least one)."""
        return PremiseRows(*(getattr(self, f.name)[mask] for f in dataclasses.fields(self)))


def _check_row(name: str, value: np.ndarray, n: int, bad: np.ndarray) -> None:
    if value.shape != (n,):
        raise ValueError(f"PremiseRows.{name} must have shape [{n}] like truth, got {value.shape}")
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        raise ValueError(f"PremiseRows.{name}[{first}] = {value[first]} is not finite (or a negative weight)")


@dataclass(frozen=True)
class MapGrid:
    """Where the weight map's (w0, κ) is searched: a coarse grid, then a local compass refinement.

    The coarse grid is every w0 in [w0_min, w0_max] at ``w0_step`` × every κ in [kappa_min,
    kappa_max] at ``kappa_step`` (21 × 41 points by default). Each replicate's best grid point is
    then refined in ``refine_rounds`` rounds: the 3 × 3 stencil (w0 ± h_w, κ ± h_κ) around the
    current point, clipped to the box, moves to its best point (the centre wins ties); h starts at
    half the grid step and halves each round, so the default resolution is 0.05/2⁶ ≈ 8e-4 in w0 and
    0.1/2⁶ ≈ 1.6e-3 in κ. On exact ties of the coarse grid the point of smallest |κ|, then smallest
    κ, then smallest w0 wins.
    """

    w0_min: float = 0.0
    w0_max: float = 1.0
    w0_step: float = 0.05
    kappa_min: float = -2.0
    """Negative κ is searched too: the anti-GACA direction (weight aligned against uncertainty)."""
    kappa_max: float = 2.0
    kappa_step: float = 0.1
    refine_rounds: int = 6
    w_min: float = 0.0
    """The map's clip range [w_min, w_max], as GACA's options of the same names."""
    w_max: float = 1.0

    def __post_init__(self) -> None:
        for lo, hi, step in (("w0_min", "w0_max", "w0_step"), ("kappa_min", "kappa_max", "kappa_step")):
            if getattr(self, lo) > getattr(self, hi) or getattr(self, step) <= 0:
                raise ValueError(f"MapGrid: need {lo} <= {hi} and {step} > 0")
        if self.w_min > self.w_max or self.refine_rounds < 0:
            raise ValueError("MapGrid: need w_min <= w_max and refine_rounds >= 0")

    def fixed(self) -> MapGrid:
        """The same search with κ = 0: the best constant weight of the fixed mixture."""
        return dataclasses.replace(self, kappa_min=0.0, kappa_max=0.0)

    def points(self) -> tuple[np.ndarray, np.ndarray]:
        """(w0 [P], κ [P]) of the coarse grid in tie-breaking order."""
        w0 = np.linspace(self.w0_min, self.w0_max, _count(self.w0_min, self.w0_max, self.w0_step))
        kappa = np.linspace(self.kappa_min, self.kappa_max, _count(self.kappa_min, self.kappa_max, self.kappa_step))
        w0, kappa = (v.ravel() for v in np.meshgrid(w0, kappa, indexing="ij"))
        order = np.lexsort((w0, kappa, np.abs(kappa)))
        return w0[order], kappa[order]


def _count(lo: float, hi: float, step: float) -> int:
    return round((hi - lo) / step) + 1


# ---- the engine: correlations of the mixed estimate at many (w0, κ) under many weight vectors ----


def _pearson_from_sums(total, sx, sy, sxx, syy, sxy) -> np.ndarray:
    """Pearson from weighted sums (inputs centred beforehand, so the one-pass form is accurate)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        vx, vy = sxx - sx * sx / total, syy - sy * sy / total
        r = (sxy - sx * sy / total) / np.sqrt(vx * vy)
    scale = np.maximum(np.maximum(sxx, syy), 1e-300)
    return np.where((total > 0) & (vx > 1e-12 * scale) & (vy > 1e-12 * scale), r, np.nan)


def _estimates(rows: PremiseRows, w0: np.ndarray, kappa: np.ndarray, grid: MapGrid) -> np.ndarray:
    """[..., n] A^E + clip(w0 + κ·c, w_min, w_max)·gap, for w0, κ of shape [...]."""
    w = np.clip(w0[..., None] + kappa[..., None] * rows.criticality, grid.w_min, grid.w_max)
    return rows.episode + w * rows.gap


def _grid_correlations(rows: PremiseRows, w0: np.ndarray, kappa: np.ndarray, weights: np.ndarray,
                       grid: MapGrid) -> np.ndarray:
    """[B, P] weighted Pearson of the truth with the estimate at every shared point (w0_p, κ_p) under
    every weight vector weights [B, n]: three [B, n] @ [n, P] products."""
    y = rows.truth - rows.truth.mean()
    x = _estimates(rows, w0, kappa, grid)
    x = x - x.mean(axis=1, keepdims=True)
    total = weights.sum(1)[:, None]
    return _pearson_from_sums(total, weights @ x.T, (weights @ y)[:, None], weights @ (x * x).T,
                              (weights @ (y * y))[:, None], weights @ (x * y).T)


def _point_correlations(rows: PremiseRows, w0: np.ndarray, kappa: np.ndarray, weights: np.ndarray,
                        grid: MapGrid, chunk_elements: int = 4_000_000) -> np.ndarray:
    """[B, P] weighted Pearson at replicate-specific points w0, κ [B, P] under weights [B, n]."""
    y = rows.truth - rows.truth.mean()
    out = np.empty(w0.shape)
    step = max(1, chunk_elements // max(1, w0.shape[1] * y.size))
    for b in range(0, w0.shape[0], step):
        sl = slice(b, b + step)
        x = _estimates(rows, w0[sl], kappa[sl], grid)
        x = x - x.mean(axis=2, keepdims=True)
        w = weights[sl]
        wb = w[:, :, None]  # [b, n, 1]: x [b, P, n] @ wb is Σ_n w_n x_pn per replicate
        out[sl] = _pearson_from_sums(w.sum(1)[:, None], (x @ wb)[..., 0], (w @ y)[:, None],
                                     ((x * x) @ wb)[..., 0], (w @ (y * y))[:, None], ((x * y) @ wb)[..., 0])
    return out


def _best(r: np.ndarray) -> np.ndarray:
    """[B] index of the largest finite value per row (the first on ties); −1 where none is finite."""
    filled = np.where(np.isfinite(r), r, -np.inf)
    best = filled.argmax(axis=1)
    return np.where(np.isfinite(filled[np.arange(len(best)), best]), best, -1)


_STENCIL = np.array([(0, 0)] + [(i, j) for i in (-1, 0, 1) for j in (-1, 0, 1) if (i, j) != (0, 0)], float)


def _fit(rows: PremiseRows, weights: np.ndarray, grid: MapGrid) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(w0*, κ*, r*) each [B]: the best map for every weight vector weights [B, n] (NaN where none)."""
    w0_grid, kappa_grid = grid.points()
    r = _grid_correlations(rows, w0_grid, kappa_grid, weights, grid)
    best = _best(r)
    ok = best >= 0
    w0, kappa = w0_grid[np.maximum(best, 0)], kappa_grid[np.maximum(best, 0)]
    h = np.array([grid.w0_step, grid.kappa_step]) / 2
    lo, hi = np.array([grid.w0_min, grid.kappa_min]), np.array([grid.w0_max, grid.kappa_max])
    for _ in range(grid.refine_rounds):
        cand = np.clip(np.stack([w0, kappa], 1)[:, None, :] + _STENCIL * h, lo, hi)  # [B, 9, 2]
        r_cand = _point_correlations(rows, cand[..., 0], cand[..., 1], weights, grid)
        pick = np.maximum(_best(r_cand), 0)
        w0, kappa = cand[np.arange(len(pick)), pick].T
        h = h / 2
    r_final = _point_correlations(rows, w0[:, None], kappa[:, None], weights, grid)[:, 0]
    return tuple(np.where(ok, v, np.nan) for v in (w0, kappa, r_final))


# ---- the fitted weight map ----


@dataclass(frozen=True)
class MapFit:
    """The weight map that best fits the truth on one weighting of the rows."""

    w0: float
    kappa: float
    correlation: float
    """Weighted Pearson of the truth with (1 − w)·A^E + w·A^S at (w0, κ)."""


def fit_weight_map(rows: PremiseRows, grid: MapGrid = MapGrid()) -> MapFit:
    """w0*, κ* = argmax over the grid's box of corr_w(t, (1 − w)·A^E + w·A^S), w = clip(w0 + κ·c).

    The row weights of ``rows`` weigh the correlation; ``grid.fixed()`` fits the best constant
    weight (κ = 0). Our reconstruction of docs/design.md's premise statistic; the search is ``MapGrid``'s.
    Returns:
      ``MapFit``; NaN where the correlation is undefined at every grid point (constant truth, say).
    """
    w0, kappa, r = _fit(rows, rows.weights[None, :], grid)
    return MapFit(float(w0[0]), float(kappa[0]), float(r[0]))


@dataclass(frozen=True)
class WeightMapBootstrap:
    """The fitted map with group-bootstrap intervals (every replicate re-fits)."""

    fit: MapFit
    w0: stats.Estimate
    kappa: stats.Estimate
    correlation: stats.Estimate
    p_kappa_positive: float
    """Share of replicates (with a fit) whose κ* > 0: the bootstrap's support for the premise."""
    replicates: int
    kappa_replicates: np.ndarray = field(repr=False, compare=False)
    w0_replicates: np.ndarray = field(repr=False, compare=False)


def bootstrap_weight_map(rows: PremiseRows, *, replicates: int, rng: np.random.Generator,
                         grid: MapGrid = MapGrid(), level: float = 0.95) -> WeightMapBootstrap:
    """``fit_weight_map`` with a bootstrap over episode groups: replicate b re-fits under row weights
    c_b(g_i)·w_i (``stats.group_bootstrap_weights`` times the rows' weights); ``level`` percentile
    intervals (Efron & Tibshirani 1993, An Introduction to the Bootstrap, ch. 13; the group as the
    resampling unit because steps of one episode group share their rollouts).
    Returns:
      ``WeightMapBootstrap``; a replicate whose correlation is undefined everywhere is NaN and left
      out of the intervals and of P(κ* > 0) (NaN where no replicate fits).
    """
    fit = fit_weight_map(rows, grid)
    weights = stats.group_bootstrap_weights(rows.groups, replicates, rng) * rows.weights[None, :]
    w0, kappa, r = _fit(rows, weights, grid)
    fitted = np.isfinite(kappa)
    p_positive = float(np.mean(kappa[fitted] > 0)) if fitted.any() else math.nan
    return WeightMapBootstrap(fit, stats.estimate(fit.w0, w0, level), stats.estimate(fit.kappa, kappa, level),
                              stats.estimate(fit.correlation, r, level), p_positive, replicates, kappa, w0)


# ---- the pooled interaction model ----


@dataclass(frozen=True)
class InteractionFit:
    """t ≈ a·A^E + b·A^S + c·crit·A^E + d·crit·A^S over the rows with a peer, with bootstrap intervals."""

    a: stats.Estimate
    b: stats.Estimate
    c: stats.Estimate
    d: stats.Estimate
    d_minus_c: stats.Estimate
    p_d_greater_c: float
    """Share of replicates (with a fit) where d > c."""
    steps: int


def _weighted_lstsq(design: np.ndarray, y: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """[B, k] coefficients of min Σ_i w_bi (y_i − X_i β)², by the normal equations XᵀWX β = XᵀWy;
    NaN where XᵀWX is singular (condition number > 1e12)."""
    gram = np.einsum("bn,ni,nj->bij", weights, design, design)
    moment = np.einsum("bn,ni,n->bi", weights, design, y)
    singular = ~(np.linalg.cond(gram) < 1e12)
    gram[singular] = np.eye(design.shape[1])
    beta = np.linalg.solve(gram, moment[..., None])[..., 0]
    beta[singular] = np.nan
    return beta


def interaction_model(rows: PremiseRows, *, replicates: int, rng: np.random.Generator,
                      level: float = 0.95) -> InteractionFit:
    """Weighted least squares (no intercept) of the truth on [A^E, A^S, c·A^E, c·A^S] over the rows
    with a step-level peer (A^S is no signal elsewhere), bootstrap over episode groups.

    The premise reads d > c: the step-level signal's weight grows with criticality faster than the
    episode-level one's (Aiken & West 1991, Multiple Regression: Testing and Interpreting
    Interactions, for the product-term model).
    Returns:
      ``InteractionFit``; NaN coefficients where the design is singular or no row has a peer.
    """
    if not rows.has_peer.any():
        nan = stats.Estimate(math.nan, math.nan, math.nan)
        return InteractionFit(nan, nan, nan, nan, nan, math.nan, 0)
    peer = rows.subset(rows.has_peer)
    design = np.stack([peer.episode, peer.step, peer.criticality * peer.episode, peer.criticality * peer.step], 1)
    full = _weighted_lstsq(design, peer.truth, peer.weights[None, :])[0]
    boot_weights = stats.group_bootstrap_weights(peer.groups, replicates, rng) * peer.weights[None, :]
    boot = _weighted_lstsq(design, peer.truth, boot_weights)
    a, b, c, d = (stats.estimate(full[k], boot[:, k], level) for k in range(4))
    fitted = np.isfinite(boot).all(axis=1)
    share = float(np.mean(boot[fitted, 3] > boot[fitted, 2])) if fitted.any() else math.nan
    return InteractionFit(a, b, c, d, stats.estimate(full[3] - full[2], boot[:, 3] - boot[:, 2], level),
                          share, int(peer.truth.size))


# ---- per-bin w* (descriptive) ----


@dataclass(frozen=True)
class BinWeight:
    """w* = b/(a + b) of t ≈ a·A^E + b·A^S in one criticality quantile bin."""

    bin: int
    criticality_mean: float
    steps: int
    w_star: stats.Estimate
    denominator: stats.Estimate
    """a + b, whose sign decides whether w* is bounded."""
    unstable_share: float
    """Share of replicates whose a + b is NaN, 0 or of the opposite sign to the full-sample a + b."""
    identified: bool
    """``stats.ratio_identified``: unstable_share ≤ (1 − level)/2. Where False, w*'s percentile
    interval is not a confidence statement (it runs through ±∞) and w* is to be read as unidentified."""


def bin_weights(rows: PremiseRows, *, bins: int = 5, replicates: int, rng: np.random.Generator,
                level: float = 0.95) -> tuple[BinWeight, ...]:
    """w* per criticality quantile bin (``stats.quantile_bins`` over the rows with a peer), with a
    group bootstrap (one draw shared by all bins) and the identification flag of ``BinWeight``.
    Descriptive only: the premise statistics are ``bootstrap_weight_map`` and ``interaction_model``.
    Returns:
      One ``BinWeight`` per nonempty bin (none where no row has a peer); w* is NaN (unidentified)
      in a bin whose 2 × 2 normal equations are singular (``stats.mixture_coefficients``).
    """
    if not rows.has_peer.any():
        return ()
    peer = rows.subset(rows.has_peer)
    bin_of = stats.quantile_bins(peer.criticality, bins)
    boot_weights = stats.group_bootstrap_weights(peer.groups, replicates, rng) * peer.weights[None, :]
    out = []
    for k in range(bins):
        sel = bin_of == k
        if not sel.any():
            continue
        part = peer.subset(sel)
        (a,), (b,) = stats.mixture_coefficients(part.truth, part.episode, part.step, part.weights)
        a_boot, b_boot = stats.mixture_coefficients(part.truth, part.episode, part.step, boot_weights[:, sel])
        with np.errstate(invalid="ignore", divide="ignore"):
            w_full, w_boot = b / (a + b), b_boot / (a_boot + b_boot)
        identified, unstable = stats.ratio_identified(a + b, a_boot + b_boot, level)
        out.append(BinWeight(k, float(np.mean(part.criticality)), int(sel.sum()),
                             stats.estimate(w_full, w_boot, level), stats.estimate(a + b, a_boot + b_boot, level),
                             unstable, identified))
    return tuple(out)


# ---- the cross-fitted accuracy difference ----


@dataclass(frozen=True)
class CrossFit:
    """Held-out correlation of the fitted map minus that of the fitted constant weight, over random splits.

    The spread is over splits of the same groups, which share data: it shows how much the answer
    depends on the split, and is not a sampling interval.
    """

    splits: int
    mean: float
    """Mean over splits of the difference (fitted map − fitted constant)."""
    sd: float
    lo: float
    """2.5% and 97.5% quantiles of the per-split differences."""
    hi: float
    share_positive: float
    gaca: float
    """Mean held-out correlation of the fitted map."""
    fixed: float
    """Mean held-out correlation of the fitted constant weight."""
    differences: np.ndarray = field(repr=False, compare=False)


def _split_masks(groups: np.ndarray, splits: int, rng: np.random.Generator) -> np.ndarray:
    """[R, n] bool: row i is in the first half of split r (⌊G/2⌋ groups drawn at random)."""
    labels, inverse = np.unique(groups, return_inverse=True)
    order = np.argsort(rng.random((splits, labels.size)), axis=1)
    first = np.zeros((splits, labels.size), bool)
    np.put_along_axis(first, order[:, : labels.size // 2], True, axis=1)
    return first[:, inverse]


def cross_fit(rows: PremiseRows, *, splits: int, rng: np.random.Generator, grid: MapGrid = MapGrid()) -> CrossFit:
    """Cross-fitted accuracy gain of the fitted weight map over the fitted fixed mixture.

    Split r puts ⌊G/2⌋ of the G episode groups, drawn at random, in half 1 and the rest in half 2.
    On each half: fit (w0*, κ*) (``grid``) and the best constant w0* (``grid.fixed()``); score both
    by the weighted Pearson with the truth on the other half; the split's difference is the mean
    over the two directions of (map − constant). Repeated over ``splits`` splits (Chernozhukov et
    al. 2018, Econometrics J. 21:C1, for cross-fitting with repeated splits).
    Returns:
      ``CrossFit``; NaN where fewer than 2 groups (nothing to hold out).
    """
    if np.unique(rows.groups).size < 2:
        nan = math.nan
        return CrossFit(splits, nan, nan, nan, nan, nan, nan, nan, np.full(splits, nan))
    first = _split_masks(rows.groups, splits, rng)
    fit_on = np.concatenate([first, ~first]) * rows.weights[None, :]  # [2R, n]
    score_on = np.concatenate([~first, first]) * rows.weights[None, :]
    held_out = []
    for g in (grid, grid.fixed()):
        w0, kappa, _ = _fit(rows, fit_on, g)
        held_out.append(_point_correlations(rows, w0[:, None], kappa[:, None], score_on, g)[:, 0])
    gaca, fixed = (r.reshape(2, splits).mean(axis=0) for r in held_out)
    diff = gaca - fixed
    ok = np.isfinite(diff)
    if not ok.any():
        nan = math.nan
        return CrossFit(splits, nan, nan, nan, nan, nan, nan, nan, diff)
    lo, hi = np.quantile(diff[ok], [0.025, 0.975])
    sd = float(np.std(diff[ok], ddof=1)) if ok.sum() > 1 else math.nan
    return CrossFit(splits, float(diff[ok].mean()), sd, float(lo), float(hi), float(np.mean(diff[ok] > 0)),
                    float(gaca[ok].mean()), float(fixed[ok].mean()), diff)


__all__ = ["BinWeight", "CrossFit", "InteractionFit", "MapFit", "MapGrid", "PremiseRows", "WeightMapBootstrap",
           "bin_weights", "bootstrap_weight_map", "cross_fit", "fit_weight_map", "interaction_model"]
