"""The accuracy report a person reads: markdown, three PNG plots and the result file.

    out_dir/report.md        estimators × statistics with 95% intervals (best in bold), the population
                             view, subsets, the premise (fitted weight map, interaction model,
                             cross-fitted gain), the optimal mixture per criticality quintile, counts
    out_dir/correlation.png  Pearson and Spearman of every setting, with intervals and the noise ceiling
    out_dir/mixture.png      measured w* per criticality quintile, GACA's default map and the fitted map
    out_dir/scatter.png      estimated against true advantage for grpo, gigpo and GACA's default
    out_dir/result.json      the measured data (``AccuracyData``: every scored step) and the analysis
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import torch

from gaca.advantage.mixing import mixing_weight
from gaca.lab.accuracy.analysis import AccuracyAnalysis, TruthScores
from gaca.lab.accuracy.data import AccuracyData
from gaca.lab.accuracy.grid import DEFAULT_GACA
from gaca.lab.accuracy.score import HIGHER_IS_BETTER, METRICS, SubsetScores
from gaca.lab.figures import jsonable, pyplot, save_figure
from gaca.lab.stats import Estimate
from gaca.persist import atomic_write, read_json, write_json

SCATTER = ("grpo", "gigpo", DEFAULT_GACA)
SUBSET_SETTINGS = ("grpo", "rloo", "gigpo", "fixed_mix w0=0.5", DEFAULT_GACA, "empg", "hgpo K=2")
METRIC_TITLES = {"pearson": "Pearson r", "spearman": "Spearman ρ", "sign": "sign agreement",
                 "affine_rmse": "error after affine fit"}


def _fmt(cell: Estimate | None, bold: bool = False) -> str:
    if cell is None or not math.isfinite(cell.value):
        return "n/a"
    text = f"{cell.value:.3f}"
    if math.isfinite(cell.lo):
        text += f" [{cell.lo:.3f}, {cell.hi:.3f}]"
    return f"**{text}**" if bold else text


def _best(subset: SubsetScores, metric: str, labels: list[str] | None = None) -> str | None:
    values = {k: v.metric(metric).value for k, v in subset.settings.items()
              if (labels is None or k in labels) and math.isfinite(v.metric(metric).value)}
    if not values:
        return None
    pick = max if HIGHER_IS_BETTER[metric] else min
    return pick(values, key=values.get)


def _main_table(subset: SubsetScores) -> list[str]:
    best = {m: _best(subset, m) for m in METRICS}
    lines = ["| estimator | " + " | ".join(METRIC_TITLES[m] for m in METRICS)
             + f" | Pearson r − {DEFAULT_GACA}'s (paired) |", "|---|" + "---|" * (len(METRICS) + 1)]
    for label, row in subset.settings.items():
        lines.append(f"| {label} | " + " | ".join(_fmt(row.metric(m), best[m] == label) for m in METRICS)
                     + f" | {_fmt(row.delta_pearson)} |")
    return lines


def _subset_table(scores: dict[str, SubsetScores], metric: str) -> list[str]:
    labels = [s for s in SUBSET_SETTINGS if s in scores["all"].settings]
    lines = ["| subset | steps | " + " | ".join(labels) + " |", "|---|---|" + "---|" * len(labels)]
    for name, subset in scores.items():
        best = _best(subset, metric, labels)
        lines.append(f"| {name} | {subset.steps} | "
                     + " | ".join(_fmt(subset.settings[k].metric(metric), best == k) for k in labels) + " |")
    return lines


def _truth_lines(name: str, truth: TruthScores) -> list[str]:
    lines = [f"True advantage ({name}): sd {truth.truth_sd:.3f} across steps, RMS standard error "
             f"{truth.truth_se_rms:.3f}; a perfect estimate would reach a Pearson r of about "
             f"{truth.noise_ceiling:.2f} against this noisy truth (the noise ceiling)."]
    return lines


def _premise_lines(analysis: AccuracyAnalysis) -> list[str]:
    p = analysis.premise
    if p is None:
        return ["", "Too few steps or groups for the premise statistics."]
    m, i, x = p.weight_map, p.interaction, p.cross_fit
    lines = ["", "## The premise: does decision uncertainty mark where step-level credit is better?", "",
             "GACA's own map fitted to the truth: (w0*, κ*) of w = clip(w0 + κ·c) maximizing the Pearson r of "
             "(1 − w)·A^E + w·A^S with the undiscounted truth (rows without a peer at w = 0); the premise says "
             "κ* > 0. Beside it the best constant weight (the fixed mixture fitted the same way), the pooled "
             "interaction model (premise: d > c) and the out-of-sample gain of the fitted map over the fitted "
             "constant (fit on half of the groups, score on the other half, over random halves).", "",
             "| statistic | value [95% over groups] |", "|---|---|",
             f"| κ* | {_fmt(m.kappa)} (P(κ* > 0) = {m.p_kappa_positive:.2f}) |",
             f"| w0* | {_fmt(m.w0)} |",
             f"| r of the fitted map | {_fmt(m.correlation)} |",
             f"| best constant weight w0 (κ = 0), its r | {p.constant.w0:.2f}, {p.constant.correlation:.3f} |",
             f"| interaction a (A^E), b (A^S) | {_fmt(i.a)}, {_fmt(i.b)} |",
             f"| interaction c (crit·A^E), d (crit·A^S) | {_fmt(i.c)}, {_fmt(i.d)} |",
             f"| d − c | {_fmt(i.d_minus_c)} (P(d > c) = {i.p_d_greater_c:.2f}) |",
             f"| cross-fitted gain in r (map − constant) | {x.mean:+.4f} (spread over {x.splits} splits "
             f"[{x.lo:+.4f}, {x.hi:+.4f}], > 0 in {x.share_positive:.0%}; held-out r {x.gaca:.3f} vs {x.fixed:.3f}) |"]
    if p.population is not None:
        pm = p.population
        lines.append(f"| κ*, w0* over the population (inverse-inclusion weights) | {_fmt(pm.kappa)}, {_fmt(pm.w0)} "
                     f"(P(κ* > 0) = {pm.p_kappa_positive:.2f}) |")
    return lines


def markdown(data: AccuracyData, analysis: AccuracyAnalysis, command: str) -> str:
    """The report's text (see module docstring)."""
    c, lab = data.counts, data.lab
    und, dis = analysis.undiscounted, analysis.discounted
    mode = data.run_config.get("rollout", {}).get("action_mode", "generate")
    lines = [
        "# Credit accuracy against Monte-Carlo truth", "",
        f"Checkpoint `{data.checkpoint}` (action mode `{mode}`); command `{command}`.",
        f"{c.rollout_episodes} episodes in {lab.groups} groups sampled as in training (success "
        f"{c.rollout_success:.2f}, {c.rollout_steps} steps, {c.peer_share:.0%} with a step-level peer); "
        f"{analysis.steps_scored} steps scored (stratified over position × criticality quintile; "
        f"{analysis.steps_dropped} without a usable truth), each with {lab.continuations} continuations for Q and "
        f"{lab.continuations} for V: {c.continuations} continuations, {c.env_steps} environment steps, "
        f"{c.policy_calls} batched policy calls, {c.continuation_s:.0f} s; {c.mismatches} continuations did not "
        "restore the recorded state.", "",
        *_truth_lines("undiscounted return-to-go", und),
        f"Intervals: 95% bootstrap over episode groups ({lab.bootstrap} replicates). Sign agreement is over the "
        f"{und.scores['all'].significant} steps whose truth is more than 2 SE from 0. Standard errors: "
        "the sample sd of the continuations' returns, floored Jeffreys-style where all continuations agree.", "",
        "## All scored steps (undiscounted truth)", "", *_main_table(und.scores["all"]), "",
    ]
    if und.population is not None:
        lines += ["## The population the sample stands for (inverse-inclusion weights, undiscounted truth)", "",
                  "The stratified sample over-represents rare (position, criticality) cells; weighting each step by "
                  "its cell's rows over its sampled rows estimates the statistics over every step of the rollout.",
                  "", *_main_table(und.population), ""]
    lines += ["## By subset: Pearson r (undiscounted truth)", "", *_subset_table(und.scores, "pearson"), "",
              "## Against the discounted truth (γ-discounted return-to-go): all steps", "",
              *_truth_lines("γ-discounted", dis), "", *_main_table(dis.scores["all"])]
    lines += _premise_lines(analysis)
    wmap = analysis.weight_map
    bins = analysis.premise.bins if analysis.premise is not None else ()
    lines += ["", "## The least-squares mixture per criticality quintile (descriptive)", "",
              "A ≈ a·A^E + b·A^S fitted in each quintile of GACA's criticality over steps with a peer; w* = b/(a + b) "
              "is unidentified where the interval of a + b holds 0 (marked: the ratio runs to ±∞ there). GACA's "
              f"weight at the quintile's mean criticality is its default map (w0 = {wmap['w0']:g}, "
              f"κ = {wmap['kappa']:g}).", "",
              "| quintile | mean criticality | steps | w* [95%] | identified | GACA's w |", "|---|---|---|---|---|---|"]
    for row in bins:
        lines.append(f"| q{row.bin + 1} | {row.criticality_mean:.2f} | {row.steps} | {_fmt(row.w_star)} | "
                     f"{'yes' if row.identified else 'no'} | {float(gaca_weight(row.criticality_mean, wmap)[0]):.2f} |")
    nw = analysis.nll_weight
    if math.isfinite(nw.spearman_nll):
        lines += ["", f"Per-step optimal weight (the w that makes (a + b)·((1 − w)A^E + w·A^S) equal the truth, "
                  f"{nw.steps} steps where A^S and A^E differ by at least 0.1): Spearman ρ with the step's NLL "
                  f"{nw.spearman_nll:.3f}, with the expected NLL at its state (mean over the V continuations' first "
                  f"actions) {nw.spearman_expected_nll:.3f}."]
    return "\n".join(lines) + "\n"


