"""Speed and memory of the advantage estimators on ALFWorld-shaped step tables.

    python benchmarks/advantage_speed.py [--sizes 1000 10000 100000 1000000] [--quick]

For each size and estimator: the time to build and validate the ``StepBatch`` (this computes the
per-row log-prob sums the NLL needs) plus ``compute_advantages`` (layout, discounted returns,
grouping, criticality, mixing), best of several repeats; rows/s; the estimate-only time as a
multiple of one ``torch.argsort`` of N random int64 keys timed in the same run (``x sort``: a
machine-independent cost, the unit every estimator pays at least once for its layout); the slow
loop reference of tests/advantage/reference.py at the small sizes and the speedup over it; peak
extra memory of ``gaca`` at the largest size relative to the input log-prob tensor. Prints a
table, checks the targets of issue 2 and writes benchmarks/results/advantage_speed.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # for tests.advantage.reference

from gaca.advantage import ESTIMATORS, StepBatch, compute_advantages  # noqa: E402
from gaca.testing.synthetic import synthetic_batch  # noqa: E402

FIELDS = ("group_id", "traj_id", "step", "anchor", "reward", "logprobs", "mask")
ESTIMATOR_ORDER = ["grpo", "rloo", "gigpo", "fixed_mix", "gaca", "empg", "hgpo"]


def best_time(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def sort_time(rows: int, repeats: int) -> float:
    """Best time of one ``torch.argsort`` of ``rows`` random int64 keys: the cost unit of the table."""
    keys = torch.randint(0, 2**62, (rows,), generator=torch.Generator().manual_seed(rows))
    return best_time(lambda: torch.argsort(keys), repeats)


def time_estimator(fields: dict, name: str, repeats: int) -> tuple[float, float]:
    """(build + estimate seconds, estimate-only seconds), each best of ``repeats``."""
    total = best_time(lambda: compute_advantages(StepBatch(**fields), name), repeats)
    batch = StepBatch(**fields)
    compute_only = best_time(lambda: compute_advantages(batch, name), repeats)
    return total, compute_only


MEMORY_PROBE = r"""
import json, sys, torch
from gaca.advantage import StepBatch, compute_advantages
from gaca.testing.synthetic import synthetic_batch
batch = synthetic_batch(int(sys.argv[1]), seed=1)
fields = {k: getattr(batch, k) for k in FIELDS_TUPLE}
del batch
def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024
# No warm-up call: memory freed by one would stay resident in the allocator and hide the peak.
open("/proc/self/clear_refs", "w").write("5")  # reset the peak-RSS watermark (Linux)
before = status("VmRSS:")
out = compute_advantages(StepBatch(**fields), "gaca")
print(json.dumps({"peak_extra_bytes": status("VmHWM:") - before, "logprobs_bytes": fields["logprobs"].nbytes}))
""".replace("FIELDS_TUPLE", repr(FIELDS))


def measure_memory(rows: int) -> dict | None:
    if not Path("/proc/self/clear_refs").exists():
        return None
    run = subprocess.run([sys.executable, "-c", MEMORY_PROBE, str(rows)], capture_output=True, text=True,
                         env={"PYTHONPATH": str(ROOT / "src"), "PATH": ""}, check=True)
    result = json.loads(run.stdout)
    result["ratio"] = result["peak_extra_bytes"] / result["logprobs_bytes"]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000, 1_000_000])
    parser.add_argument("--reference-max-rows", type=int, default=10_000)
    parser.add_argument("--quick", action="store_true", help="sizes 1e3..1e5 only (a smoke run)")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "advantage_speed.json")
    args = parser.parse_args()
    sizes = [s for s in args.sizes if s <= 100_000] if args.quick else args.sizes
    from tests.advantage.reference import reference_advantages

    torch.manual_seed(0)
    rows_out = []
    load_before = os.getloadavg()
    cpu = platform.processor() or platform.machine()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {cpu}, load average {load_before[0]:.2f} "
          f"on {os.cpu_count()} cores (the x sort column is the robust one)")
    header = (f"{'rows':>9} {'estimator':>10} {'total s':>9} {'compute s':>10} {'x sort':>7} {'rows/s':>12} "
              f"{'reference s':>12} {'speedup':>9}")
    print(header)
    print("-" * len(header))
    for rows in sizes:
        batch = synthetic_batch(rows, seed=rows)
        fields = {k: getattr(batch, k) for k in FIELDS}
        repeats = 3 if rows >= 1_000_000 else 5
        sort_s = sort_time(rows, repeats)
        for name in ESTIMATOR_ORDER + sorted(set(ESTIMATORS) - set(ESTIMATOR_ORDER)):
            total, compute_only = time_estimator(fields, name, repeats)
            reference = None
            if rows <= args.reference_max_rows:
                reference = best_time(lambda name=name, batch=batch: reference_advantages(batch, name), 1)
            entry = dict(rows=rows, estimator=name, total_s=total, compute_s=compute_only, sort_s=sort_s,
                         compute_per_sort=compute_only / sort_s, rows_per_s=rows / total,
                         reference_s=reference, speedup=(reference / total) if reference else None)
            rows_out.append(entry)
            ref = f"{reference:12.3f} {reference / total:8.0f}x" if reference else f"{'-':>12} {'-':>9}"
            print(f"{rows:>9} {name:>10} {total:9.4f} {compute_only:10.4f} {compute_only / sort_s:7.1f} "
                  f"{rows / total:12.3e} {ref}")

    def lookup(rows, name, key="total_s"):
        return next(e[key] for e in rows_out if e["rows"] == rows and e["estimator"] == name)

    largest = max(sizes)
    targets = {}
    memory = measure_memory(largest)
    if largest >= 1_000_000:
        targets["gaca_1e6_total_s<=0.5"] = lookup(1_000_000, "gaca")
    targets["gaca/gigpo_total<=1.3"] = lookup(largest, "gaca") / lookup(largest, "gigpo")
    targets["gaca/gigpo_compute_only"] = lookup(largest, "gaca", "compute_s") / lookup(largest, "gigpo", "compute_s")
    if largest // 10 in sizes:
        targets["gaca_time_10x_rows<=12x"] = lookup(largest, "gaca") / lookup(largest // 10, "gaca")
    if memory:
        targets["gaca_peak_extra_memory/logprobs<=3"] = memory["ratio"]
    limits = {"gaca_1e6_total_s<=0.5": 0.5, "gaca/gigpo_total<=1.3": 1.3, "gaca_time_10x_rows<=12x": 12.0,
              "gaca_peak_extra_memory/logprobs<=3": 3.0}
    print()
    for key, value in targets.items():
        verdict = "" if key not in limits else ("  PASS" if value <= limits[key] else "  FAIL")
        print(f"{key:40s} {value:8.3f}{verdict}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    result = dict(
        machine=dict(platform=platform.platform(), processor=platform.processor(), threads=torch.get_num_threads(),
                     torch=torch.__version__, device="cpu", cores=os.cpu_count(),
                     load_average_before=load_before[0], load_average_after=os.getloadavg()[0]),
        batch_shape="groups of 8 trajectories, 5-50 steps, sparse 10/0 reward, 12 anchor states per group, 32 tokens",
        results=rows_out, memory=memory, targets=targets,
        passed={k: targets[k] <= v for k, v in limits.items() if k in targets},
    )
    args.out.write_text(json.dumps(result, indent=2))
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
