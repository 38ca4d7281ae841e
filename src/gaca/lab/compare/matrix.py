"""A learning comparison, declared before its runs: settings × arms × seeds, and its primary analysis.

    # experiments/<name>/matrix.toml
    seeds = [0, 1, 2]
    eval_splits = ["valid_seen", "eval", "unseen_rooms"]

    [[arms]]                               # an arm is an estimator plus its options
    name = "fixed_mix w0=0.75"
    estimator = "fixed_mix"
    options = { w0 = 0.75 }

    [[settings]]
    name = "tiny-alfworld-choose"
    preset = "tiny-alfworld-choose"

    [analysis]                             # declared before the runs (docs/lab.md)
    endpoint = "success"                   # final success pooled over the held-out splits' games
    contrasts = [["gaca +κ", "fixed_mix w0=0.75"]]
    alternative = "greater"
    margin = 0.015

Run (setting s, arm a, seed k) lives in ``<root>/s/a/seed<k>`` (scratch; the root is given on the
command line, default ``runs/<matrix directory name>``); its config is the setting's preset plus its
overrides plus the arm's ``estimator``, ``advantage.*`` options and ``config_overrides``, ``seed=k`` and the lab's own
settings (one thread, no progress bar, the shared warm-start cache ``<root>/warm-start``). Every arm
of a seed starts from the same warm-start policy and is evaluated on the same held-out games with
the same sampling stream: the differences between arms are paired. Records (``records/`` next to the
matrix file) are what is committed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from gaca import validate
from gaca.advantage import ESTIMATORS, AdvantageOptions
from gaca.config import ConfigError, apply_overrides, from_dict, read_toml
from gaca.lab.compare.records import TRAINING, RecordStore, _file_name
from gaca.train.config import TrainConfig, load_config
from gaca.train.warm_start import warm_start_key

#: Overrides every run of a matrix gets (runs go two at a time on a 2-core machine).
LAB_OVERRIDES = ("threads=1", "progress=false", "trackers=[]")
#: Config keys an arm's ``config_overrides`` may not set: its own fields and the matrix's and lab's settings.
_ARM_OWNED = ("estimator", "advantage")
_LAB_OWNED = ("seed", "out_dir", "sft.cache_dir", "threads", "progress", "trackers")
#: What a matrix's primary analysis can test (``gaca.lab.compare.analysis.ENDPOINTS``).
Endpoint = Literal["success", "score"]


@dataclass
class ArmSpec:
    """One arm: an estimator and the advantage options it changes."""
    name: str
    """Names the arm's runs, records and rows (unique within the matrix)."""
    estimator: str
    """A registered estimator (``gaca.advantage.ESTIMATORS``)."""
    options: dict[str, Any] = field(default_factory=dict)
    """``[advantage]`` options of this arm (on top of the setting's), e.g. ``{w0 = 0.75, kappa = -0.5}``."""
    seeds: list[int] = field(default_factory=list)
    """The seeds this arm runs (empty: every seed of the matrix); a reference arm may run a subset."""
    config_overrides: dict[str, Any] = field(default_factory=dict)
    """Training-config settings of this arm beyond its estimator (dotted keys), e.g.
    ``{ "ppo.entropy_coef" = 0.01 }`` for a control that changes the training rather than the credit (an
    entropy bonus matched to another arm's uncertainty). They may not change the seed's warm start (checked
    when the matrix is loaded: the arms of a seed must pair) nor name what the arm's other fields or the
    lab set (``estimator``, ``advantage.*``, ``seed``, ``out_dir``, ``threads``, ...)."""
    note: str = ""
    """What the arm is for (shown in the report), e.g. "anti-GACA control: κ < 0"."""
    def __post_init__(self) -> None:

        ESTIMATORS.check(self.estimator, f"arms[{self.name!r}].estimator")
        AdvantageOptions(**self.options)  # every option known and in range, now
        owned = [k for k in self.config_overrides if k.split(".")[0] in _ARM_OWNED or k in _LAB_OWNED]
        if owned:
            raise ValueError(f"arms[{self.name!r}].config_overrides may not set {owned}: the estimator and "
                             "its options are the arm's own fields, the rest the matrix's or the lab's")

    def overrides(self) -> list[str]:
        return [f"estimator={json.dumps(self.estimator)}",
                *(f"advantage.{k}={json.dumps(v)}" for k, v in self.options.items()),
                *(f"{k}={json.dumps(v)}" for k, v in self.config_overrides.items())]