def gaca_weight(c: float | np.ndarray, wmap: dict[str, Any]) -> np.ndarray:
    """GACA's weight w(c) of a step with a peer under the options ``wmap`` (``mixing_weight``)."""


    crit = torch.as_tensor(np.atleast_1d(np.asarray(c, dtype=np.float64)))
    return mixing_weight(crit, torch.ones(crit.shape, dtype=torch.bool), **wmap).numpy()


def plots(data: AccuracyData, analysis: AccuracyAnalysis, out_dir: Path) -> list[Path]:
    """Write the three PNGs; returns their paths."""
    plt = pyplot()
    out: list[Path] = []
    rows = analysis.undiscounted.scores["all"].settings
    labels = list(rows)
    fig, ax = plt.subplots(figsize=(8, 0.28 * len(labels) + 1.5))
    y = np.arange(len(labels))
    for offset, metric, color in ((-0.18, "pearson", "tab:blue"), (0.18, "spearman", "tab:orange")):
        cells = [rows[k].metric(metric) for k in labels]
        v = np.array([c.value for c in cells])
        err = np.nan_to_num(np.stack([v - np.array([c.lo for c in cells]), np.array([c.hi for c in cells]) - v]))
        ax.barh(y + offset, v, height=0.34, color=color, label=METRIC_TITLES[metric], xerr=np.abs(err),
                error_kw={"lw": 0.8})
    ax.set_yticks(y, labels, fontsize=7)
    ax.invert_yaxis()
    ceiling = analysis.undiscounted.noise_ceiling
    if math.isfinite(ceiling):
        ax.axvline(ceiling, color="gray", ls="--", lw=1, label=f"noise ceiling {ceiling:.2f}")
    ax.set_xlabel("correlation with the Monte-Carlo advantage (95% bootstrap interval)")
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(axis="x", alpha=0.3)
    out.append(save_figure(fig, out_dir / "correlation.png"))

    fig, ax = plt.subplots(figsize=(6, 4))
    mix = [b for b in (analysis.premise.bins if analysis.premise is not None else ()) if b.identified]
    grid = np.linspace(-2.5, 2.5, 100)
    if mix:
        c = np.array([r.criticality_mean for r in mix])
        w = np.array([r.w_star.value for r in mix])
        lo, hi = np.array([r.w_star.lo for r in mix]), np.array([r.w_star.hi for r in mix])
        ax.errorbar(c, w, yerr=np.nan_to_num(np.abs(np.stack([w - lo, hi - w]))), fmt="o", color="tab:red",
                    capsize=3, label="least-squares w* per quintile (95%; identified ones)")
    wmap = analysis.weight_map
    ax.plot(grid, gaca_weight(grid, wmap), color="tab:blue", label=f"GACA's default (w0={wmap['w0']:g}, "
            f"κ={wmap['kappa']:g})")
    if analysis.premise is not None:
        fit = analysis.premise.weight_map.fit
        ax.plot(grid, gaca_weight(grid, {**wmap, "w0": fit.w0, "kappa": fit.kappa, "weight_map": "clip"}),
                color="tab:green", ls="--", label=f"fitted to the truth (w0*={fit.w0:.2f}, κ*={fit.kappa:+.2f})")
    ax.set_ylim(-0.5, 1.5)
    ax.set_xlabel("criticality c")
    ax.set_ylabel("weight of the step-level signal (axis cut at -0.5, 1.5)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    out.append(save_figure(fig, out_dir / "mixture.png"))

    truth = data.steps.truth
    shown = [k for k in SCATTER if k in data.estimates]
    fig, axes = plt.subplots(1, len(shown), figsize=(4 * len(shown), 3.8), squeeze=False)
    for ax, label in zip(axes[0], shown, strict=True):
        est = data.estimates[label]
        ok = np.isfinite(truth)
        ax.scatter(est[ok], truth[ok], s=8, alpha=0.5)
        r = rows[label].pearson.value if label in rows else float("nan")
        ax.set_title(f"{label} (r = {r:.2f})", fontsize=9)
        ax.set_xlabel("estimated advantage")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("Monte-Carlo advantage")
    out.append(save_figure(fig, out_dir / "scatter.png"))
    return out


def write_accuracy_report(data: AccuracyData, analysis: AccuracyAnalysis, out_dir: str | Path, *,
                          command: str) -> list[Path]:
    """Write report.md, the PNGs and result.json into ``out_dir``; returns the paths written."""
    out_dir = Path(out_dir)
    paths = [atomic_write(out_dir / "report.md", markdown(data, analysis, command))]
    paths += plots(data, analysis, out_dir)
    paths.append(write_json(out_dir / "result.json", {"command": command, "data": data.to_json(),
                                                      "analysis": jsonable(analysis)}, indent=None))
    return paths


def load_accuracy_result(path: str | Path) -> tuple[AccuracyData, str]:
    """The measured data and command of a report's ``result.json`` (to analyse it again)."""
    raw = read_json(path)
    if raw is None:
        raise FileNotFoundError(f"no accuracy result at {path}")
    return AccuracyData.from_json(raw["data"]), raw["command"]


__all__ = ["gaca_weight", "load_accuracy_result", "markdown", "plots", "write_accuracy_report"]
