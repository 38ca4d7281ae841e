"""Time of the premise statistics (``gaca.lab.premise``) on an accuracy sample of issue 36's size.

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/premise_speed.py [--groups 48] [--steps-per-group 21]
        [--replicates 1000] [--splits 50] [--repeats 3]

Synthetic rows shaped like the phase-1 sample (48 episode groups, about 1,000 scored steps, 95% with
a step-level peer, truth from GACA's own map plus noise). For each statistic: the best wall time of
``--repeats`` runs on one thread and the result it gave. Issue 36 asks that the bootstrap of the
fitted weight map (1,000 replicates, each re-fitting on the 21 × 41 grid plus 6 refinement rounds)
run in well under a minute on one core. Prints a table and writes
benchmarks/results/premise_speed.json (with the machine's load average, since the machine is shared).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import numpy as np

from gaca.lab import premise

ROOT = Path(__file__).resolve().parents[1]


def rows(groups: int, per_group: int, seed: int = 0) -> premise.PremiseRows:
    rng = np.random.default_rng(seed)
    n = groups * per_group
    episode, step, crit = rng.normal(size=n), rng.normal(size=n), rng.normal(size=n)
    peer = rng.random(n) < 0.95
    w = np.where(peer, np.clip(0.6 + 0.3 * crit, 0, 1), 0.0)
    truth = (1 - w) * episode + w * step + 0.8 * rng.normal(size=n)
    return premise.PremiseRows(truth, episode, step, crit, peer, np.repeat(np.arange(groups), per_group))


def best_time(fn, repeats: int):
    best, out = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return best, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=48)
    parser.add_argument("--steps-per-group", type=int, default=21)
    parser.add_argument("--replicates", type=int, default=1000)
    parser.add_argument("--splits", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    data = rows(args.groups, args.steps_per_group)
    b = args.replicates
    cases = {
        "fit_weight_map": lambda: premise.fit_weight_map(data),
        f"bootstrap_weight_map B={b}": lambda: premise.bootstrap_weight_map(
            data, replicates=b, rng=np.random.default_rng(1)),
        f"interaction_model B={b}": lambda: premise.interaction_model(data, replicates=b, rng=np.random.default_rng(2)),
        f"bin_weights B={b}": lambda: premise.bin_weights(data, replicates=b, rng=np.random.default_rng(3)),
        f"cross_fit R={args.splits}": lambda: premise.cross_fit(data, splits=args.splits, rng=np.random.default_rng(4)),
    }
    results = {}
    print(f"{data.truth.size} steps, {args.groups} groups, threads: OMP={os.environ.get('OMP_NUM_THREADS')}")
    print(f"{'statistic':32s} {'seconds':>8s}")
    for name, fn in cases.items():
        seconds, _ = best_time(fn, args.repeats)
        results[name] = seconds
        print(f"{name:32s} {seconds:8.3f}")
    boot = premise.bootstrap_weight_map(data, replicates=b, rng=np.random.default_rng(1))
    print(f"kappa* = {boot.kappa.value:.3f} [{boot.kappa.lo:.3f}, {boot.kappa.hi:.3f}], "
          f"P(kappa* > 0) = {boot.p_kappa_positive:.3f}")
    out = {"steps": int(data.truth.size), "groups": args.groups, "replicates": b, "splits": args.splits,
           "repeats": args.repeats, "seconds_best": results, "threads": os.environ.get("OMP_NUM_THREADS"),
           "load_average": os.getloadavg(), "python": platform.python_version(), "numpy": np.__version__}
    path = ROOT / "benchmarks" / "results" / "premise_speed.json"
    path.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
