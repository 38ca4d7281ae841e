"""The estimator settings the lab scores: every registered estimator and a declared grid of options.

    grpo, rloo, gigpo                                     (their defaults)
    fixed_mix   w0 ∈ {0.25, 0.5, 0.75}
    gaca        criticality ∈ {zscore, ratio, rank} × weight_map ∈ {clip, sigmoid} × κ ∈ {0.1, 0.25, 0.5, 1}
                (w0 = 0.5; ``gaca zscore clip κ=0.25`` is GACA's default)

plus any other registered estimator with its defaults. Each setting's options go on top of the
run's own advantage options (γ, eps, norm, ...), so that the estimates are the ones training
would have used.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gaca.advantage import ESTIMATORS

FIXED_MIX_W0 = (0.25, 0.5, 0.75)
GACA_CRITICALITY = ("zscore", "ratio", "rank")
GACA_WEIGHT_MAP = ("clip", "sigmoid")
GACA_KAPPA = (0.1, 0.25, 0.5, 1.0)
DEFAULT_GACA = "gaca zscore clip κ=0.25"


@dataclass(frozen=True)
class EstimatorSetting:
    """One scored estimator: its name in ``ESTIMATORS`` and the options that differ from the run's."""

    label: str
    estimator: str
    options: dict[str, Any] = field(default_factory=dict)


def estimator_grid() -> list[EstimatorSetting]:
    """The declared grid (module docstring), in report order."""
    grid = [EstimatorSetting(name, name) for name in ("grpo", "rloo", "gigpo")]
    grid += [EstimatorSetting(f"fixed_mix w0={w0:g}", "fixed_mix", {"w0": w0}) for w0 in FIXED_MIX_W0]
    grid += [
        EstimatorSetting(f"gaca {crit} {wmap} κ={kappa:g}", "gaca",
                         {"criticality": crit, "weight_map": wmap, "kappa": kappa, "w0": 0.5})
        for crit in GACA_CRITICALITY for wmap in GACA_WEIGHT_MAP for kappa in GACA_KAPPA
    ]
    listed = {s.estimator for s in grid}
    grid += [EstimatorSetting(name, name) for name in ESTIMATORS if name not in listed]
    return grid


__all__ = ["DEFAULT_GACA", "EstimatorSetting", "estimator_grid"]
