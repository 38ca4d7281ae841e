"""The estimator settings the lab scores: every registered estimator and a declared grid of options.

    grpo, rloo, gigpo                                     (their defaults)
    fixed_mix   w0 ∈ {0.25, 0.5, 0.75}
    gaca        criticality ∈ {zscore, ratio, rank} × weight_map ∈ {clip, sigmoid} × κ ∈ {0.1, 0.25, 0.5, 1}
                (w0 = 0.5; ``gaca zscore clip κ=0.25`` is GACA's default)
    empg        its paper's setting (k = k_f = 1, ζ = 0.1, batch statistics); ζ = 0 (the rescaling
                alone); group statistics; the NLL as the uncertainty even where the rollout recorded
                the entropy (the quantity GACA reads)
    hgpo        history K ∈ {1, 2, 4} (2 is its code's default); K = 2 with A^E as level 0

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
EMPG_SETTINGS = {
    "empg": {},
    "empg ζ=0": {"empg_zeta": 0.0},
    "empg group": {"empg_scope": "group"},
    "empg nll": {"uncertainty": "nll"},
}
HGPO_HISTORY = (1, 2, 4)


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
    grid += [EstimatorSetting(label, "empg", options) for label, options in EMPG_SETTINGS.items()]
    grid += [EstimatorSetting(f"hgpo K={k}", "hgpo", {"hgpo_history": k}) for k in HGPO_HISTORY]
    grid += [EstimatorSetting("hgpo K=2 base", "hgpo", {"hgpo_history": 2, "hgpo_base": True})]
    listed = {s.estimator for s in grid}
    grid += [EstimatorSetting(name, name) for name in ESTIMATORS if name not in listed]
    return grid


__all__ = ["DEFAULT_GACA", "EMPG_SETTINGS", "HGPO_HISTORY", "EstimatorSetting", "estimator_grid"]
