"""How each estimator's training rollouts change over a comparison's runs, mean over seeds.

The compare report holds the held-out outcome; this reads the training side of the same runs
(``ROOT/SETTING/ESTIMATOR/seedN/metrics.jsonl``, the matrix's run directories, or, where those are
gone, ``RECORDS/SETTING/ESTIMATOR-seedN.json``, the committed records, which keep the default
metrics per iteration since records carried ``training``) and prints, per
metric, one row per estimator with its mean over the seeds in windows of iterations. The defaults
are the quantities that separate GACA from the baselines on the long setting: training success,
invalid-action ratio, the policy's mean per-token NLL on its own samples (``policy/nll``, a proxy
of its entropy) and episode length.

    python benchmarks/training_dynamics.py ROOT|RECORDS SETTING [--seeds 0 1 2] [--window 10] [--keys K ...]
        [--add SETTING_DIR ...] [--out FILE.json]

``--add`` puts the runs of other setting directories (a side matrix's, e.g. a variant of one
estimator) beside them, each estimator named ``ESTIMATOR@DIRECTORY``.

Writes JSON (default ``benchmarks/results/training_dynamics/SETTING.json``) and a PNG beside it
(each metric against iteration, mean over seeds per estimator). Unfinished runs count up to their
last iteration; a window's mean covers the seeds that reached it.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from gaca.lab.records import TRAINING, read_json, training_series
from gaca.lab.report import save_figure
from gaca.train.logger import read_metrics

KEYS = TRAINING


def iteration_series(run_dir: Path, keys: tuple[str, ...]) -> dict[str, np.ndarray]:
    """Per key, its value at each training iteration of one run (records with rollouts only)."""
    return {k: np.array(v, dtype=float) for k, v in training_series(read_metrics(run_dir), keys).items()}


def by_estimator(
    setting_dir: Path, keys: tuple[str, ...], seeds: list[int] | None = None
) -> dict[str, dict[str, list[np.ndarray]]]:
    """estimator -> key -> one series per seed, for every ``ESTIMATOR/seedN`` run under ``setting_dir``
    (only the ``seeds`` given, if any)."""
    out: dict[str, dict[str, list[np.ndarray]]] = {}
    for run in sorted(setting_dir.glob("*/seed*/metrics.jsonl")):
        if seeds is not None and run.parent.name.removeprefix("seed") not in {str(s) for s in seeds}:
            continue
        series = iteration_series(run.parent, keys)
        for k, v in series.items():
            out.setdefault(run.parent.parent.name, {}).setdefault(k, []).append(v)
    return out


def by_estimator_from_records(
    setting_dir: Path, keys: tuple[str, ...], seeds: list[int] | None = None
) -> dict[str, dict[str, list[np.ndarray]]]:
    """As ``by_estimator``, from a records directory's ``ESTIMATOR-seedN.json`` (those whose record
    keeps every key per iteration; older records do not)."""
    out: dict[str, dict[str, list[np.ndarray]]] = {}
    for path in sorted(setting_dir.glob("*-seed*.json")):
        estimator, seed = path.stem.rsplit("-seed", 1)
        if estimator == "warmstart" or (seeds is not None and int(seed) not in seeds):
            continue
        training = read_json(path).get("training", {})
        if not all(k in training for k in keys):
            continue
        for k in keys:
            out.setdefault(estimator, {}).setdefault(k, []).append(np.array(training[k], dtype=float))
    return out


def load(setting_dir: Path, keys: tuple[str, ...], seeds: list[int] | None) -> dict[str, dict[str, list[np.ndarray]]]:
    """A setting directory's runs: its run directories if it has any, else its records."""
    return by_estimator(setting_dir, keys, seeds) or by_estimator_from_records(setting_dir, keys, seeds)


def window_means(series: list[np.ndarray], window: int) -> list[tuple[float, int]]:
    """Per window of ``window`` iterations: the mean over the seeds that reached it of each seed's
    window mean, and the number of those seeds."""
    longest = max((len(s) for s in series), default=0)
    out = []
    for start in range(0, longest - window + 1, window):
        means = [s[start:start + window].mean() for s in series if len(s) >= start + window]
        out.append((float(np.mean(means)), len(means)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path, help="the matrix's run root (its matrix file's `root`), or its "
                        "records directory")
    parser.add_argument("setting")
    parser.add_argument("--seeds", type=int, nargs="+", default=None, help="these seeds only (default: all)")
    parser.add_argument("--window", type=int, default=10)
    parser.add_argument("--keys", nargs="+", default=list(KEYS))
    parser.add_argument("--add", type=Path, nargs="+", default=[], help="other setting directories, each "
                        "estimator of theirs named ESTIMATOR@DIRECTORY")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    setting_dir = args.root / args.setting
    if not setting_dir.is_dir():
        parser.error(f"{setting_dir} does not exist (give the matrix root and one of its settings)")
    if args.window < 1:
        parser.error(f"--window must be >= 1, got {args.window}")

    def runs_of(directory: Path) -> dict[str, dict[str, list[np.ndarray]]]:
        runs = load(directory, tuple(args.keys), args.seeds)
        if not runs:
            parser.error(f"no ESTIMATOR/seedN/metrics.jsonl nor ESTIMATOR-seedN.json with {args.keys} per "
                         f"iteration under {directory}")
        return runs

    data = runs_of(setting_dir)
    for directory in args.add:
        data.update({f"{est}@{directory.name}": v for est, v in runs_of(directory).items()})
    table = {est: {k: window_means(v, args.window) for k, v in keys.items()} for est, keys in data.items()}
    for key in args.keys:
        widths = max(len(rows[key]) for rows in table.values())
        heads = [f"{i * args.window + 1}-{(i + 1) * args.window}" for i in range(widths)]
        print(f"\n{key} (mean over seeds; seeds in brackets)\n| estimator | " + " | ".join(heads) + " |")
        print("|---|" + "---|" * widths)
        for est, rows in table.items():
            print(f"| {est} | " + " | ".join(f"{m:.3f} ({n})" for m, n in rows[key]) + " |")
    out = args.out or Path("benchmarks/results/training_dynamics") / f"{args.setting}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    record = {"root": str(args.root), "setting": args.setting, "added": [str(d) for d in args.add],
              "window": args.window, "seed_filter": args.seeds,
              "seeds": {est: len(next(iter(keys.values()))) for est, keys in data.items()},
              "windows": {est: {k: [{"mean": m, "seeds": n} for m, n in rows] for k, rows in keys.items()}
                          for est, keys in table.items()}}
    out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"\nwrote {out} and {plot(data, args.keys, out.with_suffix('.png'))}")


def plot(data: dict[str, dict[str, list[np.ndarray]]], keys: list[str], path: Path) -> Path:
    """Each key against iteration: per estimator, the mean over the seeds that reached an iteration."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(keys), figsize=(4.2 * len(keys), 3.4), squeeze=False)
    for ax, key in zip(axes[0], keys, strict=True):
        for est, series in data.items():
            longest = max(len(s) for s in series[key])
            mean = [np.mean([s[i] for s in series[key] if len(s) > i]) for i in range(longest)]
            # a 5-iteration running mean: single iterations (64 episodes) are noisy
            smooth = np.convolve(mean, np.ones(5) / 5, mode="valid") if longest >= 5 else np.array(mean)
            ax.plot(np.arange(len(smooth)) + (longest - len(smooth)) + 1, smooth, label=est)
        ax.set_title(key)
        ax.set_xlabel("iteration")
    axes[0][0].legend(fontsize=8)
    return save_figure(fig, path)


if __name__ == "__main__":
    main()
