"""Reference agents: expert (plan following) and uniform random."""

from __future__ import annotations

import pytest

pytest.importorskip("alfworld")

from gaca.envs import EnvPool, make_env, play_episodes
from gaca.envs.episodes import Turn
from gaca.testing.agents import ExpertAgent, RandomAgent, play_episode


def turns(info, *, seed=0, steps=1, episode=0):
    return [Turn(episode, seed, t, "", info, ()) for t in range(steps)]


def test_random_agent_uniform_and_reproducible():
    info = {"admissible_actions": ["a", "b", "c"]}
    agent = RandomAgent(0)
    draws = [d.action for d in agent.act(turns(info, steps=3000))]
    for a in "abc":
        assert abs(draws.count(a) / 3000 - 1 / 3) < 0.04
    # an episode's draws depend on (agent seed, episode seed) only, not on what was played before
    x, y = RandomAgent(5), RandomAgent(5)
    x.act(turns(info, seed=3, steps=7))
    assert [d.action for d in x.act(turns(info, seed=11, steps=20))] == \
        [d.action for d in y.act(turns(info, seed=11, steps=20))]
    assert [d.action for d in x.act(turns(info, seed=11, steps=20))] != \
        [d.action for d in y.act(turns(info, seed=12, steps=20))]


def test_expert_agent_needs_plan():
    with pytest.raises(KeyError):
        ExpertAgent().act(turns({"admissible_actions": ["look"]}))
    assert ExpertAgent().act(turns({"expert_plan": []}))[0].action == "look"
    assert ExpertAgent().act(turns({"expert_plan": ["go to sofa 1", "x"]}))[0].action == "go to sofa 1"


def test_play_episode_stats(alf_kwargs):
    env = make_env("alfworld", **alf_kwargs)
    ep = play_episode(env, ExpertAgent(), seed=3)
    assert ep["won"] and ep["return"] == 10.0 and ep["steps"] == len(ep["actions"]) == len(ep["observations"]) - 1
    assert ep["task_type"] == "pick_heat_then_place_in_recep"
    r1 = play_episode(env, RandomAgent(1), seed=3, max_steps=5)
    r2 = play_episode(env, RandomAgent(1), seed=3, max_steps=5)
    assert r1["actions"] == r2["actions"] and r1["observations"] == r2["observations"]
    assert r1["steps"] == 5 and not r1["won"]
    env.close()


def test_batched_random_play_is_the_same_as_one_episode_at_a_time(alf_kwargs):
    # the driver's batching (and the pool's chunks) change nothing an agent decides
    env = make_env("alfworld", **alf_kwargs)
    alone = [play_episode(env, RandomAgent(2), seed=s, max_steps=6)["actions"] for s in (0, 1, 1, 4)]
    with EnvPool.from_envs([make_env("alfworld", **alf_kwargs) for _ in range(3)]) as pool:
        batch = play_episodes(pool, [0, 1, 1, 4], RandomAgent(2), max_steps=6)
    assert [[s.decision.action for s in e.steps] for e in batch.episodes] == alone
    assert [e.seed for e in batch.episodes] == [0, 1, 1, 4] and [e.index for e in batch.episodes] == [0, 1, 2, 3]
