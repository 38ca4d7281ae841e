"""The comparison's report, from whatever runs of the matrix have finished.

    out_dir/report.md     per setting and held-out split, the paper-style table (rows: estimators;
                          columns: all games, the invalid-action ratio and each task family;
                          mean ± std over seeds), the warm start's success, GACA's paired
                          difference against each baseline with a bootstrap interval and the seeds
                          on which GACA is ahead, wall time per iteration and its breakdown
    out_dir/curves.png    held-out success against environment steps, mean and band over seeds
    out_dir/final.png     final success per estimator with its spread over seeds
    out_dir/result.json   every number above, per run, with the commit, configs and commands

Paired differences: every estimator of a seed is evaluated on the same games with the same sampling
stream, so d = success(GACA) − success(baseline) is formed game by game within a seed; its interval
is a two-level bootstrap (seeds with replacement, then games within each drawn seed).
"""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path
from typing import Any

import numpy as np

from gaca.lab.matrix import CompareMatrix
from gaca.lab.records import TIMING, is_complete, load_record, other_warm_start, read_json
from gaca.lab.report import save_figure

REFERENCE = "gaca"


def collect(matrix: CompareMatrix) -> dict[str, Any]:
    """Per setting, estimator and seed: the run's record; per setting and seed: the warm start's.

    A run that started from another warm start than its seed's recorded one (``not_comparable``: its
    record's ``warm_start`` fingerprint differs) is left out: pairing it by game would compare two
    starts, not two estimators."""
    data: dict[str, Any] = {}
    for run in matrix.runs():
        record = load_record(run)
        if record is None:
            continue
        entry = data.setdefault(run.setting.name, {"runs": {}, "warmstart": {}, "not_comparable": {}})
        seed_file = read_json(matrix.warmstart_record_path(run.setting.name, run.seed))
        if other_warm_start(record.get("warm_start"), seed_file.get("fingerprint")):
            entry["not_comparable"][run.name] = (record["warm_start"], seed_file["fingerprint"])
            continue
        entry["runs"].setdefault(run.estimator, {})[run.seed] = record
        warm = seed_file.get("warmstart", {})
        if warm:
            entry["warmstart"][run.seed] = warm
    return data


def _outcomes(record: dict[str, Any], family: str | None = None) -> list[dict[str, Any]]:
    return [o for o in record["outcomes"] if not o["crashed"] and (family is None or o["family"] == family)]


def _success(record: dict[str, Any], family: str | None = None) -> float:
    outcomes = _outcomes(record, family)
    return float(np.mean([o["won"] for o in outcomes])) if outcomes else math.nan


def _score(record: dict[str, Any], family: str | None = None) -> float:
    """100 × the mean episode return (WebShop's score)."""
    outcomes = _outcomes(record, family)
    return 100.0 * float(np.mean([o["return"] for o in outcomes])) if outcomes else math.nan


def _invalid_ratio(record: dict[str, Any]) -> float:
    """Invalid actions over all steps of the split's games (the trainer's ``eval/invalid_ratio``, which
    records older than per-game counts carry alone); NaN where neither is known."""
    outcomes = _outcomes(record)
    if not all(o.get("invalid") is not None and o.get("length") is not None for o in outcomes):
        return float(record.get("metrics", {}).get("eval/invalid_ratio", math.nan))
    steps = sum(int(o["length"]) for o in outcomes)
    return sum(int(o["invalid"]) for o in outcomes) / steps if steps else math.nan


def _graded(records: list[dict[str, Any]]) -> bool:
    """Whether returns carry partial credit (a lost episode with a non-zero return, as WebShop's score
    gives; ALFWorld's return is a fixed reward for success)."""
    return any(not o["won"] and float(o.get("return", 0.0)) != 0.0 for r in records for o in r["outcomes"])


def paired_difference(ours: list[list[float]], theirs: list[list[float]], *, replicates: int = 2000,
                      seed: int = 0) -> dict[str, float]:
    """Mean of ours − theirs over seeds and games (paired by game within a seed), with a two-level
    bootstrap interval, and how many seeds have ours ahead.

    Args:
      ours, theirs: per seed, per game outcome (1 won, 0 lost), the games in the same order.
    """
    diffs = [np.asarray(a, float) - np.asarray(b, float) for a, b in zip(ours, theirs, strict=True)]
    if not diffs:
        return {"mean": math.nan, "lo": math.nan, "hi": math.nan, "seeds": 0, "ahead": 0, "behind": 0}
    rng = np.random.default_rng(seed)
    boot = np.empty(replicates)
    for b in range(replicates):
        picked = rng.integers(0, len(diffs), len(diffs))
        boot[b] = np.mean([diffs[k][rng.integers(0, len(diffs[k]), len(diffs[k]))].mean() for k in picked])
    per_seed = [float(d.mean()) for d in diffs]
    lo, hi = np.quantile(boot, [0.025, 0.975])
    return {"mean": float(np.mean(per_seed)), "lo": float(lo), "hi": float(hi), "seeds": len(diffs),
            "ahead": sum(d > 0 for d in per_seed), "behind": sum(d < 0 for d in per_seed)}