@dataclass
class SettingSpec:
    """One training setting of the matrix."""
    name: str
    """Names the setting's directory and its rows in the report."""
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
class SecondaryContrast:
    """A contrast declared after some of the matrix's runs had finished (e.g. to test on fresh seeds what
    the first seeds suggested): tested only on ``seeds``, which must be seeds none of whose runs had
    started when it was declared (the commit that adds it shows when), Holm-adjusted as a family of its
    own, and never part of the primary verdict."""
    treatment: str
    control: str
    seeds: list[int]
    """The seeds it is tested on; its verdict waits for all of them."""
    declared: str
    """When, and after which seeds' results, it was declared (shown in the report)."""
    endpoint: str = "success"
    """``success`` or ``score`` as the primary endpoint; or a training series the records keep
    (``gaca.lab.compare.records.TRAINING``, e.g. ``policy/nll``): its mean over the run's last 10 iterations."""
    alternative: Literal["greater", "two-sided"] = "greater"
    """``greater``: the treatment is expected ahead (higher); ``two-sided``."""
    @property
    def key(self) -> tuple[str, str, str, tuple[int, ...]]:
        """What identifies the declaration: its arms, endpoint and seeds (two may differ in seeds only)."""
        return self.treatment, self.control, self.endpoint, tuple(sorted(self.seeds))

    def __post_init__(self) -> None:
        validate.literal_fields(self)
        validate.choice("endpoint", self.endpoint, ["success", "score", *TRAINING])
        if self.treatment == self.control or not self.seeds or not self.declared.strip():
            raise ValueError("a secondary contrast names two different arms, its seeds and "
                             f"when it was declared; got {self.treatment!r} − {self.control!r}, seeds {self.seeds}, "
                             f"declared {self.declared!r}")


@dataclass
class AnalysisSpec:
    """The primary analysis, declared before the runs (``gaca.lab.compare.analysis``)."""
    endpoint: Endpoint = "success"
    """Per (arm, seed): ``success``, the final policy's success over every game of every held-out split
    pooled; ``score``, 100 × its mean return (WebShop)."""
    contrasts: list[list[str]] = field(default_factory=list)
    """[treatment arm, control arm] pairs; each is tested over the seeds both finished, paired by seed."""
    alternative: Literal["greater", "two-sided"] = "greater"
    """``greater``: the treatment is expected ahead (one-sided tests); ``two-sided``."""
    margin: float = 0.0
    """δ of the equivalence test (TOST at ±δ, in endpoint units; 0: no equivalence test)."""
    alpha: float = 0.05
    """Level of every test; the contrasts' p-values are Holm-adjusted as one family."""
    declared_before_runs: bool = True
    """False for an analysis written after its runs (e.g. a migrated comparison): the report then calls
    its tests descriptive, not confirmatory."""
    equivalent_by_construction: list[list[str]] = field(default_factory=list)
    """Arm pairs that are one algorithm (e.g. gigpo and fixed_mix w0=0.5: the same advantages up to a
    constant scale on every row with a peer): their difference is an A/A noise floor."""
    secondary: list[SecondaryContrast] = field(default_factory=list)
    """Contrasts declared after some runs, on seeds not run then (``[[analysis.secondary]]``)."""
    def __post_init__(self) -> None:
        validate.literal_fields(self, "analysis.")
        validate.number("analysis.margin", self.margin, 0.0)
        validate.number("analysis.alpha", self.alpha, 0.0, 0.5, lo_open=True, hi_open=True)
        for pair in [*self.contrasts, *self.equivalent_by_construction]:
            if len(pair) != 2 or pair[0] == pair[1]:
                raise ValueError(f"analysis: a contrast or pair names two different arms, got {pair}")
        keys = [c.key for c in self.secondary]
        twice = sorted({k for k in keys if keys.count(k) > 1})
        if twice:
            treatment, control, endpoint, seeds = twice[0]
            raise ValueError(f"analysis.secondary declares {treatment!r} − {control!r} on {endpoint!r} with seeds "
                             f"{list(seeds)} twice")


