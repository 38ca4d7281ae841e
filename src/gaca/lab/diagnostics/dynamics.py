"""Training dynamics of a comparison: each arm's training rollouts over iterations, mean over seeds.

The compare report holds the held-out outcome; this reads the training side of the same runs. A
run's series come from its record (``RunRecord.training``, which keeps ``records.TRAINING`` per
iteration and outlives the run directory) and, for a key its record lacks (or a run not finished,
which has no record yet), from its run directory's ``metrics.jsonl`` under the matrix's scratch root.

For each arm and key, in windows of ``window`` iterations (1..w, w+1..2w, …; a last partial window is
left out), the window's value is

    m_a(k, j) = mean_{s ∈ S_j} mean_{t ∈ window j} x_{a,s}(k, t),

the mean over the seeds S_j whose run reached the end of window j (an unfinished run counts up to its
last iteration) of each seed's mean over the window. The defaults are the quantities that separated
GACA from the baselines on the long setting of the 2026-11 comparison: training success, the
invalid-action ratio, the policy's mean per-token NLL on its own samples (``policy/nll``, a proxy of
its entropy), episode length, and the step table's NLL (``adv/nll_mean``).

A variant of an estimator (e.g. GACA with the additive mixture) is an arm of the matrix (an arm is an
estimator plus its options), so it stands beside the others here without a side matrix.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from gaca.lab.compare.matrix import CompareMatrix, RunSpec
from gaca.lab.compare.records import TRAINING, training_series
from gaca.lab.diagnostics.common import DiagnosticError
from gaca.lab.figures import pyplot, save_figure
from gaca.train.logger import read_metrics

logger = logging.getLogger(__name__)

#: Where a run's series came from.
RECORD, METRICS = "record", "metrics.jsonl"


@dataclass(frozen=True)
class Window:
    """One window of iterations of one arm and key."""

    first: int
    """First training iteration of the window (1-based)."""
    last: int
    mean: float
    """m_a(k, j): the mean over the seeds that reached the window of each seed's window mean."""
    seeds: int
    """How many seeds reached the window."""


@dataclass
class ArmDynamics:
    """One arm's training series, summarized over its seeds."""

    sources: dict[int, list[str]]
    """Seed -> where its series came from (``record``, ``metrics.jsonl`` or both)."""
    seeds: dict[str, list[int]] = field(default_factory=dict)
    """Key -> the seeds that have its series."""
    per_iteration: dict[str, list[float]] = field(default_factory=dict)
    """Key -> at each training iteration t = 1, 2, …, the mean over the seeds whose run reached t."""
    windows: dict[str, list[Window]] = field(default_factory=dict)
    """Key -> its windows, in order."""


@dataclass
class DynamicsResult:
    """``gaca lab dynamics``: one setting of a matrix, per arm."""

    matrix: str
    """The matrix file's directory."""
    setting: str
    window: int
    keys: list[str]
    seed_filter: list[int] | None
    """The seeds asked for (None: every seed of the matrix)."""
    arms: dict[str, ArmDynamics]
    """Arm -> its dynamics, in the matrix's order (arms without any series left out)."""
    missing: dict[str, list[int]] = field(default_factory=dict)
    """Arm -> seeds with neither a record holding the keys nor a run directory."""
    command: str = ""


def window_means(series: list[np.ndarray], window: int) -> list[Window]:
    """The window means of one arm and key over its seeds' series (module docstring).

    Args:
      series: one [T_s] float array per seed, its value at training iterations 1..T_s.
      window: iterations per window (>= 1).
    """
    longest = max((len(s) for s in series), default=0)
    out = []
    for start in range(0, longest - window + 1, window):
        means = [float(s[start:start + window].mean()) for s in series if len(s) >= start + window]
        out.append(Window(start + 1, start + window, float(np.mean(means)), len(means)))
    return out


def iteration_means(series: list[np.ndarray]) -> list[float]:
    """At each iteration t, the mean of x_s(t) over the seeds s whose series reach t."""
    longest = max((len(s) for s in series), default=0)
    return [float(np.mean([s[t] for s in series if len(s) > t])) for t in range(longest)]


def run_series(run: RunSpec, keys: list[str]) -> tuple[dict[str, list[float]], list[str]]:
    """One run's series per key it has (record first, then its run directory), and their sources."""
    record = run.record()
    have = {k: list(v) for k, v in (record.training if record is not None else {}).items() if k in keys and v}
    sources = [RECORD] if have else []
    lacking = [k for k in keys if k not in have]
    if lacking and (run.out_dir / "metrics.jsonl").is_file():
        logged = {k: v for k, v in training_series(read_metrics(run.out_dir), tuple(lacking)).items() if v}
        have.update(logged)
        sources += [METRICS] if logged else []
    return have, sources


@dataclass
class SettingSeries:
    """Every series one setting's runs have: arm -> key -> seed -> [T] values, and where they came from."""

    series: dict[str, dict[str, dict[int, np.ndarray]]] = field(default_factory=dict)
    sources: dict[str, dict[int, list[str]]] = field(default_factory=dict)
    missing: dict[str, list[int]] = field(default_factory=dict)
    """Arm -> seeds with no series at all."""

    def keys(self) -> set[str]:
        return {k for by_key in self.series.values() for k in by_key}


def check_request(matrix: CompareMatrix, setting: str, seeds: list[int] | None, window: int) -> None:
    """A ``DiagnosticError`` for a setting or seed the matrix lacks, or a window below one iteration."""
    names = [s.name for s in matrix.settings]
    if setting not in names:
        raise DiagnosticError(f"the matrix has no setting {setting!r}; its settings: {', '.join(names)}")
    unknown = sorted(set(seeds or []) - set(matrix.seeds))
    if unknown:
        raise DiagnosticError(f"seeds {unknown} are not seeds of the matrix {matrix.seeds}")
    if window < 1:
        raise DiagnosticError(f"the window must be >= 1 iteration, got {window}")


