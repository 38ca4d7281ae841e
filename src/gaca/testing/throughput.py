"""Environment throughput under a random agent, for the speed benchmarks (through the episode driver)."""

from __future__ import annotations

import time

from gaca.envs import EnvPool, EnvSpec, play_episodes
from gaca.testing.agents import RandomAgent


def pool_steps_per_s(spec: EnvSpec, num_envs: int, num_workers: int, min_steps: int, seed: int = 0) -> float:
    """Env-steps per second of ``num_envs`` environments (groups of 4 copies of a game) on
    ``num_workers`` workers, random admissible actions, after a warm-up reset that loads the games;
    rounds of episodes until ``min_steps`` steps were taken."""
    groups = max(1, num_envs // 4)
    with EnvPool(spec, num_envs, num_workers=num_workers) as pool:
        seeds = [(i // 4) % spec.num_games for i in range(num_envs)]
        pool.reset(seeds)
        agent, steps, rounds = RandomAgent(seed), 0, 0
        t0 = time.perf_counter()
        while steps < min_steps:
            batch = play_episodes(pool, [(s + rounds * groups) % spec.num_games for s in seeds], agent)
            steps += sum(e.length for e in batch.episodes)
            rounds += 1
        return steps / (time.perf_counter() - t0)


__all__ = ["pool_steps_per_s"]
