"""Time GACA's advantage inside verl on CPU, on batches shaped like the ALFWorld runs.

    PYTHONPATH=src python examples/verl/bench_advantage.py [--repeats 3]

- step layout: 16 groups x 8 rollouts x ~30 steps = ~3840 step rows x 512 response tokens;
- trajectory layout: 128 trajectories x ~30 turns, 12288 response tokens per row.
Prints the median wall time of verl's ``compute_advantage`` (our wrapper) per layout.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time

import numpy as np
import torch
from omegaconf import OmegaConf
from verl import DataProto
from verl.trainer.ppo import ray_trainer

import gaca.integrations.verl  # noqa: F401  (registers and routes)

logger = logging.getLogger("bench_advantage")


def step_layout(groups: int, group_size: int, steps: int, length: int, seed: int) -> DataProto:
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(steps // 2, 3 * steps // 2 + 1, (groups * group_size,), generator=gen)
    traj = torch.repeat_interleave(torch.arange(groups * group_size), lengths)
    n = int(lengths.sum())
    start = torch.cumsum(lengths, 0) - lengths
    step = torch.arange(n) - start[traj]
    group = traj // group_size
    state = torch.where(step == 0, 0, torch.randint(1, 12, (n,), generator=gen))
    last = step == lengths[traj] - 1
    reward = torch.where(last & (torch.rand(n, generator=gen) < 0.4), 10.0, 0.0)
    response = torch.randint(16, length + 1, (n, 1), generator=gen)
    mask = (torch.arange(length).unsqueeze(0) < response).long()
    return DataProto.from_dict(
        tensors={"response_mask": mask, "token_level_rewards": torch.zeros(n, length),
                 "old_log_probs": -torch.rand(n, length, generator=gen) * 2},
        non_tensors={"uid": np.array([f"g{g}" for g in group.tolist()], dtype=object),
                     "traj_uid": np.array([f"t{t}" for t in traj.tolist()], dtype=object),
                     "anchor_obs": np.array([f"obs {g}-{s}" for g, s in zip(group.tolist(), state.tolist(),
                                                                            strict=True)], dtype=object),
                     "rewards": reward.numpy(), "step": step.numpy()},
    )


def trajectory_layout(rows: int, group_size: int, turns: int, length: int, seed: int) -> DataProto:
    gen = torch.Generator().manual_seed(seed)
    period = length // turns  # each turn: a span of period - 40 tokens, then a 40-token observation
    position = torch.arange(length)
    mask = ((position % period) < period - 40).long().expand(rows, length).clone()
    responses = torch.randint(100, 30000, (rows, length), generator=gen)
    obs_state = torch.randint(0, 12, (rows, turns), generator=gen)
    turn_of = (position // period).clamp(max=turns - 1)
    responses = torch.where(mask.bool(), responses, 1000 + obs_state[:, turn_of])  # obs tokens = state id
    rewards = torch.zeros(rows, length)
    rewards[:, -41] = torch.where(torch.rand(rows, generator=gen) < 0.4, 10.0, 0.0)
    return DataProto.from_dict(
        tensors={"responses": responses, "response_mask": mask, "token_level_rewards": rewards,
                 "rollout_log_probs": -torch.rand(rows, length, generator=gen) * 2,
                 "prompts": torch.randint(100, 30000, (rows, 256), generator=gen),
                 "attention_mask": torch.ones(rows, 256 + length, dtype=torch.int64)},
        non_tensors={"uid": np.array([f"g{b // group_size}" for b in range(rows)], dtype=object)},
    )


def timed(data: DataProto, repeats: int) -> tuple[float, int]:
    config = OmegaConf.create({"gaca": {"kappa": 0.25}})
    times = []
    for _ in range(repeats):
        batch = data.select(deepcopy=True)
        start = time.perf_counter()
        ray_trainer.compute_advantage(batch, adv_estimator="gaca", gamma=0.95, config=config)
        times.append(time.perf_counter() - start)
    return statistics.median(times), len(data)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s", force=True)  # verl set WARNING
    logging.getLogger("gaca").setLevel(logging.WARNING)
    torch.manual_seed(args.seed)
    seconds, rows = timed(step_layout(16, 8, 30, 512, args.seed), args.repeats)
    logger.info("step layout:       %5d rows x 512 tokens    : %.3f s", rows, seconds)
    seconds, rows = timed(trajectory_layout(128, 8, 30, 12288, args.seed), args.repeats)
    logger.info("trajectory layout: %5d rows x 12288 tokens  : %.3f s (30 turns per row)", rows, seconds)


if __name__ == "__main__":
    main()
