"""The accuracy report a person reads: a markdown table, three PNG plots and the raw JSON.

    out_dir/report.md        estimators × statistics with 95% intervals (best in bold), subsets,
                             the optimal mixture per criticality quintile, counts and the command
    out_dir/correlation.png  Pearson and Spearman of every setting, with intervals
    out_dir/mixture.png      measured w* per criticality quintile beside GACA's weight map
    out_dir/scatter.png      estimated against true advantage for grpo, gigpo and GACA's default
    out_dir/result.json      the measured data (every scored step) and the analysis
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from gaca.lab.grid import DEFAULT_GACA
from gaca.lab.score import HIGHER_IS_BETTER, METRICS

SCATTER = ("grpo", "gigpo", DEFAULT_GACA)
SUBSET_SETTINGS = ("grpo", "rloo", "gigpo", "fixed_mix w0=0.5", DEFAULT_GACA)
METRIC_TITLES = {"pearson": "Pearson r", "spearman": "Spearman ρ", "sign": "sign agreement",
                 "affine_rmse": "error after affine fit"}


def _fmt(cell: dict[str, float], bold: bool = False) -> str:
    if not math.isfinite(cell["value"]):
        return "n/a"
    text = f"{cell['value']:.3f}"
    if math.isfinite(cell["lo"]):
        text += f" [{cell['lo']:.3f}, {cell['hi']:.3f}]"
    return f"**{text}**" if bold else text


def _best(rows: dict[str, dict[str, dict[str, float]]], metric: str) -> str | None:
    values = {k: v[metric]["value"] for k, v in rows.items() if not k.startswith("_")
              and math.isfinite(v[metric]["value"])}
    if not values:
        return None
    pick = max if HIGHER_IS_BETTER[metric] else min
    return pick(values, key=values.get)


def _main_table(scores: dict[str, Any]) -> list[str]:
    rows = scores["all"]
    best = {m: _best(rows, m) for m in METRICS}
    paired = any("delta_pearson" in row for label, row in rows.items() if not label.startswith("_"))
    lines = ["| estimator | " + " | ".join(METRIC_TITLES[m] for m in METRICS)
             + (f" | Pearson r − {DEFAULT_GACA}'s (paired)" if paired else "") + " |",
             "|---|" + "---|" * (len(METRICS) + paired)]
    for label, row in rows.items():
        if label.startswith("_"):
            continue
        delta = f" | {_fmt(row['delta_pearson'])}" if paired else ""
        lines.append(f"| {label} | " + " | ".join(_fmt(row[m], best[m] == label) for m in METRICS) + delta + " |")
    return lines


def _subset_table(scores: dict[str, Any], metric: str) -> list[str]:
    labels = [s for s in SUBSET_SETTINGS if s in scores["all"]]
    lines = ["| subset | steps | " + " | ".join(labels) + " |", "|---|---|" + "---|" * len(labels)]
    for name, rows in scores.items():
        best = _best({k: rows[k] for k in labels}, metric)
        count = int(rows["_steps"]["count"]["value"])
        lines.append(f"| {name} | {count} | " + " | ".join(_fmt(rows[k][metric], best == k) for k in labels) + " |")
    return lines


def markdown(data: Any, analysis: dict[str, Any], command: str) -> str:
    """The report's text (see module docstring)."""
    c = data.counts
    und = analysis["undiscounted"]
    lines = [
        "# Credit accuracy against Monte-Carlo truth",
        "",
        f"Checkpoint `{data.checkpoint}`; command `{command}`.",
        f"{int(c['rollout_episodes'])} episodes in {data.lab['groups']} groups sampled as in training "
        f"(success {c['rollout_success']:.2f}, {int(c['rollout_steps'])} steps, "
        f"{c['peer_share_all_rows']:.0%} with a step-level peer); {analysis['steps_scored']} steps scored "
        f"(stratified over position × criticality quintile), each with {data.lab['continuations']} continuations "
        f"for Q and {data.lab['continuations']} for V: {int(c['continuations'])} continuations, "
        f"{int(c['env_steps'])} environment steps, {int(c['policy_calls'])} batched policy calls, "
        f"{c['continuation_s']:.0f} s; {int(c['mismatches'])} continuations did not restore the recorded state.",
        "",
        f"True advantage: undiscounted return-to-go, sd {und['truth_sd']:.3f} across steps, RMS standard error "
        f"{und['truth_se_rms']:.3f}; a perfect estimate would reach a Pearson r of about "
        f"{und['noise_ceiling']:.2f} against this noisy truth. Intervals: 95% bootstrap over episode groups "
        f"({data.lab['bootstrap']} replicates). Sign agreement is over the "
        f"{int(und['scores']['all']['_steps']['significant']['value'])} steps whose truth is more than 2 SE from 0.",
        "",
        "## All scored steps (undiscounted truth)",
        "",
        *_main_table(und["scores"]),
        "",
        "## By subset: Pearson r (undiscounted truth)",
        "",
        *_subset_table(und["scores"], "pearson"),
        "",
        "## Against the discounted truth (γ-discounted return-to-go): all steps",
        "",
        *_main_table(analysis["discounted"]["scores"]),
        "",
        "## The optimal mixture per criticality quintile (steps with a step-level peer)",
        "",
        "A ≈ a·A^E + b·A^S fitted in each quintile of GACA's criticality; w* = b/(a + b). GACA's weight at the "
        "quintile's mean criticality is its default map "
        f"(w0 = {analysis['weight_map']['w0']:g}, κ = {analysis['weight_map']['kappa']:g}).",
        "",
        "| quintile | mean criticality | steps | w* [95%] | GACA's w |",
        "|---|---|---|---|---|",
    ]
    wmap = analysis["weight_map"]
    for row in analysis["mixture"]:
        cell = {"value": row["w_star_value"], "lo": row["w_star_lo"], "hi": row["w_star_hi"]}
        lines.append(f"| q{row['bin'] + 1} | {row['criticality_mean']:.2f} | {row['steps']} | {_fmt(cell)} | "
                     f"{float(gaca_weight(row['criticality_mean'], wmap)[0]):.2f} |")
    nll = analysis.get("mixture_nll", {})
    if "spearman_nll" in nll:
        lines += ["", f"Per-step optimal weight (the w that makes (a + b)·((1 − w)A^E + w·A^S) equal the truth, "
                  f"{nll['steps']} steps where A^S and A^E differ by at least 0.1): Spearman ρ with the step's NLL "
                  f"{nll['spearman_nll']:.3f}, with the expected NLL at its state (mean over the V "
                  f"continuations' first actions) {nll.get('spearman_expected_nll', float('nan')):.3f}."]
    return "\n".join(lines) + "\n"


