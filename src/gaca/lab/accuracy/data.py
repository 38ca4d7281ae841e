"""What an accuracy measurement records, typed: the scored steps, every setting's estimates, the counts.

``AccuracyData`` is born in ``gaca.lab.accuracy.measure`` and is everything the analysis needs: a
report's ``result.json`` keeps it (``to_json``), so a measurement is analysed again without
re-measuring (``gaca lab accuracy --from-json``).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from gaca.lab.accuracy.config import AccuracyConfig
from gaca.lab.accuracy.grid import EstimatorSetting


@dataclass
class ScoredSteps:
    """Per scored step k (arrays [K]): where it is, what the estimators saw, and its Monte-Carlo truth.

    ``episode``, ``step_level``, ``criticality`` and ``has_peer`` are those of GACA's default setting.
    """

    row: np.ndarray
    """int: the step's row in the rollout's step table."""
    group: np.ndarray
    """int: its episode group (the bootstrap's unit)."""
    traj: np.ndarray
    step: np.ndarray
    length: np.ndarray
    """int: its episode's length."""
    family: list[str]
    criticality: np.ndarray
    criticality_bin: np.ndarray
    """int: its criticality quintile over every row of the rollout."""
    nll: np.ndarray
    """The step table's NLL of the step (generate: mean token NLL; choose: −log π(a|s) by default)."""
    first_nll: np.ndarray
    """Mean NLL of the first action over the V continuations: E_a~π[ℓ(a | s_t)] (NaN without log-probs)."""
    entropy: np.ndarray
    """The policy's entropy at the step as the rollout recorded it (NaN where it did not)."""
    has_peer: np.ndarray
    """bool: the step has a step-level peer."""
    episode: np.ndarray
    """A^E."""
    step_level: np.ndarray
    """A^S."""
    truth: np.ndarray
    """A = Q̂ − V̂, undiscounted return-to-go."""
    truth_se: np.ndarray
    truth_discounted: np.ndarray
    truth_discounted_se: np.ndarray
    q: np.ndarray
    v: np.ndarray
    usable_q: np.ndarray
    usable_v: np.ndarray
    inclusion: np.ndarray
    """Inverse inclusion probability of the stratified sample: rows of the step's stratum in the rollout
    over rows sampled from it (weights for population-level statistics; NaN where not known)."""

    INTEGER: ClassVar[tuple[str, ...]] = ("row", "group", "traj", "step", "length", "criticality_bin", "usable_q",
                                          "usable_v")

    def __len__(self) -> int:
        return len(self.family)

    def to_json(self) -> dict[str, list[Any]]:
        return {f.name: list(getattr(self, f.name)) if f.name == "family" else
                [None if isinstance(x, float) and not math.isfinite(x) else x for x in getattr(self, f.name).tolist()]
                for f in dataclasses.fields(self)}

    @classmethod
    def from_json(cls, data: dict[str, list[Any]]) -> ScoredSteps:
        def column(name: str) -> Any:
            values = data[name]
            if name == "family":
                return [str(v) for v in values]
            if name == "has_peer":
                return np.asarray(values, dtype=bool)
            if name in cls.INTEGER:
                return np.asarray(values, dtype=np.int64)
            return np.asarray([np.nan if v is None else v for v in values], dtype=np.float64)

        return cls(**{f.name: column(f.name) for f in dataclasses.fields(cls)})


@dataclass
class MeasureCounts:
    """What the measurement spent and saw."""

    rollout_episodes: int
    rollout_steps: int
    rollout_success: float
    rollout_s: float
    peer_share: float
    """Share of all rollout rows with a step-level peer (GACA's default setting)."""
    continuations: int
    mismatches: int
    """Continuations whose restored observation or admissible actions differed from the record."""
    env_steps: int
    policy_calls: int
    forward_passes: int
    continuation_s: float
    seconds: float
    mismatch_examples: list[str] = field(default_factory=list)


@dataclass
class AccuracyData:
    """One accuracy measurement (module docstring)."""

    checkpoint: str
    run_config: dict[str, Any]
    """The checkpoint's training config (as saved)."""
    lab: AccuracyConfig
    steps: ScoredSteps
    estimates: dict[str, np.ndarray]
    """Setting label -> [K] its advantage of each scored step."""
    settings: dict[str, EstimatorSetting]
    """Setting label -> the setting, its options complete (the run's own advantage options beneath)."""
    counts: MeasureCounts

    def to_json(self) -> dict[str, Any]:
        return {"checkpoint": self.checkpoint, "run_config": self.run_config, "lab": dataclasses.asdict(self.lab),
                "steps": self.steps.to_json(), "estimates": {k: v.tolist() for k, v in self.estimates.items()},
                "settings": {k: dataclasses.asdict(s) for k, s in self.settings.items()},
                "counts": dataclasses.asdict(self.counts)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> AccuracyData:
        return cls(checkpoint=data["checkpoint"], run_config=data["run_config"], lab=AccuracyConfig(**data["lab"]),
                   steps=ScoredSteps.from_json(data["steps"]),
                   estimates={k: np.asarray(v, dtype=np.float64) for k, v in data["estimates"].items()},
                   settings={k: EstimatorSetting(**s) for k, s in data["settings"].items()},
                   counts=MeasureCounts(**data["counts"]))


__all__ = ["AccuracyData", "MeasureCounts", "ScoredSteps"]