@dataclass
class CompareMatrix:
    """The declared comparison (module docstring)."""
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    """Seeds; a seed fixes the warm start, the games drawn, the sampling and the evaluation stream."""
    eval_splits: list[str] = field(default_factory=lambda: ["valid_seen", "eval", "unseen_rooms"])
    """Held-out splits every final policy (and every warm start) is evaluated on."""
    parallel: int = 2
    """Runs at a time (each with one thread)."""
    arms: list[ArmSpec] = field(default_factory=list)
    """The arms (``[[arms]]`` tables)."""
    settings: list[SettingSpec] = field(default_factory=list)
    """The settings (``[[settings]]`` tables)."""
    analysis: AnalysisSpec = field(default_factory=AnalysisSpec)
    """The primary analysis (``[analysis]``)."""
    directory: str = "."
    """The matrix file's directory: relative config paths and the records (``records/``) are there."""
    root: str = ""
    """Scratch directory of the runs and the warm-start cache (never committed); '' means
    ``runs/<name of the matrix's directory>``. A command-line setting, not a matrix-file key."""
    def __post_init__(self) -> None:
        validate.integer("parallel", self.parallel, 1)
        if not self.settings or not self.arms or not self.seeds or not self.eval_splits:
            raise ValueError("a matrix needs at least one setting, arm, seed and eval split")
        for what, names in (("setting", [s.name for s in self.settings]), ("arm", [a.name for a in self.arms]),
                            ("arm file", [_file_name(a.name) for a in self.arms])):
            if len(set(names)) != len(names):
                raise ValueError(f"{what} names must be distinct, got {names}")
        arms = {a.name for a in self.arms}
        for arm in self.arms:
            if not set(arm.seeds) <= set(self.seeds):
                raise ValueError(f"arms[{arm.name!r}].seeds must be seeds of the matrix {self.seeds}, got {arm.seeds}")
        secondary = [[c.treatment, c.control] for c in self.analysis.secondary]
        for pair in [*self.analysis.contrasts, *self.analysis.equivalent_by_construction, *secondary]:
            unknown = [a for a in pair if a not in arms]
            if unknown:
                raise ValueError(f"analysis names arms that are not in the matrix: {unknown}; arms: {sorted(arms)}")
        for c in self.analysis.secondary:
            both = set(self.seeds_of(self.arm(c.treatment))) & set(self.seeds_of(self.arm(c.control)))
            if not set(c.seeds) <= both:
                raise ValueError(f"analysis.secondary {c.treatment!r} − {c.control!r}: seeds "
                                 f"{sorted(set(c.seeds) - both)} are not run by both arms")

    @property
    def root_dir(self) -> Path:
        return Path(self.root) if self.root else Path("runs") / Path(self.directory).resolve().name

    @property
    def warm_start_dir(self) -> Path:
        return self.root_dir / "warm-start"

    @property
    def store(self) -> RecordStore:
        return RecordStore(Path(self.directory) / "records")

    def splits_of(self, setting: SettingSpec) -> list[str]:
        """The held-out splits a setting's runs are evaluated on."""
        return list(setting.eval_splits or self.eval_splits)

    def seeds_of(self, arm: ArmSpec) -> list[int]:
        return list(arm.seeds or self.seeds)

    def arm(self, name: str) -> ArmSpec:
        return next(a for a in self.arms if a.name == name)

    def runs(self) -> list[RunSpec]:
        """Every run, in the order the scheduler starts them: within a setting, first the arms declared
        on every seed (the primary contrasts, so that an interrupted matrix has as many complete paired
        seeds as its time allowed), then the arms declared on fewer seeds; seed-major within each (so that
        a seed's warm start is paid first)."""
        def order(arm: ArmSpec) -> int:
            return 0 if set(self.seeds) <= set(self.seeds_of(arm)) else 1

        return [RunSpec(self, s, a, k) for s in self.settings for rank in (0, 1) for k in self.seeds
                for a in self.arms if order(a) == rank and k in self.seeds_of(a)]


@dataclass(frozen=True)
class RunSpec:
    """One run of the matrix."""
    matrix: CompareMatrix
    setting: SettingSpec
    arm: ArmSpec
    seed: int

    @property
    def name(self) -> str:
        return f"{self.setting.name}/{self.arm.name}/seed{self.seed}"

    @property
    def out_dir(self) -> Path:
        return self.matrix.root_dir / self.setting.name / _file_name(self.arm.name) / f"seed{self.seed}"

    @property
    def eval_splits(self) -> list[str]:
        return self.matrix.splits_of(self.setting)

    def overrides(self) -> list[str]:
        cache = json.dumps(str(self.matrix.warm_start_dir))
        return [*self.setting.overrides, *self.arm.overrides(), f"seed={self.seed}",
                f"out_dir={json.dumps(str(self.out_dir))}", f"sft.cache_dir={cache}", *LAB_OVERRIDES]

    def config(self) -> TrainConfig:
        """The run's validated ``TrainConfig``."""

        path = Path(self.matrix.directory) / self.setting.config if self.setting.config else None
        return load_config(path, self.overrides(), preset=self.setting.preset or None)

    def record(self) -> Any:
        return self.matrix.store.run(self.setting.name, self.arm.name, self.seed)

    def save_record(self, record: Any) -> Path:
        return self.matrix.store.save_run(self.setting.name, self.arm.name, self.seed, record)


