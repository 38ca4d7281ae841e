"""The estimator options: one name and one default per concept (docs/design.md), shared by the
library, the trainer's config files, the CLI and the verl integration."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

from gaca import validate
from gaca.advantage.criticality import Criticality
from gaca.advantage.empg import EmpgScope
from gaca.advantage.episode import EpisodeStats
from gaca.advantage.hgpo import ZeroLevels
from gaca.advantage.mixing import Mixture, NoPeer, WeightMap
from gaca.advantage.normalize import Norm
from gaca.advantage.uncertainty import Uncertainty

#: Upper bound of ``omega`` and the smallest ``w0`` of the additive mixture: within them, finite
#: returns give finite float32 advantages whatever the other options (fuzzed in the tests).
MAX_OMEGA = 1e3
MIN_ADDITIVE_W0 = 1e-3
#: Bounds of EMPG's sharpness k, k_f (exp(−50) ≈ 2e-22 is still a normal float64), of HGPO's depth
#: (levels beyond ALFWorld's memory of a few steps have no peers) and of its weight exponent
#: ((K + 2)^α stays far from float64's range).
MAX_EMPG_K = 50.0
MAX_HGPO_HISTORY = 16
MAX_HGPO_ALPHA = 10.0


Conventions = Literal["gaca", "verl-agent"]


@dataclass(frozen=True)
class AdvantageOptions:
    """Options of every estimator (each estimator reads the ones it uses)."""

    gamma: float = 0.95
    """Discount γ of the step-level returns G_t = Σ_k γ^(k−t) r_k."""
    eps: float = 1e-6
    """Added to every standard deviation before dividing (> 0: a group with equal returns has std 0)."""
    norm: Norm | None = None
    """Group normalization: 'mean_std' divides by the group std, 'mean' only centers. None: each
    estimator's own: 'mean' for rloo (classic RLOO, Ahmadian et al. 2024, as verl's ``rloo``),
    'mean_std' for the others. rloo with 'mean_std' is the leave-one-out advantage divided by the
    group std, which is GRPO's advantage times n/(n−1): a rescaled GRPO, not RLOO."""
    episode_stats: EpisodeStats | None = None
    """Episode-group statistics over trajectories ('trajectory', as GRPO defines them) or over step
    rows ('step', verl-agent's choice, which weights a trajectory by its length). None: the
    conventions' own ('trajectory' for gaca, 'step' for verl-agent)."""
    conventions: Conventions = "gaca"
    """Whose conventions the shared parts follow. 'gaca': the invalid-action penalty is part of the
    step reward, before any return is summed; a group of one has no baseline (advantage 0);
    similarity grouping visits rows in (trajectory, step) order and compares texts without
    difflib's autojunk; a trainer's padding copies (``StepBatch.count``) count once. 'verl-agent':
    verl-agent's GiGPO exactly (docs/verl-agent.md): episode statistics over step rows, the penalty
    subtracted after discounting from the row's own episode score and discounted return, a lone row
    keeps its raw score, similarity greedy in the batch's row order with
    ``SequenceMatcher(None, obs, representative)`` and its default autojunk, padding copies counted
    as rows in every statistic over step rows; HGPO's history groups take the population std (its
    authors' code, verl-agent's ``recipe/hgpo``)."""
    omega: float = 1.0
    """Weight ω in [0, 1000] of the step-level term in GiGPO / the additive mixture."""
    criticality: Criticality = "zscore"
    """How a step's NLL is normalized within its trajectory."""
    weight_map: WeightMap = "clip"
    """Criticality -> weight: clip(w0 + κ·c) or σ(logit w0 + κ·c)."""
    w0: float = 0.5
    """Weight of the step-level signal at average criticality, in [0, 1] ((0, 1) for the sigmoid map;
    >= 0.001 for the additive mixture, which divides by it)."""
    kappa: float = 0.25
    """Slope κ of the weight in the criticality score (0: fixed mixing). κ < 0 aligns the same spread of
    weights *against* uncertainty: the anti-GACA control the lab compares GACA with, not a method."""
    w_min: float = 0.0
    """Lower clip of the weight, in [0, 1]."""
    w_max: float = 1.0
    """Upper clip of the weight, in [w_min, 1]."""
    mixture: Mixture = "convex"
    """'convex': (1−w)A^E + wA^S; 'additive': A^E + ω(w/w0)A^S (GiGPO when κ = 0)."""
    no_peer: NoPeer = "episode"
    """A step without a step-group peer keeps full episode credit ('episode') or not ('zero')."""
    similarity: float | None = None
    """None: exact anchors; a threshold in (0, 1) also groups near-identical anchor texts."""
    uncertainty: Uncertainty = "auto"
    """The per-step uncertainty of the estimators that weight by it (``empg``): 'entropy' (the
    policy's entropy at the step, ``StepBatch.entropy``, which must be present), 'nll' (the sampled
    response's mean token NLL, a one-sample estimate of that entropy), 'auto' (the entropy where the
    batch carries it, else the NLL)."""
    empg_k: float = 1.0
    """EMPG's scale sharpness k in [0, 50]: g = exp(−k·H̃)/mean exp(−k·H̃) (0: no rescaling)."""
    empg_k_future: float = 1.0
    """EMPG's future-clarity sharpness k_f in [0, 50]: f = exp(−k_f·H̃)."""
    empg_zeta: float = 0.1
    """EMPG's future-clarity bonus weight ζ in [0, 1000] (0: no bonus)."""
    empg_scope: EmpgScope = "batch"
    """Where EMPG's min-max, scale mean and centering are taken: over the whole batch ('batch', the
    paper) or within each episode group ('group': one task's credit ignores the other tasks)."""
    hgpo_history: int = 2
    """HGPO's history depth K in [0, 16]: levels j = 1..K+1 group the steps whose last j anchors agree
    (K = 0 is GiGPO's step groups alone)."""
    hgpo_alpha: float = 1.0
    """HGPO's level-weight exponent α in [0, 10]: level j weighs (j + 1)^α (0: equal weights)."""
    hgpo_base: bool = False
    """HGPO: also mix in the episode advantage A^E as level 0 (weight 1); without it a step with no
    peer at any level gets 0."""
    hgpo_zero_levels: ZeroLevels = "skip"
    """HGPO: a level whose group's returns are all equal (no signal, advantage 0) is left out of the
    weights ('skip', as the authors' code does) or counted, pulling the mix towards 0 ('keep')."""

    def __post_init__(self) -> None:
        validate.literal_fields(self, "option ")
        if self.conventions == "verl-agent" and self.episode_stats == "trajectory":
            raise ValueError("option episode_stats='trajectory' contradicts conventions='verl-agent' (which takes "
                             "episode statistics over step rows): leave episode_stats unset")
        check = validate.number
        check("option gamma", self.gamma, 0.0, 1.0)
        check("option eps", self.eps, 0.0, None, lo_open=True)  # eps = 0: 0/0 = NaN on equal returns
        check("option omega", self.omega, 0.0, MAX_OMEGA)
        check("option kappa", self.kappa)
        check("option w_min", self.w_min, 0.0, 1.0)
        check("option w_max", self.w_max, 0.0, 1.0)
        if self.w_min > self.w_max:
            raise ValueError(f"option w_min={self.w_min} must be <= w_max={self.w_max}")
        check("option w0", self.w0, 0.0, 1.0)
        if self.weight_map == "sigmoid" and not 0.0 < self.w0 < 1.0:
            raise ValueError(f"option w0={self.w0}: weight_map='sigmoid' needs 0 < w0 < 1 (it takes logit(w0))")
        if self.mixture == "additive" and self.w0 < MIN_ADDITIVE_W0:
            raise ValueError(f"option w0={self.w0} must be >= {MIN_ADDITIVE_W0:g}: mixture='additive' divides by w0")
        if self.similarity is not None:
            check("option similarity", self.similarity, 0.0, 1.0, lo_open=True, hi_open=True)
        check("option empg_k", self.empg_k, 0.0, MAX_EMPG_K)
        check("option empg_k_future", self.empg_k_future, 0.0, MAX_EMPG_K)
        check("option empg_zeta", self.empg_zeta, 0.0, MAX_OMEGA)
        validate.integer("option hgpo_history", self.hgpo_history, 0, MAX_HGPO_HISTORY)
        check("option hgpo_alpha", self.hgpo_alpha, 0.0, MAX_HGPO_ALPHA)
        if not isinstance(self.hgpo_base, bool):
            raise ValueError(f"option hgpo_base must be true or false, got {self.hgpo_base!r}")

    def episode_norm(self, leave_one_out: bool = False) -> Norm:
        """The normalization of the episode level: ``norm``, or the estimator's own when unset."""
        if self.norm is not None:
            return self.norm
        return "mean" if leave_one_out else "mean_std"

    def resolved_episode_stats(self) -> EpisodeStats:
        """``episode_stats``, or the conventions' own when unset."""
        if self.episode_stats is not None:
            return self.episode_stats
        return "step" if self.conventions == "verl-agent" else "trajectory"

    @classmethod
    def names(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls)]

    @classmethod
    def from_kwargs(cls, **kwargs: Any) -> AdvantageOptions:
        """Build from keywords; an unknown name is an error listing the valid ones."""
        return cls().replace(**kwargs)

    def replace(self, **kwargs: Any) -> AdvantageOptions:
        """A copy with the keyword fields changed (validated); an unknown name is an error listing the valid ones."""
        unknown = sorted(set(kwargs) - set(self.names()))
        if unknown:
            raise ValueError(f"unknown advantage option(s) {unknown}; valid options: {self.names()}")
        return dataclasses.replace(self, **kwargs) if kwargs else self


__all__ = ["AdvantageOptions", "Conventions"]
