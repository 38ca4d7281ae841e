"""How each arm's training series moved, and how that movement goes with the run's held-out gain.

A descriptive view beside the declared analysis (never a test of it): the arms differ in their
advantages only, yet they can steer the policy differently while it trains, e.g. towards more
confident or more uncertain decisions, and a difference in the endpoint may come with (or through)
such a drift.

For each training series a record keeps (``records.TRAINING``: training success, invalid-action
ratio, the decisions' NLL, episode length, …), per arm and finished seed: the series' mean over the
first ``early`` iterations and over the last ``late``, and their change. Then, over every finished run
whose seed has a warm-start evaluation, the Pearson correlation r between a series' change and the
run's gain g = endpoint(run) − endpoint(seed's warm start), both centred within seed:

    r = Σ_i x̃_i ỹ_i / sqrt(Σ_i x̃_i² · Σ_i ỹ_i²),   x̃_i = x_i − mean_{j: seed j = seed i} x_j  (same for ỹ)

Seeds differ far more than arms do, so a correlation over raw values would mostly compare seeds;
seeds with one run only carry nothing after centring and are left out of r and of its count. A
series that is exactly 0 on every iteration of every run of an arm (not measured by that estimator,
e.g. GACA's NLL statistics under fixed_mix, or never off zero) is left out for that arm.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from gaca.lab.compare.analysis import SERIES_END_ITERATIONS, SettingRecords, pooled_endpoint, series_end
from gaca.lab.compare.matrix import CompareMatrix, SettingSpec
from gaca.lab.compare.records import TRAINING

#: Iterations averaged at the start and at the end of a run's training series.
EARLY_ITERATIONS = 5
LATE_ITERATIONS = SERIES_END_ITERATIONS


@dataclass
class SeriesDrift:
    """One training series of one setting: its start and end per arm and seed, and r with the gain."""

    setting: str
    key: str
    arms: dict[str, dict[int, tuple[float, float]]] = field(default_factory=dict)
    """Arm -> seed -> (mean over the first ``early`` iterations, mean over the last ``late``)."""
    gain_r: float = math.nan
    """Within-seed Pearson r of the change (late − early) with the endpoint's gain over the warm start."""
    gain_runs: int = 0
    """Runs in ``gain_r`` (those of seeds with at least two runs)."""


def within_seed_correlation(x: np.ndarray, y: np.ndarray, seeds: np.ndarray) -> tuple[float, int]:
    """Pearson r of x and y after subtracting each seed's mean from both (module docstring) and the
    number of values used; seeds with one value are dropped. x, y, seeds: [n]. NaN where undefined."""
    x, y, seeds = np.asarray(x, float), np.asarray(y, float), np.asarray(seeds)
    keep = np.array([np.sum(seeds == s) > 1 for s in seeds], dtype=bool)
    x, y, seeds = x[keep], y[keep], seeds[keep]
    if not len(x):
        return math.nan, 0
    for s in np.unique(seeds):
        at = seeds == s
        x[at] -= x[at].mean()
        y[at] -= y[at].mean()
    denominator = math.sqrt(float(np.sum(x * x) * np.sum(y * y)))
    return (float(np.sum(x * y)) / denominator if denominator > 0 else math.nan), len(x)


def series_drift(matrix: CompareMatrix, records: SettingRecords, setting: SettingSpec, *,
                 early: int = EARLY_ITERATIONS, late: int = LATE_ITERATIONS) -> list[SeriesDrift]:
    """Every training series' drift per arm and its within-seed r with the gain (module docstring).

    Runs shorter than ``early + late`` iterations are left out (their start and end would overlap)."""
    splits, kind = matrix.splits_of(setting), matrix.analysis.endpoint
    warm = {s: pooled_endpoint(w.evaluations, splits, kind) for s, w in records.warm.items()
            if all(split in w.evaluations for split in splits)}
    gains = {(arm, s): pooled_endpoint(r.final, splits, kind) - warm[s] for arm, runs in records.runs.items()
             for s, r in runs.items() if s in warm and r.finished(splits)}
    out = []
    for key in TRAINING:
        drift = SeriesDrift(setting.name, key)
        changes, gained, seeds = [], [], []
        for arm, runs in records.runs.items():
            series = {s: np.asarray(r.training[key], float) for s, r in sorted(runs.items())
                      if r.finished(splits) and len(r.training.get(key, [])) >= early + late}
            if not series or all(not np.any(x) for x in series.values()):
                continue
            drift.arms[arm] = {s: (float(np.nanmean(x[:early])), series_end(x, late)) for s, x in series.items()}
            for s, (start, end) in drift.arms[arm].items():
                if (arm, s) in gains:
                    changes.append(end - start)
                    gained.append(gains[arm, s])
                    seeds.append(s)
        if drift.arms:
            drift.gain_r, drift.gain_runs = within_seed_correlation(np.array(changes), np.array(gained),
                                                                    np.array(seeds))
            out.append(drift)
    return out


__all__ = ["EARLY_ITERATIONS", "LATE_ITERATIONS", "SeriesDrift", "series_drift", "within_seed_correlation"]
