"""A learning comparison, declared: settings × estimators × seeds, each run an ordinary run directory.

    [matrix]                      # gaca/configs/lab/compare.toml
    root = "runs/compare"
    estimators = ["grpo", "rloo", "gigpo", "fixed_mix", "gaca"]
    seeds = [0, 1, 2]
    eval_splits = ["valid_seen", "eval", "unseen_rooms"]

    [[settings]]
    name = "tiny-alfworld"
    preset = "tiny-alfworld"
    overrides = []

Run (setting s, estimator e, seed k) lives in ``root/s/e/seed<k>``: its config is the setting's
preset plus its overrides plus ``estimator=e seed=k`` and the lab's own settings (one thread, no
progress bar, the shared warm-start cache ``root/warmstart``). Every estimator of a seed therefore
starts from the same warm-start policy and is evaluated on the same held-out games with the same
sampling stream: the differences between estimators are paired.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gaca import validate
from gaca.config import ConfigError, from_dict, read_toml

#: Overrides every run of a matrix gets (runs go two at a time on a 2-core machine).
LAB_OVERRIDES = ("threads=1", "progress=false", "tensorboard=false")


@dataclass
class SettingSpec:
    """One training setting of the matrix."""

    name: str
    """Names the setting's directory under ``root`` and its rows in the report."""
    preset: str = ""
    """A shipped preset (``gaca presets``); or give ``config``."""
    config: str = ""
    """A TOML config file (relative to the matrix file); or give ``preset``."""
    overrides: list[str] = field(default_factory=list)
    """``key=value`` overrides on top of the preset or file, for every run of the setting."""
    eval_splits: list[str] = field(default_factory=list)
    """Held-out splits of this setting (empty: the matrix's ``eval_splits``; WebShop has only ``eval``)."""

    def __post_init__(self) -> None:
        if bool(self.preset) == bool(self.config):
            raise ValueError(f"setting {self.name!r}: give exactly one of preset or config")


@dataclass
class CompareMatrix:
    """The declared comparison (module docstring)."""

    root: str = "runs/compare"
    """Directory of every run (``root/<setting>/<estimator>/seed<k>``), the warm-start cache, logs:
    scratch space, megabytes per run."""
    records: str = ""
    """Directory of the runs' records (``gaca.lab.records``: ~100 kB per run, all the report needs),
    relative to the matrix file. Commit it: a run with a complete record is finished even when
    ``root`` is gone. Empty: ``<root>/records``."""
    warmstart: str = ""
    """Directory of the warm-start cache (one policy per setting and seed, ~8 MB for ``tiny``), relative
    to the matrix file. Empty: ``<root>/warmstart``. Keep it where it outlives ``root`` when a seed's
    runs span machines: SFT recomputed on another kind of CPU ends a few bits apart, and runs from it
    do not pair with the seed's earlier ones (``gaca.lab.records``)."""
    estimators: list[str] = field(default_factory=lambda: ["grpo", "rloo", "gigpo", "fixed_mix", "gaca"])
    """Estimators compared, each at its default options (the same for every setting)."""
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    """Seeds; a seed fixes the warm start, the games drawn, the sampling and the evaluation stream."""
    eval_splits: list[str] = field(default_factory=lambda: ["valid_seen", "eval", "unseen_rooms"])
    """Held-out splits every final policy (and every warm start) is evaluated on."""
    parallel: int = 2
    """Runs at a time (each with one thread)."""
    settings: list[SettingSpec] = field(default_factory=list)
    """The settings (``[[settings]]`` tables)."""
    base_dir: str = "."
    """Where relative config paths are resolved (the matrix file's directory)."""

    def __post_init__(self) -> None:
        from gaca.advantage import ESTIMATORS

        for name in self.estimators:
            ESTIMATORS.check(name, "estimators")
        validate.integer("parallel", self.parallel, 1)
        if not self.settings or not self.estimators or not self.seeds or not self.eval_splits:
            raise ValueError("a matrix needs at least one setting, estimator, seed and eval split")
        names = [s.name for s in self.settings]
        if len(set(names)) != len(names):
            raise ValueError(f"setting names must be distinct, got {names}")

    def splits_of(self, setting: SettingSpec) -> list[str]:
        """The held-out splits a setting's runs are evaluated on."""
        return list(setting.eval_splits or self.eval_splits)

    def _directory(self, value: str, default: str) -> Path:
        """``value`` relative to the matrix file; ``<root>/<default>`` when empty."""
        if not value:
            return Path(self.root) / default
        return Path(value) if Path(value).is_absolute() else Path(self.base_dir) / value

    @property
    def warmstart_dir(self) -> Path:
        return self._directory(self.warmstart, "warmstart")

    @property
    def records_dir(self) -> Path:
        return self._directory(self.records, "records")

    def warmstart_record_path(self, setting: str, seed: int) -> Path:
        """The record of a seed's warm-start evaluation (shared by the setting's estimators)."""
        return self.records_dir / setting / f"warmstart-seed{seed}.json"

    def runs(self) -> list[RunSpec]:
        """Every run, seed-major within a setting (so that a seed's warm start is paid first)."""
        return [RunSpec(self, s, e, k) for s in self.settings for k in self.seeds for e in self.estimators]


