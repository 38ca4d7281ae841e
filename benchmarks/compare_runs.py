"""Compare two run directories metric for metric and weight for weight (a reproducibility check).

    python benchmarks/compare_runs.py RUN_A RUN_B [--iterations 5]

Prints, per logged iteration, the metrics that only one run has and those whose values differ
(timing and throughput keys are skipped: they measure the machine, not the run), a table of the
main numbers of run A, and whether the final checkpoints hold bit-identical weights. Writes the
comparison as JSON next to nothing: pass ``--out`` to keep it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

MACHINE_KEYS = ("time/", "perf/rollout_tokens_per_s", "perf/update_tokens_per_s", "perf/advantage_share",
                "sft/seconds", "sft/tokens_per_s")
SHOWN = ("env/success", "loss/policy", "adv/weight_mean", "adv/advantage_std", "eval/success")


def records(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_a", type=Path)
    ap.add_argument("run_b", type=Path)
    ap.add_argument("--iterations", type=int, default=None, help="compare the first N iterations only")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    rows = []
    for a, b in zip(records(args.run_a), records(args.run_b), strict=False):
        if args.iterations is not None and a["iteration"] > args.iterations:
            break
        ka = {k for k in a if not k.startswith(MACHINE_KEYS)}
        kb = {k for k in b if not k.startswith(MACHINE_KEYS)}
        rows.append({"iteration": a["iteration"], "only_a": sorted(ka - kb), "only_b": sorted(kb - ka),
                     "differ": sorted(k for k in ka & kb if a[k] != b[k]),
                     "a": {k: a[k] for k in SHOWN if k in a}})
    wa = torch.load(args.run_a / "checkpoint.pt", weights_only=False)["policy"]["model"]
    wb = torch.load(args.run_b / "checkpoint.pt", weights_only=False)["policy"]["model"]
    same_weights = wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)
    print(f"{'it':>3}  {'differ':>6}  {'only A':>6}  {'only B':>6}  " + "  ".join(f"{k:>18}" for k in SHOWN))
    for r in rows:
        vals = "  ".join(f"{r['a'][k]:>18.4f}" if k in r["a"] else f"{'':>18}" for k in SHOWN)
        print(f"{r['iteration']:>3}  {len(r['differ']):>6}  {len(r['only_a']):>6}  {len(r['only_b']):>6}  {vals}")
        for name in ("differ", "only_a", "only_b"):
            if r[name]:
                print(f"     {name}: {', '.join(r[name])}")
    print(f"final weights bit-identical: {same_weights}")
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"run_a": str(args.run_a), "run_b": str(args.run_b), "rows": rows,
                                        "same_weights": same_weights}, indent=1) + "\n")
    return 0 if same_weights and not any(r["differ"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
