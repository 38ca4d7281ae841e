"""The episode driver: batching, chunks, the step cap, crashes, and restoring a state by replay."""

from __future__ import annotations

import pytest

from gaca.envs import Decision, EnvPool, ReplayAgent, play_episodes
from gaca.testing.agents import RandomAgent, TurnAgent
from gaca.testing.fakes import CorridorEnv, pool_of


class Script(TurnAgent):
    """Plays ``actions[k]`` at step k of every episode; records every batch of turns it was given."""

    def __init__(self, actions):
        self.actions, self.batches = actions, []

    def act(self, turns):
        self.batches.append([(t.episode, t.step) for t in turns])
        return super().act(turns)

    def choose(self, turn):
        return self.actions[turn.step]


def test_one_agent_call_per_step_for_all_running_episodes():
    agent = Script(["go forward"] * 6)
    batch = play_episodes(pool_of(3), [0, 1, 2], agent)  # targets 1, 2, 3 rooms away
    assert [e.length for e in batch.episodes] == [1, 2, 3] and all(e.won for e in batch.episodes)
    assert agent.batches == [[(0, 0), (1, 0), (2, 0)], [(1, 1), (2, 1)], [(2, 2)]]
    # steps in the order taken: step-major, then episode
    assert [(s.turn.episode, s.turn.step) for s in batch.steps()] == [x for b in agent.batches for x in b]
    assert batch.env_seconds > 0
    third = batch.episodes[2]
    assert third.turn(3).history == (("You are in room 0.", "go forward"), ("You are in room 1.", "go forward"),
                                     ("You are in room 2.", "go forward"))
    assert third.task == "reach room 3" and third.task_type == "long" and third.env_return == 10.0


def test_seeds_beyond_the_pool_run_in_chunks_and_the_cap_truncates():
    batch = play_episodes(pool_of(2), [2, 2, 2], Script(["look"] * 9), max_steps=4)
    assert [e.index for e in batch.episodes] == [0, 1, 2] and [e.seed for e in batch.episodes] == [2, 2, 2]
    assert all(e.length == 4 and e.truncated and not e.won and e.invalid == 0 for e in batch.episodes)
    assert play_episodes(pool_of(1, max_steps=2), [0], Script(["look"] * 9)).episodes[0].length == 2  # env's limit


def test_a_crashed_environment_ends_its_episode_only():
    class Breaks(CorridorEnv):
        def step(self, action):
            if self.seed == 1 and self.t == 1:
                raise RuntimeError("engine fault")
            return super().step(action)

    batch = play_episodes(EnvPool.from_envs([Breaks(), Breaks()]), [1, 2], Script(["go forward"] * 6))
    broken, fine = batch.episodes
    assert broken.error is not None and "engine fault" in broken.error and not broken.won
    assert broken.length == 2 and broken.steps[-1].outcome.terminated
    assert fine.error is None and fine.won and fine.length == 3


def test_replay_restores_the_recorded_state_then_hands_over():
    first = play_episodes(pool_of(4, max_steps=8), [2, 2, 5, 5], RandomAgent(3)).episodes
    prefixes = [[s.decision.action for s in e.steps[:3]] for e in first]
    then = Script(["go back"] * 8)
    again = play_episodes(pool_of(4, max_steps=8), [2, 2, 5, 5], ReplayAgent(prefixes, then)).episodes
    for old, new, prefix in zip(first, again, prefixes, strict=True):
        k = len(prefix)
        assert [s.turn.observation for s in new.steps[:k]] == [s.turn.observation for s in old.steps[:k]]
        assert all(s.decision.payload == ReplayAgent.REPLAYED for s in new.steps[:k])
        if len(new.steps) > k:  # the continuation starts from the same state and history
            assert new.steps[k].turn.observation == (old.steps[k].turn.observation if len(old.steps) > k
                                                     else old.last.observation)
            replayed = zip(old.steps[:k], prefix, strict=True)
            assert new.steps[k].turn.history == tuple((s.turn.observation, a) for s, a in replayed)
            assert new.steps[k].decision.action == "go back"
    handed = [x for b in then.batches for x in b]
    assert handed and all(step >= len(prefixes[episode]) for episode, step in handed)  # never during the replay


def test_agent_must_answer_every_turn():
    class Lazy(TurnAgent):
        def act(self, turns):
            return [Decision("look")]

    with pytest.raises(RuntimeError, match="agent answered 1 decisions for 2 turns"):
        play_episodes(pool_of(2), [0, 0], Lazy())
    with pytest.raises(ValueError, match="at least one seed"):
        play_episodes(pool_of(1), [], Lazy())


def test_crashed_episodes_stay_out_of_rates_and_the_step_table():
    import torch

    from gaca.rollout import RolloutConfig, collect_rollouts
    from gaca.testing.fakes import ScriptedPolicy, forward_then
    from gaca.train.evaluate import summarize_episodes
    from gaca.train.metrics import rollout_metrics

    class Breaks(CorridorEnv):
        def reset(self, *, seed, options=None):
            if seed == 2:
                raise RuntimeError("no such game")
            return super().reset(seed=seed, options=options)

    pool = EnvPool.from_envs([Breaks() for _ in range(4)])
    batch = collect_rollouts(ScriptedPolicy(forward_then), pool, [0, 2], RolloutConfig(group_size=2),
                             generator=torch.Generator().manual_seed(0))
    assert [e.error is not None for e in batch.episodes] == [False, False, True, True]
    assert set(batch.steps.traj_id.tolist()) == {0, 1}  # the failed group left no rows
    stats = summarize_episodes(batch.episodes)
    assert stats.success == 1.0 and stats.crashed == 2 and stats.episodes == 2
    m = rollout_metrics(batch)
    assert m["env/success"] == 1.0 and m["env/crashed"] == 2.0 and m["env/episodes"] == 2.0
    with pytest.raises(RuntimeError, match="every episode of the rollout failed in its environment; the first: "
                                           "RuntimeError: no such game"):
        collect_rollouts(ScriptedPolicy(forward_then), pool, [2], RolloutConfig(group_size=2))