@dataclass(frozen=True)
class RunSpec:
    """One run of the matrix."""

    matrix: CompareMatrix
    setting: SettingSpec
    estimator: str
    seed: int

    @property
    def name(self) -> str:
        return f"{self.setting.name}/{self.estimator}/seed{self.seed}"

    @property
    def out_dir(self) -> Path:
        return Path(self.matrix.root) / self.setting.name / self.estimator / f"seed{self.seed}"

    @property
    def record_path(self) -> Path:
        return self.matrix.records_dir / self.setting.name / f"{self.estimator}-seed{self.seed}.json"

    @property
    def eval_splits(self) -> list[str]:
        return self.matrix.splits_of(self.setting)

    def overrides(self) -> list[str]:
        cache = json.dumps(str(self.matrix.warmstart_dir))
        return [*self.setting.overrides, f"estimator={json.dumps(self.estimator)}", f"seed={self.seed}",
                f"out_dir={json.dumps(str(self.out_dir))}", f"sft.cache_dir={cache}", *LAB_OVERRIDES]

    def config(self) -> Any:
        """The run's validated ``TrainConfig``."""
        from gaca.train.config import load_config

        path = Path(self.matrix.base_dir) / self.setting.config if self.setting.config else None
        return load_config(path, self.overrides(), preset=self.setting.preset or None)

    def to_json(self) -> dict[str, Any]:
        """What the run's worker process needs (``gaca.lab.compare.run_one``)."""
        cfg_path = str(Path(self.matrix.base_dir) / self.setting.config) if self.setting.config else ""
        return {"name": self.name, "preset": self.setting.preset, "config": cfg_path, "overrides": self.overrides(),
                "eval_splits": self.eval_splits, "record": str(self.record_path),
                "warmstart_record": str(self.matrix.warmstart_record_path(self.setting.name, self.seed))}


#: ``gaca lab compare --quick``: two runs of two iterations of a very small model (the test suite's).
QUICK_OVERRIDES = (
    "iterations=2", "policy.tiny_hidden=32", "policy.tiny_layers=1", "policy.tiny_heads=2", "policy.tiny_vocab=400",
    "env.num_train_games=4", "env.num_eval_games=4", "env.num_workers=0", "env.max_steps=4",
    "env.generator.max_receptacles=4", "env.generator.num_distractors=2", "rollout.group_size=2",
    "rollout.tasks_per_iter=2", "rollout.max_new_tokens=8", "sft.episodes=4", "sft.steps=4", "sft.batch_size=4",
    "eval.batch_size=4", "eval.every=1", "ppo.micro_batch_size=8", "checkpoint_every=1",
)


def quick_matrix(root: str | Path) -> CompareMatrix:
    """Two tiny runs (grpo and gaca, one seed) of two iterations under ``root``."""
    setting = SettingSpec(name="quick", preset="tiny-alfworld", overrides=list(QUICK_OVERRIDES))
    return CompareMatrix(root=str(root), estimators=["grpo", "gaca"], seeds=[0],
                         eval_splits=["valid_seen", "unseen_rooms"], parallel=2, settings=[setting])


def load_matrix(path: str | Path | None = None, overrides: list[str] | None = None) -> CompareMatrix:
    """Read a matrix TOML (default: the shipped ``gaca/configs/lab/compare.toml``), apply ``key=value``
    overrides of its top-level keys (e.g. ``seeds=[0,1,2,3,4]``), validate it."""
    from gaca.config import apply_overrides

    if path is None:
        import importlib.resources

        path = Path(str(importlib.resources.files("gaca") / "configs" / "lab" / "compare.toml"))
    data = apply_overrides(read_toml(path), list(overrides or []))
    data.setdefault("base_dir", str(Path(path).parent))
    try:
        return from_dict(CompareMatrix, data)
    except ConfigError as e:
        raise ConfigError(f"{path}: {e}") from e


__all__ = ["LAB_OVERRIDES", "QUICK_OVERRIDES", "CompareMatrix", "RunSpec", "SettingSpec", "load_matrix",
           "quick_matrix"]
