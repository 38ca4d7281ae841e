"""A comparison's records: what the report needs of each run, typed, kept apart from the run directories.

    <records>/<setting>/<arm>-seed<k>.json        RunRecord: per held-out split the final policy's
                                                  per-game outcomes; the learning curve; the
                                                  training series; mean time per iteration; the
                                                  run's config; the fingerprint of its warm start
    <records>/<setting>/warm-start-seed<k>.json   WarmStartRecord: the seed's warm start's evaluation
                                                  per split; its fingerprint

A run directory holds checkpoints and logs (megabytes); a record is ~100 kB of JSON written when the
run has finished (``RecordStore``). Records are committed, weights never: a run whose record is
complete counts as finished even when its run directory is gone, so a comparison continues across
sittings without repeating a finished run, and its report can always be rebuilt. A seed's runs are
paired only if they started from the same warm start, which the records pin by fingerprint.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gaca.persist import read_json, write_json
from gaca.train.evaluate import EvalStats, GameOutcome
from gaca.train.timing import ITERATION_TIMES

#: Training-rollout metrics a record keeps per iteration (``RunRecord.training``).
TRAINING = ("env/success", "env/invalid_ratio", "policy/nll", "env/episode_length", "adv/nll_mean")


@dataclass
class SplitEvaluation:
    """One policy's evaluation on one held-out split: every game's outcome, in game order."""

    outcomes: list[GameOutcome]
    metrics: dict[str, float] = field(default_factory=dict)
    """The evaluation's ``eval/…`` metrics."""
    seconds: float = 0.0

    @classmethod
    def of(cls, stats: EvalStats) -> SplitEvaluation:
        return cls(list(stats.outcomes), stats.metrics(), stats.seconds)

    def played(self, family: str | None = None) -> list[GameOutcome]:
        """The games whose environment did not fail (of ``family``)."""
        return [o for o in self.outcomes if not o.crashed and (family is None or o.family == family)]

    def success(self, family: str | None = None) -> float:
        games = self.played(family)
        return float(np.mean([o.won for o in games])) if games else math.nan

    def score(self, family: str | None = None) -> float:
        """100 × the mean episode return (WebShop's score)."""
        games = self.played(family)
        return 100.0 * float(np.mean([o.env_return for o in games])) if games else math.nan

    def invalid_ratio(self) -> float:
        """Invalid actions over all steps of the split's games (``eval/invalid_ratio``)."""
        return float(self.metrics.get("eval/invalid_ratio", math.nan))

    def to_json(self) -> dict[str, Any]:
        return {"metrics": self.metrics, "seconds": self.seconds, "outcomes": GameOutcome.to_columns(self.outcomes)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SplitEvaluation:
        return cls(GameOutcome.from_columns(data["outcomes"]), dict(data["metrics"]), float(data["seconds"]))


@dataclass(frozen=True)
class CurvePoint:
    """A held-out evaluation during training."""

    iteration: int
    env_steps: float
    """Training step rows played up to this iteration."""
    success: float


@dataclass
class RunRecord:
    """A finished (or partial) run of the matrix."""

    config: dict[str, Any]
    """The run's ``TrainConfig`` as a dict."""
    warm_start: str | None
    """Fingerprint of the warm start the run started from (None: not known yet)."""
    final: dict[str, SplitEvaluation] = field(default_factory=dict)
    """Per held-out split, the final policy's evaluation."""
    curve: list[CurvePoint] = field(default_factory=list)
    training: dict[str, list[float]] = field(default_factory=dict)
    """Per ``TRAINING`` key, its value at each training iteration."""
    timing: dict[str, float] = field(default_factory=dict)
    """Mean seconds per iteration of each ``ITERATION_TIMES`` key."""
    iterations: int = 0
    complete: bool = False
    """Trained to its last iteration and evaluated on every split."""

    def finished(self, splits: list[str]) -> bool:
        return self.complete and all(s in self.final for s in splits)

    def to_json(self) -> dict[str, Any]:
        return {"config": self.config, "warm_start": self.warm_start, "complete": self.complete,
                "iterations": self.iterations, "timing": self.timing, "training": self.training,
                "curve": [[p.iteration, p.env_steps, p.success] for p in self.curve],
                "final": {split: ev.to_json() for split, ev in self.final.items()}}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunRecord:
        return cls(config=data["config"], warm_start=data["warm_start"], complete=bool(data["complete"]),
                   iterations=int(data["iterations"]), timing=dict(data["timing"]), training=dict(data["training"]),
                   curve=[CurvePoint(int(i), float(s), float(v)) for i, s, v in data["curve"]],
                   final={split: SplitEvaluation.from_json(ev) for split, ev in data["final"].items()})

    @classmethod
    def from_metrics(cls, metrics: list[dict[str, Any]], config: dict[str, Any], warm_start: str | None,
                     final: dict[str, SplitEvaluation], splits: list[str]) -> RunRecord:
        """The record of a run from its metrics records (``metrics.jsonl``) and final evaluations."""
        steps, curve = 0.0, []
        for m in metrics:
            steps += float(m.get("env/step_rows", 0.0))
            if "eval/success" in m:
                curve.append(CurvePoint(int(m["iteration"]), steps, float(m["eval/success"])))
        trained = [m for m in metrics if m.get("iteration", 0) > 0]
        timing = {k: float(np.mean([m[k] for m in trained if k in m] or [math.nan])) for k in ITERATION_TIMES}
        return cls(config=config, warm_start=warm_start, final=final, curve=curve,
                   training=training_series(metrics), timing=timing,
                   iterations=int(metrics[-1]["iteration"]) if metrics else 0,
                   complete=all(s in final for s in splits))


def training_series(metrics: list[dict[str, Any]], keys: tuple[str, ...] = TRAINING) -> dict[str, list[float]]:
    """Per key, its value at each training iteration (metrics records of iterations that played
    rollouts; evaluation-only records have no ``env/episodes``)."""
    played = [m for m in metrics if "env/episodes" in m]
    return {k: [float(m[k]) for m in played if k in m] for k in keys}


@dataclass
class WarmStartRecord:
    """A seed's warm start: its fingerprint and its evaluation per held-out split."""

    fingerprint: str | None = None
    evaluations: dict[str, SplitEvaluation] = field(default_factory=dict)
    sft_seconds: float | None = None
    """What making it took (SFT's ``sft/seconds``, expert play included); None in records older than it."""

    def to_json(self) -> dict[str, Any]:
        return {"fingerprint": self.fingerprint, "sft_seconds": self.sft_seconds,
                "evaluations": {split: ev.to_json() for split, ev in self.evaluations.items()}}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> WarmStartRecord:
        return cls(data["fingerprint"], {s: SplitEvaluation.from_json(ev) for s, ev in data["evaluations"].items()},
                   data.get("sft_seconds"))


class RecordStore:
    """The records of one comparison, under a directory (module docstring)."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)

    def run_path(self, setting: str, arm: str, seed: int) -> Path:
        return self.directory / setting / f"{_file_name(arm)}-seed{seed}.json"

    def warm_start_path(self, setting: str, seed: int) -> Path:
        return self.directory / setting / f"warm-start-seed{seed}.json"

    def run(self, setting: str, arm: str, seed: int) -> RunRecord | None:
        data = read_json(self.run_path(setting, arm, seed))
        return None if data is None else RunRecord.from_json(data)

    def save_run(self, setting: str, arm: str, seed: int, record: RunRecord) -> Path:
        return write_json(self.run_path(setting, arm, seed), record.to_json(), indent=None)

    def warm_start(self, setting: str, seed: int) -> WarmStartRecord:
        data = read_json(self.warm_start_path(setting, seed))
        return WarmStartRecord() if data is None else WarmStartRecord.from_json(data)

    def save_warm_start(self, setting: str, seed: int, record: WarmStartRecord) -> Path:
        return write_json(self.warm_start_path(setting, seed), record.to_json(), indent=None)


def _file_name(arm: str) -> str:
    """An arm's name as a file name: spaces and unsafe characters become '_' (names stay readable)."""
    safe = "".join(c if c.isalnum() or c in "-_.=+" else "_" for c in arm)
    return safe.strip("_") or "arm"


__all__ = ["TRAINING", "CurvePoint", "RecordStore", "RunRecord", "SplitEvaluation", "WarmStartRecord",
           "training_series"]
