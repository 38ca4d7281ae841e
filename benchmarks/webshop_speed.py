"""Speed and reference success rates of the generated WebShop.

Runs the oracle (environment with ``expert=True``, so its steps include the expert plan) and the
random agent (``expert=False``: the bare environment) on the first N goals of each split, prints a
table and writes ``benchmarks/results/webshop_speed.json``.

    PYTHONPATH=src python benchmarks/webshop_speed.py [--episodes 500] [--num-products 2400] [--seed 0]

``steps_per_s`` counts only the time spent inside the environment's ``step``/``reset`` (through the
episode driver's in-process pool); ``agent_steps_per_s`` includes the agent's own choice.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

from gaca.envs import EnvPool, make_env, play_episodes
from gaca.envs.webshop.catalog import Catalogue, get_catalogue
from gaca.testing.agents import OracleAgent, WebShopRandomAgent


def run(split: str, agent_name: str, episodes: int, num_products: int, seed: int) -> dict:
    env = make_env("webshop", split=split, catalogue_seed=seed, num_products=num_products,
                   expert=agent_name == "oracle")
    agent = OracleAgent() if agent_name == "oracle" else WebShopRandomAgent(seed)
    start = time.perf_counter()
    batch = play_episodes(EnvPool.from_envs([env]), list(range(episodes)), agent)
    wall = time.perf_counter() - start
    steps = sum(e.length for e in batch.episodes)
    return {
        "split": split, "agent": agent_name, "episodes": episodes,
        "success": sum(e.won for e in batch.episodes) / episodes,
        "mean_reward": sum(e.env_return for e in batch.episodes) / episodes, "mean_steps": steps / episodes,
        "steps_per_s": steps / batch.env_seconds, "agent_steps_per_s": steps / wall,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=500, help="goals per split and agent")
    parser.add_argument("--num-products", type=int, default=2400, help="catalogue size")
    parser.add_argument("--seed", type=int, default=0, help="catalogue seed (and the random agent's)")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "webshop_speed.json")
    args = parser.parse_args()

    t0 = time.perf_counter()
    Catalogue(args.num_products, args.seed)  # timed cold build (get_catalogue below caches its own)
    build_s = time.perf_counter() - t0
    get_catalogue(args.num_products, args.seed)

    rows = [run(split, agent, args.episodes, args.num_products, args.seed)
            for split in ("train", "eval") for agent in ("oracle", "random")]
    print(f"catalogue: {args.num_products} products, built in {build_s:.2f} s")
    header = f"{'split':<6} {'agent':<7} {'success':>8} {'reward':>7} {'steps':>6} {'env steps/s':>12} {'w/ agent':>9}"
    print(header)
    print("-" * len(header))
    for r in rows:
        print(f"{r['split']:<6} {r['agent']:<7} {r['success']:>8.3f} {r['mean_reward']:>7.3f} {r['mean_steps']:>6.2f} "
              f"{r['steps_per_s']:>12.0f} {r['agent_steps_per_s']:>9.0f}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    result = {"benchmark": "webshop_speed", "num_products": args.num_products, "seed": args.seed,
              "catalogue_build_s": build_s, "machine": platform.processor() or platform.machine(), "rows": rows}
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
