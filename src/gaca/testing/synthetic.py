"""Synthetic step tables shaped like ALFWorld training batches, for benchmarks and tests.

Groups of ``group_size`` trajectories of 5–50 steps, sparse reward (``success_reward`` on the last
step of a successful trajectory, else 0), anchors that repeat across a group's trajectories (all
start from one state and revisit a small set of states), ``tokens`` response tokens per step.
"""

from __future__ import annotations

import torch

from gaca.advantage.batch import StepBatch


def synthetic_batch(
    num_rows: int,
    *,
    group_size: int = 8,
    min_steps: int = 5,
    max_steps: int = 50,
    tokens: int = 32,
    states_per_group: int = 12,
    success_rate: float = 0.4,
    success_reward: float = 10.0,
    seed: int = 0,
    shuffle: bool = True,
) -> StepBatch:
    """A random ``StepBatch`` of exactly ``num_rows`` rows (the last trajectory is cut to fit)."""
    gen = torch.Generator().manual_seed(seed)
    # Enough trajectories to cover num_rows, lengths uniform in [min_steps, max_steps].
    mean_len = (min_steps + max_steps) / 2
    num_trajs = int(num_rows / mean_len * 1.2) + group_size
    lengths = torch.randint(min_steps, max_steps + 1, (num_trajs,), generator=gen)
    cumulative = torch.cumsum(lengths, 0)
    keep = int(torch.searchsorted(cumulative, torch.tensor(num_rows))) + 1
    lengths = lengths[:keep]
    lengths[-1] -= int(lengths.sum()) - num_rows
    traj = torch.repeat_interleave(torch.arange(keep), lengths)
    start = torch.cumsum(lengths, 0) - lengths
    step = torch.arange(num_rows) - start[traj]
    group = traj // group_size
    success = torch.rand(keep, generator=gen) < success_rate
    is_last = torch.zeros(num_rows, dtype=torch.bool)
    is_last[torch.cumsum(lengths, 0) - 1] = True
    reward = torch.where(is_last & success[traj], success_reward, 0.0).to(torch.float32)
    # Step 0 of a group always shares its state; later steps revisit a few states per group.
    state = torch.randint(1, states_per_group, (num_rows,), generator=gen)
    state = torch.where(step == 0, 0, state)
    anchor = group * states_per_group + state
    logprobs = -torch.rand(num_rows, tokens, generator=gen) * torch.rand(num_rows, 1, generator=gen) * 4
    response_len = torch.randint(1, tokens + 1, (num_rows, 1), generator=gen)
    mask = torch.arange(tokens).unsqueeze(0) < response_len
    batch_fields = dict(
        group_id=group, traj_id=traj % group_size, step=step, anchor=anchor, reward=reward,
        logprobs=logprobs, mask=mask,
    )
    if shuffle:
        perm = torch.randperm(num_rows, generator=gen)
        batch_fields = {k: v[perm] for k, v in batch_fields.items()}
    return StepBatch(**batch_fields)


__all__ = ["synthetic_batch"]
