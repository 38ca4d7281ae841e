"""Fixtures: a very small real tiny policy and a real rollout batch of it on the toy corridor."""

from __future__ import annotations

import pytest
import torch

from gaca.policy import PolicyConfig, fit_tiny_tokenizer, load_policy
from gaca.rollout import RolloutConfig, collect_rollouts, format_response, render_prompt
from tests.rollout.fakes import CorridorEnv, pool_of


@pytest.fixture(scope="session")
def corridor_tokenizer(tmp_path_factory):
    texts = [render_prompt(f"reach room {t}", f"You are in room {k}.", list(CorridorEnv.ACTIONS), [],
                           history_length=2, step=0) for t in range(1, 4) for k in range(3)]
    texts += [format_response(a, "x") for a in CorridorEnv.ACTIONS]
    return fit_tiny_tokenizer(texts * 3, 400, cache_dir=str(tmp_path_factory.mktemp("tok")))


@pytest.fixture
def make_policy(corridor_tokenizer):
    def make(seed: int = 0, **kw):
        cfg = PolicyConfig(model="tiny", tiny_hidden=32, tiny_layers=1, tiny_heads=2, seed=seed, **kw)
        return load_policy(cfg, tokenizer=corridor_tokenizer)

    return make


@pytest.fixture
def rollout_batch(make_policy):
    policy = make_policy()
    cfg = RolloutConfig(group_size=3, tasks_per_iter=2, max_new_tokens=8)
    return collect_rollouts(policy, pool_of(6, max_steps=3), [0, 1], cfg, generator=torch.Generator().manual_seed(0))
