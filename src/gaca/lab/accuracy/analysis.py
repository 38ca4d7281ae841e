"""Every statistic of the accuracy report, typed, from an ``AccuracyData``.

    analysis = analyze_accuracy(data)      # AccuracyAnalysis

For both truths (undiscounted, γ-discounted): each setting's Pearson, Spearman, sign agreement and
error after an affine fit, overall and per subset of steps, with 95% bootstrap intervals over
episode groups (``gaca.lab.accuracy.score``), the same over the population the stratified sample
stands for (inverse-inclusion weights), and the noise ceiling a perfect estimate could reach
against the Monte-Carlo truth. Then the premise: the weight map fitted to the truth, the pooled
interaction model and the cross-fitted gain (``gaca.lab.premise``), beside the descriptive optimal
mixture per criticality quintile.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from gaca.lab import premise, stats
from gaca.lab.accuracy.data import AccuracyData
from gaca.lab.accuracy.grid import DEFAULT_GACA
from gaca.lab.accuracy.score import SubsetScores, per_step_optimal_weight, score_settings
from gaca.lab.accuracy.select import POSITIONS, position_bins

#: Random splits of the cross-fitted gain.
CROSS_FIT_SPLITS = 200


@dataclass
class TruthScores:
    """Every setting scored against one kind of truth."""

    scores: dict[str, SubsetScores]
    """Subset -> scores (subsets: ``subsets``)."""
    population: SubsetScores | None
    """All steps, weighted by inverse inclusion probability (None where the weights are not known)."""
    truth_sd: float
    truth_se_rms: float
    noise_ceiling: float
    """√(1 − mean SE² / var truth): the Pearson r a perfect estimate could reach against this truth."""


@dataclass
class NllWeight:
    """Spearman correlations of the per-step optimal weight with the step's NLL and its state's expected NLL."""

    scale: float
    steps: int = 0
    spearman_nll: float = math.nan
    spearman_expected_nll: float = math.nan


@dataclass
class Premise:
    """GACA's premise against the undiscounted truth (``gaca.lab.premise``): every scored step, rows
    without a peer at w = 0 (the interaction model and the bins use the rows with a peer)."""

    weight_map: premise.WeightMapBootstrap
    """w0*, κ* of clip(w0 + κ·c) maximizing the correlation with the truth, bootstrap over groups."""
    constant: premise.MapFit
    """The best constant weight (κ = 0): the fixed mixture fitted the same way."""
    interaction: premise.InteractionFit
    """truth ≈ a·A^E + b·A^S + c·crit·A^E + d·crit·A^S; the premise says d > c."""
    cross_fit: premise.CrossFit
    """Held-out correlation of the fitted map minus the fitted constant, over random halves of the groups."""
    bins: tuple[premise.BinWeight, ...]
    """w* = b/(a + b) per criticality quintile (descriptive; flagged where unidentified)."""
    population: premise.WeightMapBootstrap | None = None
    """The fitted map over the population the stratified sample stands for (inverse-inclusion weights)."""

    def summary(self) -> str:
        m, i, x = self.weight_map, self.interaction, self.cross_fit
        return (f"premise: κ* = {m.kappa.value:+.2f} [{m.kappa.lo:+.2f}, {m.kappa.hi:+.2f}] (P(κ* > 0) = "
                f"{m.p_kappa_positive:.2f}), w0* = {m.w0.value:.2f}; d − c = {i.d_minus_c.value:+.3f} "
                f"(P(d > c) = {i.p_d_greater_c:.2f}); cross-fitted gain {x.mean:+.4f} (> 0 in "
                f"{x.share_positive:.0%} of splits)")


def premise_statistics(data: AccuracyData, keep: np.ndarray, *, replicates: int, seed: int) -> Premise | None:
    """The premise statistics of the usable steps ``keep`` (None with fewer than 4 groups or 10 steps)."""
    s = data.steps
    if keep.size < 10 or np.unique(s.group[keep]).size < 4:
        return None
    gaca = data.settings[DEFAULT_GACA].options
    grid = premise.MapGrid(w_min=float(gaca["w_min"]), w_max=float(gaca["w_max"]))
    rows = premise.PremiseRows(s.truth[keep], s.episode[keep], s.step_level[keep], s.criticality[keep],
                               s.has_peer[keep], s.group[keep])
    rng = np.random.default_rng(seed)
    population = None
    if np.isfinite(s.inclusion[keep]).all():
        weighted = premise.PremiseRows(rows.truth, rows.episode, rows.step, rows.criticality, rows.has_peer,
                                       rows.groups, s.inclusion[keep])
        population = premise.bootstrap_weight_map(weighted, replicates=replicates, rng=rng, grid=grid)
    return Premise(
        weight_map=premise.bootstrap_weight_map(rows, replicates=replicates, rng=rng, grid=grid),
        constant=premise.fit_weight_map(rows, grid.fixed()),
        interaction=premise.interaction_model(rows, replicates=replicates, rng=rng),
        cross_fit=premise.cross_fit(rows, splits=CROSS_FIT_SPLITS, rng=rng, grid=grid),
        bins=premise.bin_weights(rows, replicates=replicates, rng=rng), population=population)


@dataclass
class AccuracyAnalysis:
    """Every number of the accuracy report (module docstring)."""

    steps_scored: int
    steps_dropped: int
    """Steps without a usable truth (no continuation restored their state)."""
    undiscounted: TruthScores
    discounted: TruthScores
    nll_weight: NllWeight
    weight_map: dict[str, object]
    """GACA's default weight-map options (w0, κ, range, map)."""
    premise: Premise | None = None
    """The premise statistics (None: too few steps or groups)."""
    notes: list[str] = field(default_factory=list)


