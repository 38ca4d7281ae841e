"""Where each estimator puts its credit: invalid-action steps against valid ones.

The compare report shows GACA ending with fewer invalid actions than every baseline on the long
setting, at level success. This script tests the explanation on a run's own policy: it collects
rollouts on training games exactly as a training iteration does (same seeds, same sampling), then
computes every estimator's per-step advantage on the same steps and prints, for invalid and valid
steps, the mean response NLL, GACA's step-level weight and each estimator's mean advantage, and the
invalid-valid gap of each estimator in units of its own standard deviation.

    python benchmarks/invalid_step_credit.py RUN_DIR [--iterations 80 81 82 83] [--out FILE.json]

RUN_DIR is an ordinary ``gaca train`` run directory (config.json and checkpoint.pt); it is copied
to a temporary directory first and left untouched. Writes JSON (default
``benchmarks/results/invalid_step_credit/<run name>.json``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import tempfile
from pathlib import Path

import torch

from gaca.advantage import compute_advantages
from gaca.config import from_dict
from gaca.rollout import collect_rollouts
from gaca.train.config import TrainConfig
from gaca.train.run import TrainingRun
from gaca.train.schedule import iteration_generator, train_task_seeds

ESTIMATORS = ("grpo", "rloo", "gigpo", "fixed_mix", "gaca")


def credit_by_validity(run_dir: Path, iterations: list[int]) -> dict[str, dict[str, float]]:
    """Per ``invalid``/``valid`` step: count, mean NLL, GACA's mean weight and every estimator's mean
    advantage, over the rollouts of ``iterations`` drawn from the run's checkpointed policy."""
    rows: dict[str, list[torch.Tensor]] = {"invalid": [], "nll": [], "weight": []}
    rows.update({est: [] for est in ESTIMATORS})
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "run"
        shutil.copytree(run_dir, copy, ignore=shutil.ignore_patterns("events.*", "*.png"))
        cfg = from_dict(TrainConfig, json.loads((copy / "config.json").read_text()))
        cfg = dataclasses.replace(cfg, out_dir=str(copy), progress=False, tensorboard=False)
        with TrainingRun(cfg, resume=True) as run:
            for it in iterations:
                batch = collect_rollouts(run.policy, run.train_pool, train_task_seeds(cfg, it), cfg.rollout,
                                         generator=iteration_generator(cfg.seed, it))
                outputs = {est: compute_advantages(batch.steps, est, **cfg.advantage_options)
                           for est in ESTIMATORS}
                rows["invalid"].append(batch.invalid)
                rows["nll"].append(outputs["gaca"].nll)
                rows["weight"].append(outputs["gaca"].weight)
                for est, out in outputs.items():
                    rows[est].append(out.advantage)
    cat = {k: torch.cat(v) for k, v in rows.items()}
    table = {}
    for name, mask in (("invalid", cat["invalid"]), ("valid", ~cat["invalid"])):
        table[name] = {"steps": int(mask.sum()), "nll": float(cat["nll"][mask].mean()),
                       "gaca_weight": float(cat["weight"][mask].mean()),
                       **{f"adv/{est}": float(cat[est][mask].mean()) for est in ESTIMATORS}}
    # the estimators' scales differ (rloo is not normalized): the invalid-valid gap in units of each
    # estimator's own standard deviation over all steps says which one separates them most
    table["gap/std"] = {f"adv/{est}": (table["invalid"][f"adv/{est}"] - table["valid"][f"adv/{est}"])
                        / float(cat[est].std()) for est in ESTIMATORS}
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--iterations", type=int, nargs="+", default=[80, 81, 82, 83],
                        help="whose task seeds and sampling streams to use (default: the 4 after 80)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    if not (args.run_dir / "checkpoint.pt").is_file():
        parser.error(f"{args.run_dir} holds no checkpoint.pt (give a gaca train run directory)")
    table = credit_by_validity(args.run_dir, args.iterations)
    cols = ["steps", "nll", "gaca_weight", *(f"adv/{e}" for e in ESTIMATORS)]
    print("| rows | " + " | ".join(cols) + " |\n|---|" + "---|" * len(cols))
    for name, row in table.items():
        print(f"| {name} | " + " | ".join(f"{row[c]:.4g}" if c in row else "" for c in cols) + " |")
    out = args.out or Path("benchmarks/results/invalid_step_credit") / (
        "-".join(args.run_dir.resolve().parts[-3:]) + ".json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"run_dir": str(args.run_dir), "iterations": args.iterations, "table": table},
                              indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
