"""The comparison's report, from whatever runs of the matrix have finished.

    out_dir/report.md     the primary analysis as declared (each contrast: per-seed differences, paired
                          t and permutation tests Holm-adjusted, TOST, detectable difference, verdict),
                          the A/A floors, then per setting the endpoint per seed (each arm's, the
                          warm start's, each contrast's difference), per held-out split the table
                          (mean ± sd over seeds; all games, invalid-action ratio, each task family),
                          the time per iteration, each training series' drift per arm (descriptive,
                          ``dynamics``), what is left to run, and the runs' cost, spent and left
    out_dir/curves.png    held-out success against environment steps, mean and range over seeds
    out_dir/training.png  each training series against the iteration, mean over seeds per arm
    out_dir/contrasts.png each declared contrast: the per-seed differences, their mean with its 95% t
                          interval, zero and the equivalence margin; the secondary contrasts below, a
                          panel per endpoint
    out_dir/final.png     final success per arm and split, every seed a dot
    out_dir/result.json   every number above, typed as in ``gaca.lab.compare.analysis``
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gaca.lab.compare.analysis import (
    SERIES_END_ITERATIONS,
    WARM_START,
    ContrastResult,
    Cost,
    NoiseFloor,
    SettingRecords,
    SplitTable,
    collect,
    contrasts,
    cost,
    left_to_run,
    noise_floors,
    secondary_contrasts,
    seed_endpoints,
    split_table,
    timing,
)
from gaca.lab.compare.dynamics import EARLY_ITERATIONS, LATE_ITERATIONS, SeriesDrift, series_drift
from gaca.lab.compare.matrix import CompareMatrix, SecondaryContrast
from gaca.lab.compare.records import TRAINING
from gaca.lab.figures import pyplot, save_figure, write_result
from gaca.persist import atomic_write
from gaca.train.timing import ITERATION_TIMES


@dataclass
class CompareReport:
    """Everything the report states (``result.json``)."""

    command: str
    arms: dict[str, dict]
    contrasts: list[ContrastResult]
    noise_floors: list[NoiseFloor]
    tables: dict[str, dict[str, SplitTable]]
    """Setting -> split -> table."""
    timing: dict[str, dict[str, dict[str, float]]]
    left_to_run: dict[str, dict[str, list[int]]]
    not_comparable: dict[str, list]
    total_runs: int
    analysis: dict = field(default_factory=dict)
    """The matrix's declared analysis."""
    drift: dict[str, list[SeriesDrift]] = field(default_factory=dict)
    """Setting -> its training series' drift (descriptive)."""
    secondary: list[ContrastResult] = field(default_factory=list)
    """The secondary contrasts (declared after some runs, on seeds not run then)."""
    per_seed: dict[str, dict[int, dict[str, float]]] = field(default_factory=dict)
    """Setting -> seed -> arm (and the warm start) -> the declared endpoint."""
    cost: dict[str, Cost] = field(default_factory=dict)
    """Setting -> what its runs took and its runs left will take."""
    parallel: int = 1
    """Runs the matrix runs at a time."""


def build_report(matrix: CompareMatrix, command: str, data: dict[str, SettingRecords] | None = None) -> CompareReport:
    data = collect(matrix) if data is None else data
    tables = {s.name: {split: split_table(matrix, data.get(s.name, SettingRecords()), split)
                       for split in matrix.splits_of(s)} for s in matrix.settings}
    return CompareReport(
        command=command,
        arms={a.name: {"estimator": a.estimator, "options": a.options, "seeds": matrix.seeds_of(a), "note": a.note,
                       **({"config_overrides": a.config_overrides} if a.config_overrides else {})}
              for a in matrix.arms},
        contrasts=contrasts(matrix, data), noise_floors=noise_floors(matrix, data), tables=tables,
        timing={s.name: timing(matrix, data.get(s.name, SettingRecords()), matrix.splits_of(s))
                for s in matrix.settings},
        left_to_run=left_to_run(matrix, data),
        not_comparable={name: list(fps) for e in data.values() for name, fps in e.not_comparable.items()},
        total_runs=len(matrix.runs()),
        analysis={"endpoint": matrix.analysis.endpoint, "alternative": matrix.analysis.alternative,
                  "margin": matrix.analysis.margin, "alpha": matrix.analysis.alpha,
                  "declared_before_runs": matrix.analysis.declared_before_runs,
                  "secondary": [dataclasses.asdict(c) for c in matrix.analysis.secondary]},
        drift={s.name: series_drift(matrix, data.get(s.name, SettingRecords()), s) for s in matrix.settings},
        secondary=secondary_contrasts(matrix, data),
        per_seed={s.name: seed_endpoints(matrix, data.get(s.name, SettingRecords()), s) for s in matrix.settings},
        cost=cost(matrix, data), parallel=matrix.parallel,
    )


