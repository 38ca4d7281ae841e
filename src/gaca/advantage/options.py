"""The estimator options: one name and one default per concept (DESIGN.md), shared by the
library, the trainer's config files, the CLI and the verl integration."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal, get_args, get_origin, get_type_hints

from gaca import validate
from gaca.advantage.criticality import Criticality
from gaca.advantage.episode import EpisodeStats
from gaca.advantage.mixing import Mixture, NoPeer, WeightMap
from gaca.advantage.normalize import Norm

#: Upper bound of ``omega`` and the smallest ``w0`` of the additive mixture: within them, finite
#: returns give finite float32 advantages whatever the other options (fuzzed in the tests).
MAX_OMEGA = 1e3
MIN_ADDITIVE_W0 = 1e-3


@dataclass(frozen=True)
class AdvantageOptions:
    """Options of every estimator (each estimator reads the ones it uses)."""

    gamma: float = 0.95
    """Discount γ of the step-level returns G_t = Σ_k γ^(k−t) r_k."""
    eps: float = 1e-6
    """Added to every standard deviation before dividing (> 0: a group with equal returns has std 0)."""
    norm: Norm = "mean_std"
    """Group normalization: 'mean_std' divides by the group std, 'mean' only centers."""
    episode_stats: EpisodeStats = "trajectory"
    """Episode-group statistics over trajectories (GRPO) or over step rows (verl-agent)."""
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
    """Slope κ >= 0 of the weight in the criticality score (0: fixed mixing)."""
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

    def __post_init__(self) -> None:
        for name, annotation in get_type_hints(type(self)).items():
            choices = get_args(annotation) if get_origin(annotation) is Literal else ()
            if choices and getattr(self, name) not in choices:
                raise ValueError(f"option {name}={getattr(self, name)!r} is not one of {list(choices)}")
        check = validate.number
        check("option gamma", self.gamma, 0.0, 1.0)
        check("option eps", self.eps, 0.0, None, lo_open=True)  # eps = 0: 0/0 = NaN on equal returns
        check("option omega", self.omega, 0.0, MAX_OMEGA)
        check("option kappa", self.kappa, 0.0, None)
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

    @classmethod
    def names(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls)]

    @classmethod
    def from_kwargs(cls, **kwargs: Any) -> AdvantageOptions:
        """Build from keywords; an unknown name is an error listing the valid ones."""
        unknown = sorted(set(kwargs) - set(cls.names()))
        if unknown:
            raise ValueError(f"unknown advantage option(s) {unknown}; valid options: {cls.names()}")
        return cls(**kwargs)


__all__ = ["AdvantageOptions"]
