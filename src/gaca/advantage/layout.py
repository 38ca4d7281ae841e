"""The structure of a step table: which rows form which trajectory and group, in what order.

Computed once per batch and shared by every estimator term (episode, step, criticality).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from gaca.advantage.batch import StepBatch
from gaca.advantage.segments import dense_ids, segment_count


@dataclass(frozen=True)
class Layout:
    """Dense ids and the (trajectory, step) order of a ``StepBatch``.

    Attributes:
      group:      [N] int64 dense episode-group id of each row.
      num_groups: G.
      traj:       [N] int64 dense trajectory id of each row (ordered by group, then traj_id).
      num_trajs:  number of trajectories.
      traj_group: [num_trajs] int64 group of each trajectory.
      traj_len:   [num_trajs] int64 rows per trajectory.
      order:      [N] int64 permutation sorting rows by (trajectory, step).
      is_last:    [N] bool in sorted order: the row is its trajectory's last step.
    """

    group: torch.Tensor
    num_groups: int
    traj: torch.Tensor
    num_trajs: int
    traj_group: torch.Tensor
    traj_len: torch.Tensor
    order: torch.Tensor
    is_last: torch.Tensor


def trajectory_layout(batch: StepBatch) -> Layout:
    """Dense group/trajectory ids and the (trajectory, step) sort of ``batch``.

    Raises:
      ValueError if a trajectory has two rows with the same step.
    """
    group, num_groups = dense_ids(batch.group_id)
    traj_local, num_traj_keys = dense_ids(batch.traj_id)
    n = traj_local.shape[0]
    if num_traj_keys == n:  # every row its own trajectory (single-turn batches): nothing to sort
        ones = torch.ones(n, dtype=torch.bool, device=group.device)
        return Layout(group=group, num_groups=num_groups, traj=traj_local, num_trajs=n,
                      traj_group=torch.empty_like(group).index_copy_(0, traj_local, group),
                      traj_len=torch.ones(n, dtype=torch.int64, device=group.device),
                      order=torch.empty_like(traj_local).index_copy_(0, traj_local, torch.arange(n)),
                      is_last=ones)
    traj_key = group * num_traj_keys + traj_local  # dense (group, traj) pair key, sorted like the pair
    max_step = int(batch.step.max())
    span = num_groups * num_traj_keys
    if span * (max_step + 1) < 2**62:
        # One sort gives both the trajectory ids and the step order.
        order = torch.argsort(traj_key * (max_step + 1) + batch.step)
        sorted_key = traj_key.index_select(0, order)
        new_traj = torch.ones_like(sorted_key, dtype=torch.bool)
        new_traj[1:] = sorted_key[1:] != sorted_key[:-1]
        traj_sorted = torch.cumsum(new_traj, 0) - 1
        traj = torch.empty_like(traj_sorted).index_copy_(0, order, traj_sorted)
        num_trajs = int(traj_sorted[-1]) + 1
    else:  # huge step values: two sorts, no overflow
        traj, num_trajs = dense_ids(traj_key)
        order = torch.from_numpy(np.lexsort((batch.step.cpu().numpy(), traj.cpu().numpy()))).to(traj.device)
        traj_sorted = traj.index_select(0, order)
        new_traj = torch.ones_like(traj_sorted, dtype=torch.bool)
        new_traj[1:] = traj_sorted[1:] != traj_sorted[:-1]
    step_sorted = batch.step.index_select(0, order)
    duplicate = ~new_traj[1:] & (step_sorted[1:] == step_sorted[:-1])
    if duplicate.any():
        row = int(order[1:][duplicate][0])
        raise ValueError(f"StepBatch.step: row {row} repeats step {int(batch.step[row])} of its trajectory")
    is_last = torch.ones_like(new_traj)
    is_last[:-1] = new_traj[1:]
    traj_group = torch.empty(num_trajs, dtype=torch.int64, device=group.device).index_copy_(0, traj, group)
    return Layout(
        group=group,
        num_groups=num_groups,
        traj=traj,
        num_trajs=num_trajs,
        traj_group=traj_group,
        traj_len=segment_count(traj, num_trajs),
        order=order,
        is_last=is_last,
    )


__all__ = ["Layout", "trajectory_layout"]