def _mean_sd(values: list[float], digits: int = 3, *, signed: bool = False) -> str:
    values = [v for v in values if math.isfinite(v)]
    if not values:
        return "–"
    sd = float(np.std(values, ddof=1)) if len(values) > 1 else 0.0
    return f"{np.mean(values):{'+' if signed else ''}.{digits}f} ± {sd:.{digits}f}"


def _num(x: float, spec: str = ".4f") -> str:
    return format(x, spec) if math.isfinite(x) else "–"


def _p(p: float) -> str:
    return "–" if not math.isfinite(p) else f"{p:.3f}" if p >= 0.001 else "<0.001"


def _contrast_lines(report: CompareReport) -> list[str]:
    a = report.analysis
    side = "one-sided (treatment ahead)" if a["alternative"] == "greater" else "two-sided"
    title = ("Primary analysis (declared in the matrix before the runs)" if a["declared_before_runs"] else
             "Analysis (declared after the runs: descriptive, not confirmatory)")
    margin = f"equivalence by TOST at ±{a['margin']:g}" if a["margin"] > 0 else "no equivalence margin declared"
    lines = [f"## {title}", "",
             f"Endpoint: final {a['endpoint']} pooled over every game of every held-out split, per seed; "
             f"difference d = treatment − control per seed; tests over seeds, {side}, α = {a['alpha']:g}, "
             f"p-values Holm-adjusted over all contrasts (the permutation test's); {margin}; 'detectable' is the "
             "smallest true difference these seeds detect with 80% power. The verdict is read once every "
             "declared seed is in; before that the tests are an interim look and the verdict says how many seeds "
             "are in.",
             "", "| setting | treatment − control | seeds | mean d ± sd | 95% (seeds × games) | t-test p | "
             "permutation p | Holm p | sign test (+/−) | TOST p | detectable | verdict |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for c in report.contrasts:
        tost = _p(c.tost.p) if c.tost is not None else "–"
        interval = f"[{c.crossed[0]:+.4f}, {c.crossed[1]:+.4f}]" if math.isfinite(c.crossed[0]) else "–"
        lines.append(f"| {c.setting} | {c.treatment} − {c.control} | {len(c.seeds)} | {c.mean:+.4f} ± {_num(c.sd)} | "
                     f"{interval} | {_p(c.t_p)} | {_p(c.permutation_p)} | "
                     f"{_p(c.holm_p)} | {c.sign_test.positive}/{c.sign_test.n - c.sign_test.positive} "
                     f"({_p(c.sign_test.p)}) | "
                     f"{tost} | {_num(c.detectable)} | **{c.verdict}** |")
    if not report.contrasts:
        lines.append("| – | no contrast has a seed finished by both arms yet | | | | | | | | | | |")
    if report.analysis.get("secondary"):
        lines += _secondary_lines(report)
    if report.noise_floors:
        lines += ["", "Equivalent by construction (one algorithm; their difference is the A/A noise floor):", "",
                  "| setting | pair | seeds | mean d ± sd |", "|---|---|---|---|"]
        lines += [f"| {f.setting} | {f.first} − {f.second} | {len(f.seeds)} | {f.mean:+.4f} ± {_num(f.sd)} |"
                  for f in report.noise_floors]
    return [*lines, ""]


def _secondary_lines(report: CompareReport) -> list[str]:
    lines = ["", "### Secondary contrasts (declared after some runs; tested on seeds none of whose runs had started)",
             "", "Each on its own seeds and endpoint (a training series: its mean over a run's last "
             f"{SERIES_END_ITERATIONS} iterations), Holm-adjusted as their own family; they never enter the "
             "primary verdict. \"ahead\": the treatment's endpoint is the higher.", "",
             "| setting | treatment − control | endpoint | declared | seeds | mean d ± sd | t-test p | permutation p | "
             "Holm p | sign test (+/−) | verdict |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for c in report.secondary:
        lines.append(f"| {c.setting} | {c.treatment} − {c.control} | {c.endpoint} | {c.declared} | {len(c.seeds)} | "
                     f"{c.mean:+.4f} ± {_num(c.sd)} | {_p(c.t_p)} | {_p(c.permutation_p)} | {_p(c.holm_p)} | "
                     f"{c.sign_test.positive}/{c.sign_test.n - c.sign_test.positive} ({_p(c.sign_test.p)}) | "
                     f"**{c.verdict}** |")
    tested = {(c.setting, c.treatment, c.control, c.endpoint, tuple(c.declared_seeds)) for c in report.secondary}
    lines += [f"| {setting} | {c['treatment']} − {c['control']} | {c['endpoint']} | {c['declared']} | 0 | no seed "
              f"of {c['seeds']} finished by both arms yet | | | | | |"
              for setting in report.tables for c in report.analysis["secondary"]
              if (setting, *SecondaryContrast(**c).key) not in tested]
    return lines


def _table_lines(setting: str, table: SplitTable) -> list[str]:
    score = ["score (100 × return)"] if table.graded else []
    lines = [f"### {setting}: held-out split `{table.split}`", "",
             "| arm | seeds | " + " | ".join([*score, "success: all", "invalid-action ratio", *table.families]) + " |",
             "|---|---|" + "---|" * (len(score) + 2 + len(table.families))]
    for arm, row in table.rows.items():
        if not row.seeds and arm != WARM_START:
            continue
        cells = ([_mean_sd(row.score, 1)] if score else []) + [_mean_sd(row.success), _mean_sd(row.invalid)]
        cells += [_mean_sd(row.families[f]) for f in table.families]
        lines.append(f"| {arm} | {len(row.seeds)} | " + " | ".join(cells) + " |")
    if table.left_out:
        lines += ["", "Left out of this table's means (their seed not yet finished by every arm): "
                  + "; ".join(f"{a} seed {', '.join(map(str, s))}" for a, s in table.left_out.items()) + "."]
    return [*lines, ""]


def _seed_lines(setting: str, per_seed: dict[int, dict[str, float]], endpoint: str, declared: list[str],
                contrasts: list[ContrastResult]) -> list[str]:
    arms = [a for a in [WARM_START, *declared] if any(a in row for row in per_seed.values())]
    diffs = [c for c in contrasts if c.setting == setting]
    lines = [f"### {setting}: the endpoint per seed", "",
             f"Final {endpoint} pooled over the held-out splits, per seed: each arm's, and the declared contrasts' "
             "differences (the numbers the tests above are made of).", "",
             "| seed | " + " | ".join([*arms, *(f"d: {c.treatment} − {c.control}" for c in diffs)]) + " |",
             "|---|" + "---|" * (len(arms) + len(diffs))]
    digits = 1 if endpoint == "score" else 3  # score is 100 × return
    by_seed = [dict(zip(c.seeds, c.differences, strict=True)) for c in diffs]
    for seed, row in per_seed.items():
        cells = [_num(row.get(a, math.nan), f".{digits}f") for a in arms]
        cells += [f"{d[seed]:+.{digits}f}" if seed in d else "–" for d in by_seed]
        lines.append(f"| {seed} | " + " | ".join(cells) + " |")
    return [*lines, ""]


def _cost_line(setting: str, c: Cost, parallel: int) -> str:
    line = f"- {setting}: {c.finished} finished runs took ≈ {c.spent / 3600:.1f} core-hours"
    if not c.left:
        return line + " (their warm starts' SFT not included)."
    if math.isfinite(c.left_seconds):
        hours = c.left_seconds / 3600
        line += (f"; the {c.left} left ≈ {hours:.1f} core-hours at their arms' measured time "
                 f"(≈ {hours / parallel:.1f} hours at {parallel} at a time)")
    else:
        line += f"; the {c.left} left: unknown until one of the setting's runs finishes"
    each = (f"≈ {c.warm_start_seconds / 60:.0f} min each as measured" if math.isfinite(c.warm_start_seconds)
            else "not timed here")
    seeds = ", ".join(map(str, c.warm_starts))
    warm = f", plus the warm starts (SFT) of seeds {seeds}, {each}" if c.warm_starts else ""
    return f"{line}{warm}."


def _drift_lines(setting: str, drifts: list[SeriesDrift]) -> list[str]:
    lines = [f"### {setting}: training series (descriptive, not declared)", "",
             f"Per arm, mean ± sd over its finished seeds of each training series averaged over the first "
             f"{EARLY_ITERATIONS} iterations and the last {LATE_ITERATIONS}, and the change; r: over the finished "
             "runs, centred within seed, the correlation of the change with the run's gain in the endpoint over "
             "its seed's warm start (a view of how the arms steered training, not a test).", "",
             "| series | arm | seeds | start | end | change | r (change, gain) |", "|---|---|---|---|---|---|---|"]
    for d in drifts:
        r = f"{d.gain_r:+.2f} ({d.gain_runs} runs)" if math.isfinite(d.gain_r) else "–"
        for arm, per_seed in d.arms.items():
            start, end = ([v[i] for v in per_seed.values()] for i in (0, 1))
            lines.append(f"| {d.key} | {arm} | {len(per_seed)} | {_mean_sd(start)} | {_mean_sd(end)} | "
                         f"{_mean_sd([b - a for a, b in zip(start, end, strict=True)], signed=True)} | {r} |")
            r = ""
    return [*lines, ""]


def markdown(report: CompareReport) -> str:
    lines = ["# Learning comparison", "", f"Command: `{report.command}`. Every arm of a seed starts from the seed's "
             "warm start and is evaluated on the same games with the same sampling stream; tables show mean ± sd "
             "over the seeds finished by every arm declared on them (arms not started yet aside).", "", "Arms:", ""]
    lines += [f"- **{name}**: `{a['estimator']}` {a['options'] or ''}"
              + (f" config {a['config_overrides']}" if a.get("config_overrides") else "") + f" (seeds {a['seeds']})"
              + (f" — {a['note']}" if a["note"] else "") for name, a in report.arms.items()]
    lines += ["", *_contrast_lines(report)]
    for setting, splits in report.tables.items():
        lines += [f"## {setting}", ""]
        if report.per_seed.get(setting):
            lines += _seed_lines(setting, report.per_seed[setting], report.analysis["endpoint"], list(report.arms),
                                report.contrasts)
        for table in splits.values():
            lines += _table_lines(setting, table)
        if report.drift.get(setting):
            lines += _drift_lines(setting, report.drift[setting])
        if report.timing.get(setting):
            lines += ["Mean seconds per iteration (one thread per run):", "",
                      "| arm | " + " | ".join(k.split("/")[1][:-2] for k in ITERATION_TIMES) + " |",
                      "|---|" + "---|" * len(ITERATION_TIMES)]
            lines += [f"| {arm} | " + " | ".join(f"{t[k]:.2f}" for k in ITERATION_TIMES) + " |"
                      for arm, t in report.timing[setting].items()]
            lines.append("")
    if report.not_comparable:
        lines += ["## Not comparable", "", "Finished from another warm start than their seed's recorded one, so "
                  "left out (rerun their seed on one machine):", ""]
        lines += [f"- {name}: warm start {ours}, the seed's {theirs}" for name, (ours, theirs)
                  in report.not_comparable.items()]
        lines.append("")
    left = sum(len(v) for e in report.left_to_run.values() for v in e.values())
    lines += ["## Left to run", "", f"{report.total_runs - left} of {report.total_runs} runs finished."]
    lines += [f"- {setting}: " + "; ".join(f"{arm} seeds {', '.join(map(str, s))}" for arm, s in arms.items())
              for setting, arms in report.left_to_run.items()]
    if report.cost:
        lines += ["", "Cost, one thread a run (iterations × their measured mean time, plus the final evaluations):", ""]
        lines += [_cost_line(setting, c, report.parallel) for setting, c in report.cost.items()]
    return "\n".join(lines) + "\n"


def plots(matrix: CompareMatrix, data: dict[str, SettingRecords], report: CompareReport, out_dir: Path) -> list[Path]:
    plt = pyplot()
    settings = [s.name for s in matrix.settings]
    fig, axes = plt.subplots(1, len(settings), figsize=(6 * len(settings), 4), squeeze=False)
    for ax, setting in zip(axes[0], settings, strict=True):
        for i, arm in enumerate(matrix.arms):
            curves = [r.curve for r in data.get(setting, SettingRecords()).runs.get(arm.name, {}).values() if r.curve]
            if not curves:
                continue
            n = min(len(c) for c in curves)
            x = np.mean([[p.env_steps for p in c[:n]] for c in curves], axis=0)
            y = np.array([[p.success for p in c[:n]] for c in curves])
            ax.plot(x, y.mean(0), "o-", ms=3, color=f"C{i}", label=f"{arm.name} ({len(curves)} seeds)")
            if len(curves) > 1:
                ax.fill_between(x, y.min(0), y.max(0), color=f"C{i}", alpha=0.12)
        ax.set_title(setting)
        ax.set_xlabel("environment steps (training)")
        ax.set_ylabel("held-out success (the run's eval split)")
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    paths = [save_figure(fig, out_dir / "curves.png")]
    width = max(len(t) for t in report.tables.values())
    fig, axes = plt.subplots(len(settings), width, figsize=(4 * width, 3.4 * len(settings)), squeeze=False)
    for i, setting in enumerate(settings):
        tables = list(report.tables[setting].values())
        for ax in axes[i][len(tables):]:
            ax.set_axis_off()
        for ax, table in zip(axes[i], tables, strict=False):
            names = [a for a, row in table.rows.items() if row.success]
            values = [np.array(table.rows[a].success, dtype=float) for a in names]
            ax.bar(range(len(names)), [v.mean() for v in values], color="tab:blue", alpha=0.6)
            for k, v in enumerate(values):
                ax.scatter(np.full(len(v), k), v, color="k", s=8, zorder=3)
            ax.set_xticks(range(len(names)), names, rotation=35, fontsize=7, ha="right")
            ax.set_title(f"{setting}: {table.split}", fontsize=9)
            ax.set_ylim(0, 1)
            ax.grid(axis="y", alpha=0.3)
    paths.append(save_figure(fig, out_dir / "final.png"))
    paths += _training_plot(matrix, data, out_dir)
    paths += _contrast_plot(report, out_dir)
    return paths


def _contrast_plot(report: CompareReport, out_dir: Path) -> list[Path]:
    """contrasts.png: a panel for the declared contrasts and one per endpoint of the secondary ones; a row
    per contrast: each seed's difference (dots), the mean and its 95% t interval (bar), zero, and the
    equivalence margin (band, primary panel)."""
    endpoint = report.analysis.get("endpoint", "endpoint")
    panels = [(f"declared contrasts: final {endpoint}", report.contrasts, report.analysis.get("margin", 0.0))]
    for secondary_endpoint in dict.fromkeys(c.endpoint for c in report.secondary):
        rows = [c for c in report.secondary if c.endpoint == secondary_endpoint]
        name = secondary_endpoint if secondary_endpoint in ("success", "score") else (
            f"{secondary_endpoint}, mean of the last {SERIES_END_ITERATIONS} iterations")
        panels.append((f"secondary contrasts: {name}", rows, 0.0))
    panels = [p for p in panels if p[1]]
    if not panels:
        return []
    plt = pyplot()
    heights = [0.9 + 0.7 * len(rows) for _, rows, _ in panels]
    fig, axes = plt.subplots(len(panels), 1, figsize=(7, sum(heights)), squeeze=False,
                             gridspec_kw={"height_ratios": heights})
    for ax, (title, rows, margin) in zip(axes[:, 0], panels, strict=True):
        _contrast_panel(ax, rows, margin)
        ax.set_title(title, fontsize=8)
    axes[-1, 0].set_xlabel("treatment − control: each seed (dots), mean and 95% t interval (red)", fontsize=8)
    return [save_figure(fig, out_dir / "contrasts.png")]


def _contrast_panel(ax: Any, rows: list[ContrastResult], margin: float) -> None:
    for y, c in enumerate(rows):
        ax.scatter(c.differences, np.full(len(c.differences), y) + np.linspace(-0.15, 0.15, len(c.differences)),
                   s=12, color="k", alpha=0.6, zorder=3)
        if math.isfinite(c.t_test.lo):
            ax.plot([c.t_test.lo, c.t_test.hi], [y, y], color="tab:red", lw=2.5, zorder=2)
        ax.plot([c.mean], [y], "D", color="tab:red", ms=6, zorder=4)
    if margin > 0:
        ax.axvspan(-margin, margin, color="tab:green", alpha=0.12, label=f"equivalence margin ±{margin:g}")
        ax.legend(fontsize=7, loc="best")
    ax.axvline(0.0, color="k", lw=0.8)
    ax.set_yticks(range(len(rows)),
                  [f"{c.setting}\n{c.treatment} − {c.control}\n"
                   + (f"({c.verdict})" if c.interim else f"({len(c.seeds)} seeds; {c.verdict})") for c in rows],
                  fontsize=7)
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.invert_yaxis()
    ax.grid(axis="x", alpha=0.3)


def _training_plot(matrix: CompareMatrix, data: dict[str, SettingRecords], out_dir: Path) -> list[Path]:
    """training.png: settings × training series, each arm's mean over its finished seeds per iteration."""
    plt = pyplot()
    settings = [s for s in matrix.settings if data.get(s.name, SettingRecords()).runs]
    keys = [k for k in TRAINING if any(any(r.training.get(k, [])) for e in data.values() for runs in e.runs.values()
                                       for r in runs.values())]  # a series never off zero shows nothing
    if not settings or not keys:
        return []
    fig, axes = plt.subplots(len(settings), len(keys), figsize=(3.6 * len(keys), 3 * len(settings)), squeeze=False)
    for row, setting in zip(axes, settings, strict=True):
        splits = matrix.splits_of(setting)
        for ax, key in zip(row, keys, strict=True):
            for i, arm in enumerate(matrix.arms):
                runs = data[setting.name].runs.get(arm.name, {})
                series = [r.training[key] for r in runs.values() if r.finished(splits) and r.training.get(key)]
                if not series or not any(any(x) for x in series):
                    continue
                n = min(len(x) for x in series)
                ax.plot(range(1, n + 1), np.nanmean([x[:n] for x in series], axis=0), lw=1.2, color=f"C{i}",
                        label=f"{arm.name} ({len(series)})")
            ax.set_title(f"{setting.name}: {key}", fontsize=8)
            ax.set_xlabel("iteration", fontsize=8)
            ax.grid(alpha=0.3)
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=6)
    return [save_figure(fig, out_dir / "training.png")]


def write_compare_report(matrix: CompareMatrix, out_dir: str | Path, *, command: str) -> list[Path]:
    """Write report.md, curves.png, final.png, training.png, contrasts.png and result.json from the runs."""
    out_dir = Path(out_dir)
    data = collect(matrix)
    report = build_report(matrix, command, data)
    paths = [atomic_write(out_dir / "report.md", markdown(report))]
    paths += plots(matrix, data, report, out_dir)
    paths.append(write_result(out_dir / "result.json", report))
    return paths


__all__ = ["CompareReport", "build_report", "markdown", "plots", "write_compare_report"]