def gaca_weight(c: float | np.ndarray, wmap: dict[str, Any]) -> np.ndarray:
    """GACA's weight w(c) of a step with a peer under the options ``wmap`` (``mixing_weight``)."""
    import torch

    from gaca.advantage.mixing import mixing_weight

    crit = torch.as_tensor(np.atleast_1d(np.asarray(c, dtype=np.float64)))
    return mixing_weight(crit, torch.ones(crit.shape, dtype=torch.bool), **wmap).numpy()


def save_figure(fig: Any, path: Path) -> Path:
    """Lay out, write (120 dpi) and close a matplotlib figure."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plots(data: Any, analysis: dict[str, Any], out_dir: Path) -> list[Path]:
    """Write the three PNGs; returns their paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out: list[Path] = []
    rows = {k: v for k, v in analysis["undiscounted"]["scores"]["all"].items() if not k.startswith("_")}
    labels = list(rows)
    fig, ax = plt.subplots(figsize=(8, 0.28 * len(labels) + 1.5))
    y = np.arange(len(labels))
    for offset, metric, color in ((-0.18, "pearson", "tab:blue"), (0.18, "spearman", "tab:orange")):
        v = np.array([rows[k][metric]["value"] for k in labels])
        lo = np.array([rows[k][metric]["lo"] for k in labels])
        hi = np.array([rows[k][metric]["hi"] for k in labels])
        ax.barh(y + offset, v, height=0.34, color=color, label=METRIC_TITLES[metric],
                xerr=np.nan_to_num(np.stack([v - lo, hi - v])), error_kw={"lw": 0.8})
    ax.set_yticks(y, labels, fontsize=7)
    ax.invert_yaxis()
    ceiling = analysis["undiscounted"]["noise_ceiling"]
    if math.isfinite(ceiling):
        ax.axvline(ceiling, color="gray", ls="--", lw=1, label=f"noise ceiling {ceiling:.2f}")
    ax.set_xlabel("correlation with the Monte-Carlo advantage (95% bootstrap interval)")
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(axis="x", alpha=0.3)
    out.append(save_figure(fig, out_dir / "correlation.png"))

    fig, ax = plt.subplots(figsize=(6, 4))
    mix = analysis["mixture"]
    if mix:
        c = np.array([r["criticality_mean"] for r in mix])
        w = np.array([r["w_star_value"] for r in mix])
        lo, hi = np.array([r["w_star_lo"] for r in mix]), np.array([r["w_star_hi"] for r in mix])
        ax.errorbar(c, w, yerr=np.nan_to_num(np.abs(np.stack([w - lo, hi - w]))), fmt="o-", color="tab:red",
                    capsize=3, label="measured w* (95%)")
        grid = np.linspace(min(c.min(), -2), max(c.max(), 2), 100)
        ax.plot(grid, gaca_weight(grid, analysis["weight_map"]), color="tab:blue",
                label=f"GACA's map (w0={analysis['weight_map']['w0']:g}, κ={analysis['weight_map']['kappa']:g})")
    ax.set_ylim(-0.5, 1.5)  # w* outside [0, 1] means the fit wants more than a convex mix; wider bars are cut
    ax.set_xlabel("criticality c (quintile mean)")
    ax.set_ylabel("weight of the step-level signal (axis cut at -0.5, 1.5)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    out.append(save_figure(fig, out_dir / "mixture.png"))

    truth = np.asarray(data.steps["truth"], dtype=np.float64)
    shown = [k for k in SCATTER if k in data.estimates]
    fig, axes = plt.subplots(1, len(shown), figsize=(4 * len(shown), 3.8), squeeze=False)
    for ax, label in zip(axes[0], shown, strict=True):
        est = np.asarray(data.estimates[label], dtype=np.float64)
        ok = np.isfinite(truth)
        ax.scatter(est[ok], truth[ok], s=8, alpha=0.5)
        r = rows[label]["pearson"]["value"] if label in rows else float("nan")
        ax.set_title(f"{label} (r = {r:.2f})", fontsize=9)
        ax.set_xlabel("estimated advantage")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("Monte-Carlo advantage")
    out.append(save_figure(fig, out_dir / "scatter.png"))
    return out


def write_accuracy_report(data: Any, analysis: dict[str, Any], out_dir: str | Path, *, command: str) -> list[Path]:
    """Write report.md, the PNGs and result.json into ``out_dir``; returns the paths written."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / "report.md"]
    paths[0].write_text(markdown(data, analysis, command))
    paths += plots(data, analysis, out_dir)
    raw = {"command": command, "data": dataclasses.asdict(data), "analysis": analysis}
    paths.append(out_dir / "result.json")
    paths[-1].write_text(json.dumps(raw, indent=1, default=_json_default) + "\n")
    return paths


def _json_default(value: Any) -> Any:
    if isinstance(value, (np.integer, np.floating)):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


__all__ = ["gaca_weight", "markdown", "plots", "save_figure", "write_accuracy_report"]
