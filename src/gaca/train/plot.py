"""PNG plots of a run directory: success curves and the GACA weight/criticality diagnostics."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from gaca.train.logger import read_metrics

logger = logging.getLogger(__name__)


def _series(records: list[dict[str, Any]], key: str) -> tuple[list[int], list[float]]:
    pts = [(r["iteration"], r[key]) for r in records if r.get(key) is not None]
    return [p[0] for p in pts], [float(p[1]) for p in pts]


def plot_run(run_dir: str | Path) -> list[Path]:
    """Write ``success.png`` and ``diagnostics.png`` into ``run_dir``; return their paths.

    success.png: training success (env/success) and held-out success (eval/success, overall and
    per family) against the iteration. diagnostics.png: the mean ± std of the step weight and the
    criticality, the share of steps with a step-level peer, and the last iteration's weight and
    criticality histograms.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    run_dir = Path(run_dir)
    records = read_metrics(run_dir)
    out: list[Path] = []

    fig, ax = plt.subplots(figsize=(7, 4.2))
    x, y = _series(records, "env/success")
    if x:
        ax.plot(x, y, label="train (sampled)", color="tab:blue", alpha=0.6)
    x, y = _series(records, "eval/success")
    if x:
        ax.plot(x, y, "o-", label="held-out", color="tab:red", lw=2)
    families = sorted({k for r in records for k in r if k.startswith("eval/success/")})
    for key in families:
        x, y = _series(records, key)
        ax.plot(x, y, ":", lw=1, label=key.split("/", 2)[2])
    ax.set_xlabel("iteration")
    ax.set_ylabel("success rate")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    ax.set_title(f"success: {run_dir.name}")
    fig.tight_layout()
    path = run_dir / "success.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    out.append(path)

    fig, axes = plt.subplots(2, 2, figsize=(10, 7))
    for ax, key, label in ((axes[0, 0], "adv/weight", "step weight w"),
                           (axes[0, 1], "adv/criticality", "criticality c")):
        x, m = _series(records, key + "_mean")
        _, s = _series(records, key + "_std")
        if x:
            ax.plot(x, m, color="tab:purple", label="mean")
            if len(s) == len(m):
                ax.fill_between(x, [a - b for a, b in zip(m, s, strict=True)],
                                [a + b for a, b in zip(m, s, strict=True)], alpha=0.25, color="tab:purple",
                                label="± std")
            ax.legend(fontsize=7)
        ax.set_title(label)
        ax.set_xlabel("iteration")
        ax.grid(alpha=0.3)
    ax = axes[1, 0]
    x, y = _series(records, "adv/has_peer")
    if x:
        ax.plot(x, y, color="tab:green", label="share of steps with a peer")
    x, y = _series(records, "env/invalid_ratio")
    if x:
        ax.plot(x, y, color="tab:orange", label="invalid-action ratio")
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("iteration")
    if ax.get_legend_handles_labels()[0]:  # a run of 0 iterations has no series
        ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    ax = axes[1, 1]
    last = next((r for r in reversed(records) if "hist/weight" in r), None)
    if last is not None:
        for key, color in (("hist/weight", "tab:purple"), ("hist/criticality", "tab:gray")):
            h = last.get(key)
            if h:
                edges, counts = h["edges"], h["counts"]
                ax.stairs(counts, edges, label=key.split("/")[1], color=color, fill=False, lw=1.5)
        ax.set_title(f"histograms at iteration {last['iteration']}")
        ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    fig.suptitle(f"advantage diagnostics: {run_dir.name}")
    fig.tight_layout()
    path = run_dir / "diagnostics.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    out.append(path)
    logger.info("wrote %s", ", ".join(str(p) for p in out))
    return out


__all__ = ["plot_run"]