#: ``gaca lab compare --quick``: two runs of two iterations of a very small model (the test suite's).
QUICK_OVERRIDES = (
    "iterations=2", "policy.tiny_hidden=32", "policy.tiny_layers=1", "policy.tiny_heads=2", "policy.tiny_vocab=400",
    "env.num_train_games=4", "env.num_eval_games=4", "env.num_workers=0", "env.max_steps=4",
    "env.generator.max_receptacles=4", "env.generator.num_distractors=2", "rollout.group_size=2",
    "rollout.tasks_per_iter=2", "rollout.max_new_tokens=8", "sft.episodes=4", "sft.steps=4", "sft.batch_size=4",
    "eval.batch_size=4", "eval.every=1", "ppo.micro_batch_size=8", "checkpoint_every=1",
)


def quick_matrix(directory: str | Path, root: str | Path = "") -> CompareMatrix:
    """Two tiny runs (grpo and gaca, one seed) of two iterations; records under ``directory``."""
    setting = SettingSpec(name="quick", preset="tiny-alfworld", overrides=list(QUICK_OVERRIDES))
    return CompareMatrix(arms=[ArmSpec("grpo", "grpo"), ArmSpec("gaca", "gaca")], seeds=[0],
                         eval_splits=["valid_seen", "unseen_rooms"], parallel=2, settings=[setting],
                         analysis=AnalysisSpec(contrasts=[["gaca", "grpo"]]), directory=str(directory),
                         root=str(root))


def load_matrix(path: str | Path, overrides: list[str] | None = None, *, root: str = "") -> CompareMatrix:
    """Read a matrix TOML, apply ``key=value`` overrides of its keys (e.g. ``seeds=[0,1,2,3,4]``),
    validate it; ``root`` is the scratch directory of its runs."""
    path = Path(path)
    data = apply_overrides(read_toml(path), list(overrides or []))
    for key in ("directory", "root"):
        if key in data:
            raise ConfigError(f"{path}: '{key}' is not a matrix-file key (it is where the file is, and the "
                              "command line's --root)")
    data.update(directory=str(path.parent), root=str(root))
    try:
        matrix = from_dict(CompareMatrix, data)
        check_run_configs(matrix)
    except ConfigError as e:
        raise ConfigError(f"{path}: {e}") from e
    return matrix


def check_run_configs(matrix: CompareMatrix) -> None:
    """Load the config of each (setting, arm), so that a bad value fails when the matrix
    is loaded rather than in a worker; and refuse arms of a setting whose warm starts differ (their runs
    would not pair)."""
    for setting in matrix.settings:
        keys: dict[str, str] = {}
        for arm in matrix.arms:
            try:  # at one seed for every arm: the warm start depends on the seed
                cfg = RunSpec(matrix, setting, arm, matrix.seeds[0]).config()
            except (ConfigError, ValueError) as e:
                raise ConfigError(f"setting {setting.name!r}, arm {arm.name!r}: {e}") from e
            keys[arm.name] = warm_start_key(cfg)
        if len(set(keys.values())) > 1:
            raise ConfigError(f"setting {setting.name!r}: the arms' configs give different warm starts "
                              f"({keys}); an arm's config_overrides may change the training, not the warm start")


def run_spec_json(run: RunSpec, matrix_file: str, overrides: list[str]) -> dict[str, Any]:
    """What the worker needs to rebuild ``run``: the matrix file ("" for ``quick_matrix``) and the
    overrides it was loaded with, the scratch root, and which (setting, arm, seed)."""
    m = run.matrix
    return {"matrix": matrix_file, "overrides": list(overrides), "directory": m.directory, "root": str(m.root_dir),
            "setting": run.setting.name, "arm": run.arm.name, "seed": run.seed}


def load_run(spec: dict[str, Any], overrides: list[str] | None = None) -> RunSpec:
    """The ``RunSpec`` a worker's JSON names."""
    matrix: CompareMatrix = (load_matrix(spec["matrix"], overrides, root=spec["root"]) if spec["matrix"]
                             else quick_matrix(spec["directory"], spec["root"]))
    setting = next(s for s in matrix.settings if s.name == spec["setting"])
    return RunSpec(matrix, setting, matrix.arm(spec["arm"]), int(spec["seed"]))


__all__ = ["LAB_OVERRIDES", "QUICK_OVERRIDES", "AnalysisSpec", "ArmSpec", "CompareMatrix", "Endpoint", "RunSpec",
           "SecondaryContrast", "SettingSpec", "check_run_configs", "load_matrix", "load_run", "quick_matrix",
           "run_spec_json"]