def _mean_std(values: list[float], digits: int = 3) -> str:
    values = [v for v in values if math.isfinite(v)]
    if not values:
        return "–"
    std = float(np.std(values, ddof=1)) if len(values) > 1 else 0.0
    return f"{np.mean(values):.{digits}f} ± {std:.{digits}f}"


def _row(finals: dict[int, dict[str, Any]], families: list[str], graded: bool) -> dict[str, Any]:
    """One table row: per seed, success over all games and per family, the invalid-action ratio,
    and the score if graded."""
    row = {"seeds": sorted(finals), "all": [_success(f) for f in finals.values()],
           "invalid": [_invalid_ratio(f) for f in finals.values()],
           **{fam: [_success(f, fam) for f in finals.values()] for fam in families}}
    if graded:
        row["score"] = [_score(f) for f in finals.values()]
    return row


def _per_game(run: dict[int, Any], seeds: list[int], split: str, value: Any) -> list[list[float]]:
    """Per seed, ``value(outcome)`` of every game of ``split``, in game order (for paired statistics)."""
    return [[value(o) for o in run[s]["final"][split]["outcomes"]] for s in seeds]


def common_seeds(finals: dict[str, dict[int, Any]]) -> list[int]:
    """The seeds on which every estimator has a final evaluation; empty when there is none (an early
    matrix, whose rows then show each estimator over its own finished seeds).

    The table's means are taken over these seeds only: seeds differ far more than estimators do (one
    warm start each), so a mean over another set of seeds would compare seeds, not estimators."""
    seeds = [set(runs) for runs in finals.values()]
    return sorted(set.intersection(*seeds)) if seeds else []


def tables(data: dict[str, Any], matrix: CompareMatrix) -> dict[str, Any]:
    """All numbers of the report (see module docstring)."""
    out: dict[str, Any] = {}
    specs = {spec.name: spec for spec in matrix.settings}
    for setting, entry in data.items():
        per_split: dict[str, Any] = {}
        for split in matrix.splits_of(specs[setting]):
            finals = {est: {s: r["final"][split] for s, r in entry["runs"].get(est, {}).items() if split in r["final"]}
                      for est in matrix.estimators}
            common = common_seeds(finals)
            left_out = {est: extra for est, runs in finals.items()
                        if common and (extra := sorted(set(runs) - set(common)))}
            if common:
                finals = {est: {s: f for s, f in runs.items() if s in common} for est, runs in finals.items()}
            warm = {s: w[split] for s, w in entry["warmstart"].items() if split in w and (not common or s in common)}
            records = [f for runs in finals.values() for f in runs.values()] + list(warm.values())
            families = sorted({o["family"] for r in records for o in r["outcomes"]})
            graded = _graded(records)
            rows = {est: _row(finals[est], families, graded) for est in matrix.estimators}
            rows["warm start"] = _row(warm, families, graded)
            paired, paired_score = {}, {}
            ref = entry["runs"].get(REFERENCE, {})
            for est in matrix.estimators:
                if est == REFERENCE:
                    continue
                other = entry["runs"].get(est, {})
                seeds = sorted(s for s in ref if s in other and split in ref[s]["final"] and split in other[s]["final"])
                paired[est] = paired_difference(*(_per_game(run, seeds, split, lambda o: float(o["won"]))
                                                  for run in (ref, other)))
                if graded:
                    paired_score[est] = paired_difference(
                        *(_per_game(run, seeds, split, lambda o: 100.0 * float(o["return"])) for run in (ref, other)))
            per_split[split] = {"families": families, "rows": rows, "paired": paired, "graded": graded,
                                "paired_score": paired_score, "left_out": left_out}
        splits = matrix.splits_of(specs[setting])
        finished = {est: [r for r in runs.values() if is_complete(r, splits)] for est, runs in entry["runs"].items()}
        timing = {est: {k: float(np.mean([r["timing"][k] for r in runs])) for k in TIMING}
                  for est, runs in finished.items() if runs}  # a run still going is not timed yet
        out[setting] = {"splits": per_split, "timing": timing}
    return out