def subsets(data: AccuracyData) -> dict[str, np.ndarray]:
    """The step subsets every statistic is also reported on (name -> bool mask [K])."""
    s = data.steps
    peer = s.has_peer
    position = position_bins(s.step, s.length)
    family = np.asarray(s.family)
    out = {"all": np.ones(len(peer), dtype=bool), "peer": peer, "no peer": ~peer}
    out.update({f"criticality q{b + 1}": s.criticality_bin == b for b in range(5)})
    out.update({f"position {name}": position == k for k, name in enumerate(POSITIONS)})
    out.update({f"family {f}": family == f for f in sorted(set(s.family))})
    return out


def analyze_accuracy(data: AccuracyData, *, bootstrap: int | None = None, seed: int | None = None) -> AccuracyAnalysis:
    """The analysis of ``data`` (module docstring); ``bootstrap`` and ``seed`` override the measurement's."""
    replicates = int(bootstrap or data.lab.bootstrap)
    base_seed = int(data.lab.seed if seed is None else seed)
    s = data.steps
    usable = np.isfinite(s.truth) & np.isfinite(s.truth_se)
    keep = np.flatnonzero(usable)
    groups = s.group[keep]
    masks = {k: v[keep] for k, v in subsets(data).items()}
    estimates = {label: v[keep] for label, v in data.estimates.items()}
    inclusion = s.inclusion[keep]
    truths = {}
    for kind, (truth, se) in {"undiscounted": (s.truth, s.truth_se),
                              "discounted": (s.truth_discounted, s.truth_discounted_se)}.items():
        truth, se = truth[keep], se[keep]
        scores = score_settings(estimates, truth, se, groups, masks, replicates=replicates,
                                rng=np.random.default_rng(base_seed), reference=DEFAULT_GACA)
        population = None
        if inclusion.size and np.isfinite(inclusion).all():
            population = score_settings(estimates, truth, se, groups, {"all": np.ones(len(keep), bool)},
                                        replicates=replicates, rng=np.random.default_rng(base_seed),
                                        reference=DEFAULT_GACA, row_weights=inclusion)["all"]
        truths[kind] = TruthScores(
            scores=scores, population=population,
            truth_sd=float(np.std(truth, ddof=1)) if truth.size > 1 else math.nan,
            truth_se_rms=float(np.sqrt(np.mean(se**2))) if se.size else math.nan,
            noise_ceiling=stats.noise_ceiling(truth, se))
    truth, episode, step_level, peer = s.truth[keep], s.episode[keep], s.step_level[keep], s.has_peer[keep]
    gaca = data.settings[DEFAULT_GACA].options
    return AccuracyAnalysis(
        steps_scored=int(keep.size), steps_dropped=int((~usable).sum()),
        undiscounted=truths["undiscounted"], discounted=truths["discounted"],
        nll_weight=_nll_vs_optimal_weight(truth[peer], episode[peer], step_level[peer], s.nll[keep][peer],
                                          s.first_nll[keep][peer]),
        weight_map={k: gaca[k] for k in ("w0", "kappa", "w_min", "w_max", "weight_map")},
        premise=premise_statistics(data, keep, replicates=replicates, seed=base_seed + 1))


def _nll_vs_optimal_weight(truth: np.ndarray, episode: np.ndarray, step_level: np.ndarray, nll: np.ndarray,
                           first_nll: np.ndarray) -> NllWeight:
    """Spearman of the per-step optimal weight with the step's NLL and with E_a[NLL] at its state."""
    if truth.size < 3:
        return NllWeight(math.nan)
    ones = np.ones(truth.size)
    a_b = np.linalg.lstsq(np.stack([episode, step_level], 1), truth, rcond=None)[0]
    scale = float(a_b.sum())
    if not math.isfinite(scale) or abs(scale) < 1e-9:
        return NllWeight(scale)
    w = per_step_optimal_weight(truth, episode, step_level, scale)
    ok = np.isfinite(w)
    out = NllWeight(scale, int(ok.sum()))
    if ok.sum() >= 3:
        out.spearman_nll = float(stats.spearman(w[ok], nll[ok], ones[ok])[0])
        fin = ok & np.isfinite(first_nll)
        if fin.sum() >= 3:
            out.spearman_expected_nll = float(stats.spearman(w[fin], first_nll[fin], ones[fin])[0])
    return out


__all__ = ["CROSS_FIT_SPLITS", "AccuracyAnalysis", "NllWeight", "Premise", "TruthScores", "analyze_accuracy",
           "premise_statistics", "subsets"]
