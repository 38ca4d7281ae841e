"""Environment speed (and reference-agent quality), one section per engine.

    python benchmarks/env_speed.py                      # all sections, 60 games per split
    python benchmarks/env_speed.py --sections alfworld --num-games 12 --quick

Prints a table and writes ``benchmarks/results/env_speed.json``. A section is a function
``(args) -> list[Row]`` registered in ``SECTIONS``; a new engine (a fast ALFWorld engine, WebShop)
adds one function and one entry. The ALFWorld section measures: game generation time (fresh
cache), one env's steps/s under a random agent, the pool's steps/s with 1 and 2 workers, the
expert's plan length and the random agent's success rate per task family.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import asdict, dataclass

logger = logging.getLogger("env_speed")


@dataclass
class Row:
    section: str
    metric: str
    value: float
    unit: str
    note: str = ""


def section_alfworld(args: argparse.Namespace) -> list[Row]:
    """ALFWorld on generated games (``--engine``: alfworld 0.4.2's TextWorld PDDL engine by default)."""
    import random

    from gaca.envs import AlfworldConfig, env_spec, make_env, prepare_envs
    from gaca.envs.alfworld import TASK_TYPES, generate_game
    from gaca.testing.agents import ExpertAgent, RandomAgent, play_episode
    from gaca.testing.throughput import pool_steps_per_s

    def make(split, **kwargs):
        return make_env("alfworld", split=split, engine=args.engine, **kwargs)

    rows: list[Row] = []
    sec = "alfworld"
    cache = args.cache_dir or tempfile.mkdtemp(prefix="gaca-alf-bench-")

    # 1. Generation time, fresh cache: one game per family.
    gen_dir = tempfile.mkdtemp(prefix="gaca-alf-gen-")
    times = defaultdict(list)
    for i in range(len(TASK_TYPES) * (1 if args.quick else 2)):
        t0 = time.perf_counter()
        generate_game(i, "train", seed=12345, cache_dir=gen_dir)
        times[TASK_TYPES[i % 6]].append(time.perf_counter() - t0)
    allt = [t for v in times.values() for t in v]
    rows.append(Row(sec, "generate s/game (mean)", statistics.mean(allt), "s", f"{len(allt)} games, planner check"))
    for fam in TASK_TYPES:
        rows.append(Row(sec, f"generate s/game {fam}", statistics.mean(times[fam]), "s"))

    # 2. Pre-generate the measured sets (not timed above).
    t0 = time.perf_counter()
    for split in ("train", "eval"):
        prepare_envs(env_spec(AlfworldConfig(cache_dir=cache), split, args.num_games))
    rows.append(Row(sec, "pregenerate 2 splits", time.perf_counter() - t0, "s",
                    f"{2 * args.num_games} games (0 if cached)"))

    # 3. Expert plan length and random success per family (both splits).
    for split in ("train", "eval"):
        env = make(split, num_games=args.num_games, cache_dir=cache, expert=True)
        plan = defaultdict(list)
        won_expert = 0
        for s in range(args.num_games):
            ep = play_episode(env, ExpertAgent(), seed=s)
            plan[ep["task_type"]].append(ep["steps"])
            won_expert += ep["won"]
        env.close()
        rows.append(Row(sec, f"expert success {split}", won_expert / args.num_games, "frac",
                        f"{args.num_games} games"))
        for fam in TASK_TYPES:
            if plan[fam]:
                rows.append(Row(sec, f"expert plan len {split} {fam}", statistics.mean(plan[fam]), "steps"))
        env = make(split, num_games=args.num_games, cache_dir=cache)
        won = defaultdict(list)
        n_steps, t0 = 0, time.perf_counter()
        agent = RandomAgent(args.seed)
        for s in range(args.num_games):
            ep = play_episode(env, agent, seed=s)
            won[ep["task_type"]].append(ep["won"])
            n_steps += ep["steps"]
        dt = time.perf_counter() - t0
        env.close()
        rows.append(Row(sec, f"random success {split}", sum(map(sum, won.values())) / args.num_games, "frac",
                        "uniform over admissible, 50 steps"))
        for fam in TASK_TYPES:
            if won[fam]:
                rows.append(Row(sec, f"random success {split} {fam}", statistics.mean(won[fam]), "frac",
                                f"{len(won[fam])} games"))
        if split == "train":
            rows.append(Row(sec, "1 env steps/s (random agent, new game each ep)", n_steps / dt, "steps/s",
                            f"{n_steps} steps"))

    # 4. One env, steps only (no resets), and the pool.
    env = make("train", num_games=args.num_games, cache_dir=cache)
    rng = random.Random(args.seed)
    _, info = env.reset(seed=0)
    n, t0 = 0, time.perf_counter()
    target = 100 if args.quick else 300
    s = 0
    while n < target:
        _, _, term, trunc, info = env.step(rng.choice(info["admissible_actions"] or ["look"]))
        n += 1
        if term or trunc:
            s += 1
            _, info = env.reset(seed=s)
    sps = n / (time.perf_counter() - t0)
    rows.append(Row(sec, "1 env steps/s (random agent, 1 game per 50 steps)", sps, "steps/s"))
    env.close()
    spec = env_spec(AlfworldConfig(cache_dir=cache, engine=args.engine), "train", args.num_games)
    steps = 200 if args.quick else 600
    for workers in (0, 2):
        sps = pool_steps_per_s(spec, num_envs=8, num_workers=workers, min_steps=steps, seed=args.seed)
        rows.append(Row(sec, f"pool steps/s, 8 envs, {workers or 'no'} worker process(es)", sps, "steps/s"))
    return rows


#: name -> section function. New engines add an entry here.
SECTIONS: dict[str, Callable[[argparse.Namespace], list[Row]]] = {
    "alfworld": section_alfworld,
}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sections", nargs="*", default=list(SECTIONS), choices=list(SECTIONS))
    p.add_argument("--num-games", type=int, default=60, help="games per split for the quality rows")
    p.add_argument("--cache-dir", default=None, help="game cache (default: a fresh temp dir)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--engine", default="textworld", choices=["textworld", "native"], help="ALFWorld engine")
    p.add_argument("--quick", action="store_true", help="fewer games and steps")
    p.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "env_speed.json"))
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)

    rows: list[Row] = []
    for name in args.sections:
        t0 = time.perf_counter()
        rows += SECTIONS[name](args)
        logger.warning("section %s took %.0fs", name, time.perf_counter() - t0)

    width = max(len(r.metric) for r in rows)
    print(f"{'section':<10} {'metric':<{width}} {'value':>10}  unit     note")
    for r in rows:
        print(f"{r.section:<10} {r.metric:<{width}} {r.value:>10.3f}  {r.unit:<8} {r.note}")
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump({"machine": {"python": sys.version.split()[0], "platform": platform.platform(),
                               "cpus": os.cpu_count()},
                   "args": {k: v for k, v in vars(args).items() if k != "out"},
                   "rows": [asdict(r) for r in rows]}, f, indent=1)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