def markdown(summary: dict[str, Any], data: dict[str, Any], matrix: CompareMatrix, command: str) -> str:
    lines = ["# Learning comparison", "", f"Matrix: estimators {matrix.estimators}, seeds {matrix.seeds}, "
             f"settings {[s.name for s in matrix.settings]}; command `{command}`. Every estimator at its default "
             "options, with the same iterations, batch sizes and hyperparameters; a seed's runs share one warm "
             "start and are evaluated on the same games with the same sampling stream. Success: mean ± std over "
             "the seeds on which every estimator finished (their number in the second column); a paired difference "
             "uses every seed both of its estimators finished.", ""]
    for setting, result in summary.items():
        lines += [f"## {setting}", ""]
        for split, table in result["splits"].items():
            fams = table["families"]
            score = ["score (100 × return)"] if table["graded"] else []
            lines += [f"### held-out split `{split}`", "",
                      "| estimator | seeds | " + " | ".join([*score, "success: all", "invalid-action ratio", *fams])
                      + " |", "|---|---|" + "---|" * (len(score) + 2 + len(fams))]
            for est, row in table["rows"].items():
                cells = ([_mean_std(row["score"], digits=1)] if score else []) + [_mean_std(row["all"]),
                                                                                  _mean_std(row["invalid"])]
                lines.append(f"| {est} | {len(row['seeds'])} | " + " | ".join(cells + [_mean_std(row[f]) for f in fams])
                             + " |")
            if table.get("left_out"):
                lines += ["", "Left out of this table, their seed not yet finished by every estimator: " + "; ".join(
                    f"{est} seed {', '.join(map(str, seeds))}" for est, seeds in table["left_out"].items()) + "."]
            for name, paired in (("success", table["paired"]), ("score", table["paired_score"])):
                if not any(p["seeds"] for p in paired.values()):
                    continue
                lines += ["", f"{REFERENCE} − baseline, {name}, paired by game within a seed (two-level bootstrap "
                          "95%):", "", "| baseline | seeds | difference [95%] | seeds gaca ahead / behind |",
                          "|---|---|---|---|"]
                for est, p in paired.items():
                    if p["seeds"]:
                        lines.append(f"| {est} | {p['seeds']} | {p['mean']:+.3f} [{p['lo']:+.3f}, {p['hi']:+.3f}] | "
                                     f"{p['ahead']} / {p['behind']} |")
            lines.append("")
        lines += ["Mean seconds per iteration (one thread per run):", "",
                  "| estimator | " + " | ".join(k.split("/")[1][:-2] for k in TIMING) + " |",
                  "|---|" + "---|" * len(TIMING)]
        for est, t in result["timing"].items():
            lines.append(f"| {est} | " + " | ".join(f"{t[k]:.2f}" for k in TIMING) + " |")
        lines.append("")
    odd = {name: fps for entry in data.values() for name, fps in entry.get("not_comparable", {}).items()}
    if odd:
        lines += ["## Not comparable", "", "Finished from another warm start than their seed's recorded one (another "
                  "machine: CPU numerics differ after thousands of SFT steps), so left out of every table and counted "
                  "as left to run; rerun their seed on one machine (delete its records):", ""]
        lines += [f"- {name}: warm start {ours}, the seed's {seeds}" for name, (ours, seeds) in odd.items()]
        lines.append("")
    left = left_to_run(matrix, data)
    total = len(matrix.runs())
    lines += ["## Left to run", "", f"{total - sum(len(v) for e in left.values() for v in e.values())} of {total} "
              "runs finished." + (" Unfinished (setting: estimator seeds):" if left else ""), ""]
    lines += [f"- {setting}: " + "; ".join(f"{est} {', '.join(map(str, seeds))}" for est, seeds in ests.items())
              for setting, ests in left.items()]
    return "\n".join(lines) + "\n"


def left_to_run(matrix: CompareMatrix, data: dict[str, Any]) -> dict[str, dict[str, list[int]]]:
    """Per setting and estimator, the seeds without a complete record."""
    left: dict[str, dict[str, list[int]]] = {}
    for run in matrix.runs():
        record = data.get(run.setting.name, {}).get("runs", {}).get(run.estimator, {}).get(run.seed)
        if not is_complete(record, run.eval_splits):
            left.setdefault(run.setting.name, {}).setdefault(run.estimator, []).append(run.seed)
    return left


