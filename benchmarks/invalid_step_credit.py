"""Where each estimator puts its credit: invalid-action steps against valid ones.

The compare report shows GACA ending with fewer invalid actions than every baseline on the long
setting, at level success. This script tests the explanation on a run's own policy: it collects
rollouts on training games exactly as a training iteration does (same seeds, same sampling), then
computes every estimator's per-step advantage on the same steps and prints, for invalid and valid
steps, the mean response NLL, GACA's step-level weight and each estimator's mean advantage, and the
invalid-valid gap of each estimator in units of its own standard deviation.

It also measures how each estimator's credit couples to the response NLL among the steps taken
from one state (same task group, same anchor), ``coupling/within_state``: the correlation of ℓ_i
and A_i after centering both within each such state (states with at least two steps). A softmax
policy's entropy moves by about −η·Cov_{a∼π}(log π(a|s), A(s, a)) per policy-gradient step (Cui et
al. 2025, "The Entropy Mechanism of Reinforcement Learning for Reasoning Language Models"), so a
positive coupling (unlikely responses credited above likely ones from the same state) raises the
policy's NLL, a negative one lowers it. ``--warm-start`` draws the rollouts from the seed's warm
start instead of the run's checkpoint: the first iterations of training, identical for every
estimator of the seed.

    python benchmarks/invalid_step_credit.py RUN_DIR [--warm-start] [--iterations 80 81 82 83] [--out FILE.json]

RUN_DIR is an ordinary ``gaca train`` run directory (config.json and checkpoint.pt); it is copied
to a temporary directory first and left untouched. Writes JSON (default
``benchmarks/results/invalid_step_credit/<run name>[-warmstart].json``).
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


def within_state_correlation(
    x: torch.Tensor, y: torch.Tensor, state: torch.Tensor, *, norm_of: torch.Tensor | None = None
) -> tuple[float, int]:
    """corr(x − mean_s x, y − mean_s y) over the rows of states ``s`` with at least two rows, and
    their number. ``norm_of``: divide by the centered norm of this instead of y's, so that the
    values of the parts of a sum y = y1 + y2 (each with ``norm_of=y``) add up to y's.

    Args:
      x, y, norm_of: [N] float.
      state:         [N] int64, the state id of each row.
    """
    ids, inverse, counts = torch.unique(state, return_inverse=True, return_counts=True)
    shared = counts.index_select(0, inverse) > 1

    def centered(v: torch.Tensor) -> torch.Tensor:
        v = v.to(torch.float64)
        mean = torch.zeros(len(ids), dtype=torch.float64).index_add_(0, inverse, v) / counts
        return (v - mean.index_select(0, inverse))[shared]

    cx, cy = centered(x), centered(y)
    cn = cy if norm_of is None else centered(norm_of)
    return float((cx * cy).sum() / ((cx * cx).sum() * (cn * cn).sum()).sqrt()), int(shared.sum())


def credit_by_validity(
    run_dir: Path, iterations: list[int], *, warm_start: bool = False
) -> dict[str, dict[str, float]]:
    """Per ``invalid``/``valid`` step: count, mean NLL, GACA's mean weight and every estimator's mean
    advantage, over the rollouts of ``iterations`` drawn from the run's checkpointed policy (or the
    seed's warm start); and each estimator's NLL-advantage coupling (module docstring)."""
    rows: dict[str, list[torch.Tensor]] = {"invalid": [], "nll": [], "weight": [], "state": [],
                                           "gaca_episode_part": [], "gaca_step_part": []}
    rows.update({est: [] for est in ESTIMATORS})
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "run"
        # from the warm start: a fresh run of the same config, whose policy is the seed's warm start (SFT cache)
        if not warm_start:
            shutil.copytree(run_dir, copy, ignore=shutil.ignore_patterns("events.*", "*.png"))
        cfg = from_dict(TrainConfig, json.loads((run_dir / "config.json").read_text()))
        cfg = dataclasses.replace(cfg, out_dir=str(copy), progress=False, trackers=[])
        with TrainingRun(cfg, resume=not warm_start) as run:
            for it in iterations:
                batch = collect_rollouts(run.policy, run.train_pool, train_task_seeds(cfg, it), cfg.rollout,
                                         generator=iteration_generator(cfg.seed, it))
                outputs = {est: compute_advantages(batch.steps, est, **cfg.advantage_options)
                           for est in ESTIMATORS}
                rows["invalid"].append(batch.invalid)
                rows["nll"].append(outputs["gaca"].nll)
                rows["weight"].append(outputs["gaca"].weight)
                # a state: one task group's anchor; offset by the rows so far, as group ids repeat across iterations
                _, state = torch.unique(torch.stack([batch.steps.group_id, batch.steps.anchor], 1), dim=0,
                                        return_inverse=True)
                rows["state"].append(state + sum(len(ids) for ids in rows["state"]))
                for est, out in outputs.items():
                    rows[est].append(out.advantage)
                rows["gaca_episode_part"].append((1.0 - outputs["gaca"].weight) * outputs["gaca"].episode)
                rows["gaca_step_part"].append(outputs["gaca"].weight * outputs["gaca"].step_level)
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
    coupling = {est: within_state_correlation(cat["nll"], cat[est], cat["state"]) for est in ESTIMATORS}
    table["coupling/within_state"] = {"steps": coupling["gaca"][1], **{f"adv/{e}": c for e, (c, _) in coupling.items()}}
    # GACA's coupling split into its two terms: (1 − w)·A^E and w·A^S add up to A under the convex mixture
    if cfg.advantage_options.get("mixture", "convex") == "convex":
        table["coupling/within_state/gaca_parts"] = {
            f"adv/{part}": within_state_correlation(cat["nll"], cat[part], cat["state"], norm_of=cat["gaca"])[0]
            for part in ("gaca_episode_part", "gaca_step_part")}
    table["coupling/global"] = {
        f"adv/{est}": float(torch.corrcoef(torch.stack([cat["nll"], cat[est].double()]))[0, 1]) for est in ESTIMATORS}
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--warm-start", action="store_true",
                        help="draw from the seed's warm start, not the run's checkpoint (default iterations 0-3)")
    parser.add_argument("--iterations", type=int, nargs="+", default=None,
                        help="whose task seeds and sampling streams to use (default: the 4 after 80, or 0-3)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    if not (args.run_dir / "checkpoint.pt").is_file():
        parser.error(f"{args.run_dir} holds no checkpoint.pt (give a gaca train run directory)")
    iterations = args.iterations or ([0, 1, 2, 3] if args.warm_start else [80, 81, 82, 83])
    table = credit_by_validity(args.run_dir, iterations, warm_start=args.warm_start)
    cols = ["steps", "nll", "gaca_weight", *(f"adv/{e}" for e in ESTIMATORS), "adv/gaca_episode_part",
            "adv/gaca_step_part"]
    print("| rows | " + " | ".join(cols) + " |\n|---|" + "---|" * len(cols))
    for name, row in table.items():
        print(f"| {name} | " + " | ".join(f"{row[c]:.4g}" if c in row else "" for c in cols) + " |")
    out = args.out or Path("benchmarks/results/invalid_step_credit") / (
        "-".join(args.run_dir.resolve().parts[-3:]) + ("-warmstart" if args.warm_start else "") + ".json")
    out.parent.mkdir(parents=True, exist_ok=True)
    record = {"run_dir": str(args.run_dir), "warm_start": args.warm_start, "iterations": iterations, "table": table}
    out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
