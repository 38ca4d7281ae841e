"""How fast ALFWorld games are generated with each checker (``GenConfig.checker``), in one run.

    python benchmarks/alfworld_generation_speed.py                  # 30 planner games, 600 native
    python benchmarks/alfworld_generation_speed.py --planner-games 6 --native-games 60

Each checker generates games ``0 .. N-1`` of the train split (families round-robin) at the
generator's default difficulty into a fresh temporary cache, one core. Prints games per minute,
the seconds of the slowest game, how many candidates were rejected, and the mean walkthrough
length per family (the native expert's plans are correct but not always the shortest); writes
``benchmarks/results/alfworld_generation_speed.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import tempfile
import time
from typing import Any

from gaca.envs.alfworld import TASK_TYPES, GenConfig, generate_game
from gaca.envs.alfworld.generator import games_root

OUT = os.path.join(os.path.dirname(__file__), "results", "alfworld_generation_speed.json")


def measure(checker: str, num_games: int, seed: int) -> dict[str, Any]:
    cfg = GenConfig(checker=checker)
    cache = tempfile.mkdtemp(prefix=f"gen-{checker}-")
    seconds, lengths, attempts = [], {t: [] for t in TASK_TYPES}, 0
    start = time.perf_counter()
    for index in range(num_games):
        t0 = time.perf_counter()
        record = generate_game(index, "train", seed=seed, cfg=cfg, cache_dir=cache)
        seconds.append(time.perf_counter() - t0)
        lengths[record.task_type].append(len(record.expert_plan))
        attempts += int(record.task_id.rsplit("_a", 1)[1]) + 1
    total = time.perf_counter() - start
    assert os.path.isdir(games_root(cache, cfg))
    return {
        "checker": checker,
        "games": num_games,
        "seconds": total,
        "games_per_min": 60.0 * num_games / total,
        "slowest_game_s": max(seconds),
        "candidates_rejected": attempts - num_games,
        "mean_plan_length": {t: statistics.fmean(v) for t, v in lengths.items() if v},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--planner-games", type=int, default=30)
    parser.add_argument("--native-games", type=int, default=600)
    parser.add_argument("--seed", type=int, default=11, help="game seed (a set no test or preset uses)")
    parser.add_argument("--out", default=OUT)
    args = parser.parse_args()
    rows = [measure("native", args.native_games, args.seed), measure("planner", args.planner_games, args.seed)]
    header = f"{'checker':8} {'games':>6} {'games/min':>10} {'slowest s':>10} {'rejected':>9}"
    print(header + "  mean plan length per family")
    for r in rows:
        plans = " ".join(f"{v:.1f}" for v in r["mean_plan_length"].values())
        print(f"{r['checker']:8} {r['games']:6d} {r['games_per_min']:10.1f} {r['slowest_game_s']:10.2f} "
              f"{r['candidates_rejected']:9d}  {plans}")
    ratio = rows[0]["games_per_min"] / rows[1]["games_per_min"]
    print(f"native / planner: {ratio:.0f}x games per minute")
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump({"commit": commit, "machine": platform.processor() or platform.machine(), "args": vars(args),
                   "families": list(TASK_TYPES), "rows": rows, "native_over_planner": ratio}, f, indent=1)
    print("wrote", args.out)


if __name__ == "__main__":
    main()