def plots(data: dict[str, Any], summary: dict[str, Any], matrix: CompareMatrix, out_dir: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    settings = list(data)
    fig, axes = plt.subplots(1, max(1, len(settings)), figsize=(6 * max(1, len(settings)), 4), squeeze=False)
    for ax, setting in zip(axes[0], settings, strict=False):
        rows = next(iter(summary[setting]["splits"].values()))["rows"]  # the table's seeds, so that curves agree
        for est in matrix.estimators:
            curves = [r["curve"] for s, r in data[setting]["runs"].get(est, {}).items()
                      if r["curve"] and s in rows[est]["seeds"]]
            if not curves:
                continue
            n = min(len(c) for c in curves)
            x = np.mean([[p[1] for p in c[:n]] for c in curves], axis=0)
            y = np.array([[p[2] for p in c[:n]] for c in curves])
            ax.plot(x, y.mean(0), "o-", ms=3, label=f"{est} ({len(curves)} seeds)")
            if len(curves) > 1:
                ax.fill_between(x, y.min(0), y.max(0), alpha=0.15)
        ax.set_title(setting)
        ax.set_xlabel("environment steps (training)")
        ax.set_ylabel("held-out success (the run's eval split)")
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:  # no finished evaluation yet: no legend
            ax.legend(fontsize=8)
    paths.append(save_figure(fig, out_dir / "curves.png"))

    specs = {spec.name: spec for spec in matrix.settings}
    width = max(len(matrix.splits_of(specs[s])) for s in settings) if settings else 1
    fig, axes = plt.subplots(max(1, len(settings)), width, figsize=(4 * width, 3.2 * max(1, len(settings))),
                             squeeze=False)
    for i, setting in enumerate(settings):
        splits = matrix.splits_of(specs[setting])
        for ax in axes[i][len(splits):]:
            ax.set_axis_off()
        for j, split in enumerate(splits):
            ax = axes[i][j]
            rows = summary[setting]["splits"][split]["rows"]
            names = [e for e in [*matrix.estimators, "warm start"] if rows.get(e, {}).get("all")]
            vals = [np.array(rows[e]["all"], dtype=float) for e in names]
            ax.bar(range(len(names)), [v.mean() for v in vals],
                   yerr=[v.std(ddof=1) if len(v) > 1 else 0 for v in vals], color="tab:blue", alpha=0.7, capsize=3)
            for k, v in enumerate(vals):
                ax.scatter(np.full(len(v), k), v, color="k", s=8, zorder=3)
            ax.set_xticks(range(len(names)), names, rotation=30, fontsize=8)
            ax.set_title(f"{setting}: {split}", fontsize=9)
            ax.set_ylim(0, 1)
            ax.grid(axis="y", alpha=0.3)
    paths.append(save_figure(fig, out_dir / "final.png"))
    return paths


def _won_string(record: dict[str, Any]) -> str:
    """A split's per-game outcomes in one string (1 won, 0 lost, x crashed), in game order."""
    return "".join("x" if o["crashed"] else "1" if o["won"] else "0" for o in record["outcomes"])


def _run_record(run: dict[str, Any]) -> dict[str, Any]:
    final = {split: {"metrics": rec["metrics"], "won": _won_string(rec)} for split, rec in run["final"].items()}
    return {**{k: v for k, v in run.items() if k != "final"}, "final": final}


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True,
                              cwd=Path(__file__).parent).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def write_compare_report(matrix: CompareMatrix, out_dir: str | Path, *, command: str) -> list[Path]:
    """Write report.md, curves.png, final.png and result.json from the finished runs."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    data = collect(matrix)
    summary = tables(data, matrix)
    paths = [out_dir / "report.md"]
    paths[0].write_text(markdown(summary, data, matrix, command))
    paths += plots(data, summary, matrix, out_dir)
    raw = {"command": command, "commit": _commit(), "matrix": {k: v for k, v in vars(matrix).items()
                                                              if k != "settings"},
           "settings": [vars(s) for s in matrix.settings], "summary": summary,
           "runs": {setting: {est: {str(seed): _run_record(r) for seed, r in runs.items()}
                              for est, runs in entry["runs"].items()} for setting, entry in data.items()}}
    paths.append(out_dir / "result.json")
    paths[-1].write_text(json.dumps(raw, indent=1, default=str) + "\n")
    return paths


__all__ = ["collect", "left_to_run", "markdown", "paired_difference", "plots", "tables", "write_compare_report"]
