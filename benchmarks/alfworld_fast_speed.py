"""Speed of the fast ALFWorld engine against the real one, measured in the same run.

    python benchmarks/alfworld_fast_speed.py                 # 12 games, cache in a temp dir
    python benchmarks/alfworld_fast_speed.py --cache-dir /tmp/alfcache --quick

Prints a table and writes ``benchmarks/results/alfworld_fast_speed.json``. Measured on the same
generated games with the same random admissible-action agent (groups of 4 copies of a game):

* single env: env-steps/s of one env (reset time included, amortized over the episodes);
* pooled: ``EnvPool`` env-steps/s (fast: 64 envs in-process and on 2 workers; real: 8 envs on
  2 workers, which is what a rollout on 2 cores gets);
* the ratio fast/real of both;
* the environment time of a full rollout of 64 trajectories (8 tasks x 8 copies) x 50 steps on
  the fast engine (the issue's target: under 0.5 s), and the time of its first-ever load of the
  games (reading and precomputing the files).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import random
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from typing import Any

logger = logging.getLogger("alfworld_fast_speed")


@dataclass
class Row:
    metric: str
    value: float
    unit: str
    note: str = ""


def _single_steps_per_s(env: Any, num_games: int, min_steps: int, seed: int,
                        max_ep_steps: int = 50) -> tuple[float, float]:
    """Random admissible actions, episodes over games 0..num_games-1 in turn.

    Returns (env-steps per second with resets included, env-steps per second of ``step`` alone).
    """
    rng = random.Random(seed)
    n, ep, in_step = 0, 0, 0.0
    t0 = time.perf_counter()
    while n < min_steps:
        _, info = env.reset(seed=ep % num_games)
        ep += 1
        for _ in range(max_ep_steps):
            action = rng.choice(info["admissible_actions"] or ["look"])
            t1 = time.perf_counter()
            _, _, term, trunc, info = env.step(action)
            in_step += time.perf_counter() - t1
            n += 1
            if term or trunc:
                break
    return n / (time.perf_counter() - t0), n / in_step


def _rollout_env_time(games: Any, tasks: int, copies: int, steps: int, seed: int) -> tuple[float, int]:
    """Environment seconds of one rollout of ``tasks x copies`` trajectories x ``steps`` (native engine)."""
    from gaca.envs import EnvPool, play_episodes
    from gaca.envs.alfworld import AlfworldEnv, NativeEngine
    from gaca.testing.agents import RandomAgent

    pool = EnvPool.from_envs([AlfworldEnv(games, NativeEngine(), max_steps=steps) for _ in range(tasks * copies)])
    batch = play_episodes(pool, [i // copies for i in range(tasks * copies)], RandomAgent(seed))
    return batch.env_seconds, sum(e.length for e in batch.episodes)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--num-games", type=int, default=12, help="games of the train split measured on")
    p.add_argument("--cache-dir", default=None, help="game cache (default: a fresh temp dir; generation untimed)")
    p.add_argument("--real-steps", type=int, default=300, help="env-steps measured on the real engine (single)")
    p.add_argument("--fast-steps", type=int, default=20000, help="env-steps measured on the fast engine (single)")
    p.add_argument("--quick", action="store_true", help="fewer steps (a smoke run)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                                                 "alfworld_fast_speed.json"))
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    if args.quick:
        args.real_steps, args.fast_steps = min(args.real_steps, 60), min(args.fast_steps, 3000)

    from gaca.envs import AlfworldConfig, env_spec
    from gaca.envs.alfworld import GeneratedGames
    from gaca.envs.alfworld.native import load_game
    from gaca.testing.alfworld_differential import engine_pair
    from gaca.testing.throughput import pool_steps_per_s

    cache = args.cache_dir or tempfile.mkdtemp(prefix="gaca-alf-fast-bench-")
    t0 = time.perf_counter()
    games = GeneratedGames("train", args.num_games, 0, None, cache)
    games.pregenerate()
    gen_s = time.perf_counter() - t0
    real, fast = engine_pair(games)
    rows: list[Row] = [Row("games ready (generate or read cache)", gen_s, "s", f"{args.num_games} train games")]

    t0 = time.perf_counter()
    for g in range(args.num_games):
        load_game(games[g].game_file)
    rows.append(Row("fast: load + precompute games", (time.perf_counter() - t0) / args.num_games * 1e3, "ms/game",
                    "once per process"))

    fast_single, fast_step = _single_steps_per_s(fast, args.num_games, args.fast_steps, args.seed)
    real_single, real_step = _single_steps_per_s(real, args.num_games, args.real_steps, args.seed)
    real.close()
    rows += [
        Row("real: single env", real_single, "steps/s", "alfworld 0.4.2 + TextWorld 1.7.0, memoized; resets incl."),
        Row("fast: single env", fast_single, "steps/s", "resets incl."),
        Row("ratio fast/real: single env", fast_single / real_single, "x"),
        Row("real: step() alone", real_step, "steps/s", f"{1e3 / real_step:.1f} ms/step"),
        Row("fast: step() alone", fast_step, "steps/s", f"{1e6 / fast_step:.1f} us/step"),
        Row("ratio fast/real: step() alone", fast_step / real_step, "x"),
    ]

    def spec(engine: str) -> Any:
        return env_spec(AlfworldConfig(cache_dir=cache, engine=engine), "train", args.num_games)

    pool_fast0 = pool_steps_per_s(spec("native"), 64, 0, args.fast_steps, args.seed)
    pool_fast2 = pool_steps_per_s(spec("native"), 64, 2, args.fast_steps, args.seed)
    pool_real2 = pool_steps_per_s(spec("textworld"), 8, 2, max(40, args.real_steps // 2), args.seed)
    rows += [
        Row("real: pool 8 envs / 2 workers", pool_real2, "steps/s"),
        Row("fast: pool 64 envs in-process", pool_fast0, "steps/s"),
        Row("fast: pool 64 envs / 2 workers", pool_fast2, "steps/s", "pipe round trips dominate"),
        Row("ratio fast/real: pooled (best fast / real 2 workers)", max(pool_fast0, pool_fast2) / pool_real2, "x"),
    ]

    secs, n = _rollout_env_time(games, tasks=8, copies=8, steps=50, seed=args.seed)
    rows.append(Row("fast: rollout 64 traj x 50 steps, env time", secs, "s", f"{n} env-steps, target < 0.5 s"))

    width = max(len(r.metric) for r in rows)
    print(f"{'metric':<{width}}  {'value':>12}  unit")
    for r in rows:
        print(f"{r.metric:<{width}}  {r.value:>12.3f}  {r.unit}  {r.note}")
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump({"rows": [asdict(r) for r in rows], "args": vars(args),
                   "machine": {"python": sys.version.split()[0], "platform": platform.platform(),
                               "cpus": os.cpu_count()}}, f, indent=1)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
