"""The comparison's numbers, typed: per-split tables, and the declared contrasts tested over seeds.

Every arm of a seed starts from the seed's warm start and is evaluated on the same games with the
same sampling stream, so everything here is paired by seed (and by game within a seed).

- Tables (``SplitTable``): per held-out split, each arm's (and the warm start's) success over all
  games and per task family, its invalid-action ratio and, where returns carry partial credit, its
  score; mean ± sd over the seeds on which every arm finished that was declared on them, among the
  arms with a finished run (a mean over other seeds would compare seeds, which differ far more than
  arms do; an arm not started yet does not empty the table). The arms declared on every seed set those
  seeds; a reference arm declared on fewer shows its finished seeds among them and, finished or not,
  does not shrink the others'.
- The primary analysis (``ContrastResult``), as declared in the matrix before the runs: the endpoint
  of (arm, seed) pooled over every game of every held-out split; for each contrast the per-seed
  differences d_s = endpoint(treatment) − endpoint(control), tested with a paired t test and an
  exact sign-flip permutation test over seeds (one-sided where declared), the exact sign test beside
  them, Holm-adjusted as one family over the matrix's contrasts; an equivalence test (TOST) at the
  declared margin; the minimum difference the seeds could detect (80% power); and an interval over
  seeds and games crossed (every seed plays the same games).
- Pairs of arms that are one algorithm by construction are reported as the A/A noise floor.
- Secondary contrasts (``matrix.SecondaryContrast``), declared after some runs: the same tests on
  their own seeds and endpoint (which may be a training series' end value), Holm-adjusted as their
  own family, no equivalence test.
- The endpoint per seed (``seed_endpoints``): what each paired difference is made of, the warm start's
  beside the arms'.
- What is left (``left_to_run``) and what the runs cost, done and left (``Cost``), from the finished runs'
  measured time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from gaca.lab import stats
from gaca.lab.compare.matrix import CompareMatrix, RunSpec, SettingSpec
from gaca.lab.compare.records import RunRecord, SplitEvaluation, WarmStartRecord
from gaca.train.timing import ITERATION_TIMES

WARM_START = "warm start"
#: A training-series endpoint is the series' mean over the run's last this many iterations.
SERIES_END_ITERATIONS = 10


@dataclass
class SettingRecords:
    """What the records of one setting hold: per arm and seed the run, per seed the warm start."""

    runs: dict[str, dict[int, RunRecord]] = field(default_factory=dict)
    warm: dict[int, WarmStartRecord] = field(default_factory=dict)
    not_comparable: dict[str, tuple[str | None, str | None]] = field(default_factory=dict)
    """Run name -> (its warm start, its seed's): finished from another warm start, left out."""


def collect(matrix: CompareMatrix) -> dict[str, SettingRecords]:
    """Every record of the matrix that exists, per setting (finished runs and partial ones)."""
    store = matrix.store
    out: dict[str, SettingRecords] = {}
    for run in matrix.runs():
        record = run.record()
        entry = out.setdefault(run.setting.name, SettingRecords())
        warm = store.warm_start(run.setting.name, run.seed)
        if warm.evaluations:
            entry.warm[run.seed] = warm
        if record is None:
            continue
        if warm.fingerprint is not None and record.warm_start != warm.fingerprint:
            entry.not_comparable[run.name] = (record.warm_start, warm.fingerprint)
            continue
        entry.runs.setdefault(run.arm.name, {})[run.seed] = record
    return out


@dataclass
class Row:
    """One arm's row of a split's table: per seed, in ``seeds`` order."""

    seeds: list[int]
    success: list[float]
    invalid: list[float]
    score: list[float]
    """Empty unless the split's returns carry partial credit."""
    families: dict[str, list[float]]


@dataclass
class SplitTable:
    split: str
    families: list[str]
    graded: bool
    """Returns carry partial credit (WebShop's score): the table has a score column."""
    rows: dict[str, Row]
    """Arm (and ``WARM_START``) -> row."""
    common_seeds: list[int]
    left_out: dict[str, list[int]]
    """Arm -> seeds it finished that not every arm declared on them did (kept out of the means)."""


def _row(evaluations: dict[int, SplitEvaluation], families: list[str], graded: bool) -> Row:
    seeds = sorted(evaluations)
    evs = [evaluations[s] for s in seeds]
    return Row(seeds=seeds, success=[e.success() for e in evs], invalid=[e.invalid_ratio() for e in evs],
               score=[e.score() for e in evs] if graded else [],
               families={f: [e.success(f) for e in evs] for f in families})


def split_table(matrix: CompareMatrix, records: SettingRecords, split: str) -> SplitTable:
    """The table of one held-out split (module docstring)."""
    finals = {arm.name: {s: r.final[split] for s, r in records.runs.get(arm.name, {}).items() if split in r.final}
              for arm in matrix.arms}
    started = {a: set(v) for a, v in finals.items() if v}
    declared = {arm.name: set(matrix.seeds_of(arm)) for arm in matrix.arms}
    # the seeds are set by the arms declared on every seed; a reference arm on fewer seeds, half run, must
    # not take the others' seeds out of the means (its row keeps its finished seeds among them)
    anchors = {a: done for a, done in started.items() if declared[a] >= set(matrix.seeds)} or started
    common = sorted(s for s in set().union(*anchors.values())
                    if all(s in done for a, done in anchors.items() if s in declared[a]))
    left_out = {a: extra for a, v in finals.items() if common and (extra := sorted(set(v) - set(common)))}
    if common:
        finals = {a: {s: e for s, e in v.items() if s in common} for a, v in finals.items()}
    warm = {s: w.evaluations[split] for s, w in records.warm.items()
            if split in w.evaluations and (not common or s in common)}
    evaluations = [e for v in finals.values() for e in v.values()] + list(warm.values())
    families = sorted({o.family for e in evaluations for o in e.outcomes})
    graded = any(not o.won and o.env_return != 0.0 for e in evaluations for o in e.outcomes)
    rows = {a: _row(v, families, graded) for a, v in finals.items()}
    rows[WARM_START] = _row(warm, families, graded)
    return SplitTable(split, families, graded, rows, common, left_out)


def endpoint(record: RunRecord, splits: list[str], kind: str) -> float:
    """The endpoint of one run: success (or 100 × return) over every game of ``splits`` pooled; for a
    training series' name (``records.TRAINING``), its mean over the last ``SERIES_END_ITERATIONS``."""
    if kind not in ("success", "score"):
        return series_end(record.training.get(kind, []))
    return pooled_endpoint(record.final, splits, kind)


def series_end(series: list[float] | np.ndarray, iterations: int = SERIES_END_ITERATIONS) -> float:
    """A training series' end value: its mean over the last ``iterations`` (NaN when empty)."""
    return float(np.nanmean(series[-iterations:])) if len(series) else math.nan


def pooled_endpoint(evaluations: dict[str, SplitEvaluation], splits: list[str], kind: str) -> float:
    """Success (or 100 × return) over every game of ``splits`` pooled, from one policy's evaluations."""
    games = [o for split in splits for o in evaluations[split].played()]
    if not games:
        return math.nan
    return float(np.mean([o.won for o in games])) if kind == "success" else \
        100.0 * float(np.mean([o.env_return for o in games]))


def game_matrix(runs: dict[int, RunRecord], seeds: list[int], splits: list[str], kind: str) -> np.ndarray:
    """[seeds, games] per-game endpoint values (every game of every split, in order; crashed games NaN)."""
    def value(o) -> float:
        if o.crashed:
            return math.nan
        return float(o.won) if kind == "success" else 100.0 * o.env_return

    return np.array([[value(o) for split in splits for o in runs[s].final[split].outcomes] for s in seeds])


@dataclass
class ContrastResult:
    """One declared contrast of one setting (module docstring)."""

    setting: str
    treatment: str
    control: str
    seeds: list[int]
    differences: list[float]
    """d_s per seed."""
    mean: float
    sd: float
    t_test: stats.PairedT
    t_p: float
    """The t test's p in the declared alternative (one-sided "greater", or two-sided)."""
    permutation_p: float
    """Exact sign-flip permutation test of the mean difference (all 2^n sign vectors for n ≤ 20)."""
    sign_test: stats.SignTest
    alpha: float = 0.05
    holm_p: float = math.nan
    """The permutation test's p, Holm-adjusted over the matrix's contrasts."""
    tost: stats.Tost | None = None
    detectable: float = math.nan
    """Minimum difference detectable with 80% power at the declared α from these seeds' sd."""
    crossed: tuple[float, float] = (math.nan, math.nan)
    """95% interval of the mean difference, seeds and games resampled crossed."""
    per_split: dict[str, float] = field(default_factory=dict)
    """Mean per-seed difference on each split (descriptive)."""
    declared_seeds: list[int] = field(default_factory=list)
    """The seeds the matrix declares for both arms; the verdict waits for all of them."""
    endpoint: str = "success"
    declared: str = ""
    """For a secondary contrast, when it was declared (``SecondaryContrast.declared``)."""

    @property
    def interim(self) -> bool:
        """Fewer seeds finished than declared: the tests are a look, not the answer."""
        return len(self.seeds) < len(self.declared_seeds)

    @property
    def verdict(self) -> str:
        """"ahead", "behind", "level (equivalent within ±δ)" or "inconclusive", at the declared α, once every
        declared seed is in; before that "none yet (k of n seeds)": reading the verdict at every look and
        stopping at the first "ahead" would raise the false-positive rate above α."""
        if self.interim:
            return f"none yet ({len(self.seeds)} of {len(self.declared_seeds)} seeds)"
        if self.holm_p < self.alpha:
            return "ahead" if self.mean > 0 else "behind"
        if self.tost is not None and self.tost.equivalent:
            return f"level (equivalent within ±{self.tost.margin:g})"
        return "inconclusive"


def contrasts(matrix: CompareMatrix, data: dict[str, SettingRecords]) -> list[ContrastResult]:
    """The primary analysis of every setting and declared contrast (Holm over all of them)."""
    spec = matrix.analysis
    out: list[ContrastResult] = []
    for setting in matrix.settings:
        records = data.get(setting.name, SettingRecords())
        splits = matrix.splits_of(setting)
        for treatment, control in spec.contrasts:
            a, b = records.runs.get(treatment, {}), records.runs.get(control, {})
            seeds = sorted(s for s in a if s in b and a[s].finished(splits) and b[s].finished(splits))
            if not seeds:
                continue
            result = _contrast(matrix, setting, treatment, control, seeds, a, b, splits)
            result.declared_seeds = sorted(set(matrix.seeds_of(matrix.arm(treatment)))
                                           & set(matrix.seeds_of(matrix.arm(control))))
            out.append(result)
    _holm(out)
    return out


def secondary_contrasts(matrix: CompareMatrix, data: dict[str, SettingRecords]) -> list[ContrastResult]:
    """The secondary contrasts of every setting, on their own seeds (Holm over them, apart from the primary)."""
    out: list[ContrastResult] = []
    for setting in matrix.settings:
        records = data.get(setting.name, SettingRecords())
        splits = matrix.splits_of(setting)
        for spec in matrix.analysis.secondary:
            a, b = records.runs.get(spec.treatment, {}), records.runs.get(spec.control, {})
            seeds = sorted(s for s in spec.seeds if s in a and s in b and a[s].finished(splits)
                           and b[s].finished(splits))
            if not seeds:
                continue
            result = _contrast(matrix, setting, spec.treatment, spec.control, seeds, a, b, splits,
                               kind=spec.endpoint, alternative=spec.alternative, margin=0.0)
            result.declared_seeds, result.declared = sorted(spec.seeds), spec.declared
            out.append(result)
    _holm(out)
    return out


def _holm(results: list[ContrastResult]) -> None:
    for c, p in zip(results, stats.holm([c.permutation_p for c in results]), strict=True):
        c.holm_p = float(p)


def _contrast(matrix: CompareMatrix, setting: SettingSpec, treatment: str, control: str, seeds: list[int],
              a: dict[int, RunRecord], b: dict[int, RunRecord], splits: list[str], *, kind: str | None = None,
              alternative: str | None = None, margin: float | None = None) -> ContrastResult:
    spec = matrix.analysis
    kind = spec.endpoint if kind is None else kind
    alternative = spec.alternative if alternative is None else alternative
    margin = spec.margin if margin is None else margin
    two_sided = alternative == "two-sided"
    d = np.array([endpoint(a[s], splits, kind) - endpoint(b[s], splits, kind) for s in seeds])
    t_test = stats.paired_t(d, alternative="greater", alpha=spec.alpha)
    perm = stats.sign_flip_test(d, alternative=alternative, rng=np.random.default_rng(0))
    sign = stats.sign_test(d, alternative=alternative)
    tost = stats.tost(d, margin, alpha=spec.alpha) if margin > 0 else None
    sd = float(np.std(d, ddof=1)) if len(d) > 1 else math.nan
    detectable = stats.minimum_detectable_difference(len(d), sd, alpha=spec.alpha,
                                                     sides="two-sided" if two_sided else "one-sided").difference \
        if len(d) > 1 and sd > 0 else math.nan
    crossed, per_split = None, {}
    if kind in ("success", "score"):  # per game and per split; a training series has neither
        cells = game_matrix(a, seeds, splits, kind) - game_matrix(b, seeds, splits, kind)
        cells = cells[:, np.isfinite(cells).all(axis=0)]  # a game crashed on some seed says nothing of either arm
        crossed = stats.crossed_bootstrap(cells, replicates=2000, rng=np.random.default_rng(0)) \
            if cells.size else None
        per_split = {split: float(np.mean([endpoint(a[s], [split], kind) - endpoint(b[s], [split], kind)
                                           for s in seeds])) for split in splits}
    return ContrastResult(setting.name, treatment, control, seeds, d.tolist(), float(d.mean()), sd, t_test,
                          t_test.p_two_sided if two_sided else t_test.p, perm.p, sign, alpha=spec.alpha, tost=tost,
                          detectable=float(detectable), endpoint=kind,
                          crossed=(crossed.lo, crossed.hi) if crossed is not None else (math.nan, math.nan),
                          per_split=per_split)


@dataclass
class NoiseFloor:
    """An equivalent-by-construction pair's observed difference (the A/A floor)."""

    setting: str
    first: str
    second: str
    seeds: list[int]
    mean: float
    sd: float


def noise_floors(matrix: CompareMatrix, data: dict[str, SettingRecords]) -> list[NoiseFloor]:
    out = []
    for setting in matrix.settings:
        records, splits = data.get(setting.name, SettingRecords()), matrix.splits_of(setting)
        for first, second in matrix.analysis.equivalent_by_construction:
            a, b = records.runs.get(first, {}), records.runs.get(second, {})
            seeds = sorted(s for s in a if s in b and a[s].finished(splits) and b[s].finished(splits))
            if seeds:
                d = [endpoint(a[s], splits, matrix.analysis.endpoint) - endpoint(b[s], splits, matrix.analysis.endpoint)
                     for s in seeds]
                out.append(NoiseFloor(setting.name, first, second, seeds, float(np.mean(d)),
                                      float(np.std(d, ddof=1)) if len(d) > 1 else math.nan))
    return out


def timing(matrix: CompareMatrix, records: SettingRecords, splits: list[str]) -> dict[str, dict[str, float]]:
    """Per arm, mean seconds per iteration of each ``ITERATION_TIMES`` key over its finished runs."""
    out = {}
    for arm, runs in records.runs.items():
        done = [r for r in runs.values() if r.finished(splits)]
        if done:
            out[arm] = {k: float(np.nanmean([r.timing.get(k, math.nan) for r in done])) for k in ITERATION_TIMES}
    return out


def seed_endpoints(matrix: CompareMatrix, records: SettingRecords, setting: SettingSpec) -> dict[int, dict[str, float]]:
    """Seed -> arm (and ``WARM_START``) -> the declared endpoint, for every finished run (the warm start's
    where it was evaluated on every split); seeds with neither are left out."""
    splits, kind = matrix.splits_of(setting), matrix.analysis.endpoint
    out: dict[int, dict[str, float]] = {}
    for seed in matrix.seeds:
        runs = {arm.name: records.runs.get(arm.name, {}).get(seed) for arm in matrix.arms}
        row = {arm: endpoint(run, splits, kind) for arm, run in runs.items()
               if run is not None and run.finished(splits)}
        warm = records.warm.get(seed)
        if row and warm is not None and all(split in warm.evaluations for split in splits):
            row = {WARM_START: pooled_endpoint(warm.evaluations, splits, kind), **row}
        if row:
            out[seed] = row
    return out


def run_seconds(record: RunRecord) -> float:
    """A finished run's wall time on its thread: its iterations at their mean time (evaluations along the
    way included) and its final evaluations. Its seed's warm start (SFT) is not in it."""
    per_iteration = record.timing.get("time/iteration_s", math.nan)
    return record.iterations * per_iteration + sum(e.seconds for e in record.final.values())


@dataclass
class Cost:
    """What one setting's runs cost on one thread each, from its finished runs' measured time."""

    finished: int
    spent: float
    """Seconds the finished runs took (``run_seconds``), warm starts not included."""
    left: int
    left_seconds: float
    """Each run left at the mean wall time of its arm's finished runs (the setting's mean where its arm has
    none); NaN while runs are left and none of the setting finished."""
    warm_starts: list[int]
    """Seeds of runs left whose warm start was not evaluated yet: their SFT comes on top."""
    warm_start_seconds: float = math.nan
    """The mean time making one of the setting's warm starts took (``WarmStartRecord.sft_seconds``); NaN
    while none was timed."""


@dataclass
class RunTimes:
    """One setting's measured times on one thread: what to expect of a run of each arm, and of an SFT."""

    per_arm: dict[str, list[float]]
    """Arm -> ``run_seconds`` of each of its finished runs."""
    sft: list[float]
    """The measured ``sft_seconds`` of the setting's warm starts."""

    @classmethod
    def of(cls, records: SettingRecords, splits: list[str]) -> RunTimes:
        per_arm = {arm: [t for r in runs.values() if r.finished(splits) and math.isfinite(t := run_seconds(r))]
                   for arm, runs in records.runs.items()}
        return cls(per_arm, [w.sft_seconds for w in records.warm.values() if w.sft_seconds is not None])

    def run(self, arm: str) -> float:
        """A run of ``arm``: its arm's mean, the setting's where the arm has no finished run, else NaN."""
        times = self.per_arm.get(arm) or [t for ts in self.per_arm.values() for t in ts]
        return float(np.mean(times)) if times else math.nan

    def warm_start(self) -> float:
        return float(np.mean(self.sft)) if self.sft else math.nan


def cost(matrix: CompareMatrix, data: dict[str, SettingRecords]) -> dict[str, Cost]:
    """Per setting, what its finished runs took and its runs left will take (``Cost``)."""
    out, left = {}, left_to_run(matrix, data)
    for setting in matrix.settings:
        records, splits = data.get(setting.name, SettingRecords()), matrix.splits_of(setting)
        times = RunTimes.of(records, splits)
        arms = left.get(setting.name, {})
        seconds = sum(times.run(arm) for arm, seeds in arms.items() for _ in seeds)
        finished = sum(r.finished(splits) for runs in records.runs.values() for r in runs.values())
        out[setting.name] = Cost(finished, float(sum(t for ts in times.per_arm.values() for t in ts)),
                                 sum(map(len, arms.values())), float(seconds),
                                 sorted({s for v in arms.values() for s in v} - set(records.warm)),
                                 times.warm_start())
    return out


def predicted_seconds(data: dict[str, SettingRecords], run: RunSpec, *, warm_start_made: bool) -> float:
    """How long ``run`` will take on its thread, from the records: its arm's measured mean (``RunTimes.run``),
    plus the setting's measured SFT time unless its warm start is made; NaN while no run of the setting
    finished. An SFT no record timed yet counts 0 (the prediction is then a lower bound: enough to tell a
    run that cannot end in time), and a run resuming from a checkpoint counts its full length."""
    times = RunTimes.of(data.get(run.setting.name, SettingRecords()), run.eval_splits)
    sft = 0.0 if warm_start_made or not times.sft else times.warm_start()
    return times.run(run.arm.name) + sft


def left_to_run(matrix: CompareMatrix, data: dict[str, SettingRecords]) -> dict[str, dict[str, list[int]]]:
    """Per setting and arm, the seeds without a finished record."""
    left: dict[str, dict[str, list[int]]] = {}
    for run in matrix.runs():
        record = data.get(run.setting.name, SettingRecords()).runs.get(run.arm.name, {}).get(run.seed)
        if record is None or not record.finished(run.eval_splits):
            left.setdefault(run.setting.name, {}).setdefault(run.arm.name, []).append(run.seed)
    return left


__all__ = [
    "SERIES_END_ITERATIONS",
    "WARM_START",
    "ContrastResult",
    "Cost",
    "NoiseFloor",
    "Row",
    "RunTimes",
    "SettingRecords",
    "SplitTable",
    "collect",
    "contrasts",
    "cost",
    "endpoint",
    "game_matrix",
    "left_to_run",
    "noise_floors",
    "pooled_endpoint",
    "predicted_seconds",
    "run_seconds",
    "secondary_contrasts",
    "seed_endpoints",
    "split_table",
    "timing",
]
