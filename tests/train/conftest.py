"""Fixtures: a real rollout batch of the very small tiny policy (``make_policy``) on the toy corridor."""

from __future__ import annotations

import pytest
import torch

from gaca.rollout import RolloutConfig, collect_rollouts
from gaca.testing.fakes import pool_of


@pytest.fixture
def rollout_batch(make_policy):
    policy = make_policy()
    cfg = RolloutConfig(group_size=3, tasks_per_iter=2, max_new_tokens=8)
    return collect_rollouts(policy, pool_of(6, max_steps=3), [0, 1], cfg, generator=torch.Generator().manual_seed(0))