def collect_series(matrix: CompareMatrix, setting: str, seeds: list[int] | None, keys: list[str]) -> SettingSeries:
    """The series of ``keys`` of every run of ``setting`` (of ``seeds``), in the matrix's run order."""
    out = SettingSeries()
    for run in matrix.runs():
        if run.setting.name != setting or (seeds is not None and run.seed not in seeds):
            continue
        have, sources = run_series(run, keys)
        if not have:
            out.missing.setdefault(run.arm.name, []).append(run.seed)
            continue
        out.sources.setdefault(run.arm.name, {})[run.seed] = sources
        for k, v in have.items():
            out.series.setdefault(run.arm.name, {}).setdefault(k, {})[run.seed] = np.asarray(v, dtype=float)
    return out


def summarize(data: SettingSeries, arm: str, keys: list[str], window: int) -> ArmDynamics:
    """One arm's per-iteration and window means over its seeds."""
    out = ArmDynamics(data.sources[arm])
    for k in keys:
        runs = data.series[arm].get(k)
        if runs:
            out.seeds[k] = sorted(runs)
            out.per_iteration[k] = iteration_means(list(runs.values()))
            out.windows[k] = window_means(list(runs.values()), window)
    return out


def training_dynamics(matrix: CompareMatrix, setting: str, *, seeds: list[int] | None = None, window: int = 10,
                      keys: list[str] | None = None) -> DynamicsResult:
    """Every arm's training dynamics on ``setting`` (module docstring).

    Args:
      seeds:  these seeds only (default: all of the matrix's).
      keys:   metrics keys (default ``TRAINING``; a default key no run has is left out, a key asked
              for that no run has is an error).
    Raises:
      DiagnosticError: an unknown setting or seed, a bad window, or no series at all.
    """
    check_request(matrix, setting, seeds, window)
    wanted = list(keys or TRAINING)
    data = collect_series(matrix, setting, seeds, wanted)
    found = [k for k in wanted if k in data.keys()]
    absent = [k for k in wanted if k not in found]
    if absent and keys is not None:
        raise DiagnosticError(f"no run of {setting!r} has {absent} per iteration (records keep {list(TRAINING)}; "
                              f"other keys need the run directories under {matrix.root_dir})")
    if not found:
        raise DiagnosticError(f"no run of {setting!r} has a record with training series nor a run directory under "
                              f"{matrix.root_dir}")
    if absent:
        logger.info("no run of %s has %s per iteration: left out", setting, absent)
    order = [a.name for a in matrix.arms]
    return DynamicsResult(str(matrix.directory), setting, window, found, seeds,
                          {a: summarize(data, a, found, window) for a in order if a in data.series},
                          {a: data.missing[a] for a in order if a in data.missing})


def table(result: DynamicsResult) -> str:
    """Per key, one markdown row per arm: its window means, the number of seeds in brackets."""
    lines = []
    for key in result.keys:
        rows = {arm: d.windows[key] for arm, d in result.arms.items() if key in d.windows}
        if not rows or not any(rows.values()):
            continue
        widest = max(rows.values(), key=len)
        lines += ["", f"{key} (mean over seeds; seeds in brackets)",
                  "| arm | " + " | ".join(f"{w.first}-{w.last}" for w in widest) + " |",
                  "|---|" + "---|" * len(widest)]
        lines += [f"| {arm} | " + " | ".join(f"{w.mean:.3f} ({w.seeds})" for w in ws) + " |"
                  for arm, ws in rows.items()]
    if result.missing:
        lines += ["", "No series: " + "; ".join(f"{a} seeds {', '.join(map(str, s))}"
                                                for a, s in result.missing.items())]
    return "\n".join(lines).lstrip("\n")


def plot(result: DynamicsResult, path: Path, smooth: int = 5) -> Path:
    """Each key against iteration: per arm, the mean over the seeds that reached an iteration, as a
    running mean over ``smooth`` iterations (one iteration's rollouts are noisy)."""
    plt = pyplot()
    fig, axes = plt.subplots(1, len(result.keys), figsize=(4.2 * len(result.keys), 3.4), squeeze=False)
    for ax, key in zip(axes[0], result.keys, strict=True):
        for arm, d in result.arms.items():
            if key not in d.per_iteration:
                continue
            mean = np.asarray(d.per_iteration[key])
            width = min(smooth, len(mean))
            smoothed = np.convolve(mean, np.ones(width) / width, mode="valid")
            ax.plot(np.arange(len(smoothed)) + width, smoothed, label=arm)
        ax.set_title(key)
        ax.set_xlabel("iteration")
    axes[0][0].legend(fontsize=8)
    return save_figure(fig, path)


def default_out(matrix: CompareMatrix, setting: str, seeds: list[int] | None) -> Path:
    """``<matrix directory>/dynamics/<setting>[-seeds<a>-<b>…].json``, next to the matrix's records."""
    suffix = "" if seeds is None else "-seeds" + "-".join(str(s) for s in sorted(seeds))
    return Path(matrix.directory) / "dynamics" / f"{setting}{suffix}.json"


__all__ = ["METRICS", "RECORD", "ArmDynamics", "DynamicsResult", "SettingSeries", "Window", "check_request",
           "collect_series", "default_out", "iteration_means", "plot", "run_series", "summarize", "table",
           "training_dynamics", "window_means"]
