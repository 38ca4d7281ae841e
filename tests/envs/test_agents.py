"""Reference agents: expert (plan following) and uniform random."""

from __future__ import annotations

import pytest

pytest.importorskip("alfworld")

from gaca.envs.agents import ExpertAgent, RandomAgent, play_episode
from gaca.envs.alfworld import make as make_any_engine


def make(*args, **kwargs):
    """``gaca.envs.alfworld.make`` on the real TextWorld engine (what these tests are about)."""
    return make_any_engine(*args, **{"engine": "real", **kwargs})


def test_random_agent_uniform_and_reproducible():
    info = {"admissible_actions": ["a", "b", "c"]}
    agent = RandomAgent(0)
    draws = [agent.act("", info) for _ in range(3000)]
    for a in "abc":
        assert abs(draws.count(a) / 3000 - 1 / 3) < 0.04
    x, y = RandomAgent(5), RandomAgent(5)
    x.reset(11), y.reset(11)
    assert [x.act("", info) for _ in range(20)] == [y.act("", info) for _ in range(20)]
    y.reset(12)
    assert [x.act("", info) for _ in range(20)] != [y.act("", info) for _ in range(20)]


def test_expert_agent_needs_plan():
    with pytest.raises(KeyError):
        ExpertAgent().act("", {"admissible_actions": ["look"]})
    assert ExpertAgent().act("", {"expert_plan": []}) == "look"
    assert ExpertAgent().act("", {"expert_plan": ["go to sofa 1", "x"]}) == "go to sofa 1"


def test_play_episode_stats(alf_kwargs):
    env = make(**alf_kwargs)
    ep = play_episode(env, ExpertAgent(), seed=3)
    assert ep["won"] and ep["return"] == 10.0 and ep["steps"] == len(ep["actions"]) == len(ep["observations"]) - 1
    assert ep["task_type"] == "pick_heat_then_place_in_recep"
    r1 = play_episode(env, RandomAgent(1), seed=3, max_steps=5)
    r2 = play_episode(env, RandomAgent(1), seed=3, max_steps=5)
    assert r1["actions"] == r2["actions"] and r1["observations"] == r2["observations"]
    assert r1["steps"] == 5 and not r1["won"]
    env.close()
