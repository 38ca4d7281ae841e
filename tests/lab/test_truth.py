"""The Monte-Carlo machinery recovers closed-form advantages and checks every restored state."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gaca.envs import EnvPool, play_episodes
from gaca.lab.accuracy.truth import monte_carlo_truth, recorded_steps
from tests.lab.chain_env import ChainEnv, CoinAgent

P, GAMMA, LENGTH = 0.6, 0.9, 6


def _record(seeds, agent_seed=1):
    with EnvPool.from_envs([ChainEnv(LENGTH) for _ in seeds]) as pool:
        played = play_episodes(pool, seeds, CoinAgent(P, agent_seed))
    return [s for e in played.episodes for s in recorded_steps(e, lambda t, e=e: e.steps[t].outcome.reward)]


@pytest.mark.parametrize("seeds", [[3, 11], [8, 20]])
def test_recovers_the_closed_form_advantages_within_their_standard_errors(seeds):
    steps = _record(seeds)
    with EnvPool.from_envs([ChainEnv(LENGTH) for _ in range(128)]) as pool:
        table = monte_carlo_truth(pool, steps, CoinAgent(P, 7), continuations=400, gamma=GAMMA,
                                  step_reward=lambda s: s.outcome.reward)
    env = ChainEnv(LENGTH)
    want = np.array([env.true_advantage(s.seed, list(s.prefix), s.action, P) for s in steps])
    assert table.mismatches == 0 and (table.usable == 400).all()
    z = (table.advantage - want) / np.maximum(table.advantage_se, 1e-9)
    assert np.all(np.abs(z) < 4.5), (table.advantage, want)
    assert np.abs(want).max() > 1  # the episodes include decisive steps, so this is not all zeros
    # exact zeros where the action cannot matter: continuations are identical in law, so only noise
    discount = GAMMA ** (LENGTH - 1 - np.array([s.t for s in steps]))
    zd = (table.advantage_discounted - want * discount) / np.maximum(table.advantage_discounted_se, 1e-9)
    assert np.all(np.abs(zd) < 4.5)
    # the V continuations' first actions: E[NLL] of a coin is its entropy
    entropy = -(P * math.log(P) + (1 - P) * math.log(1 - P))
    assert np.allclose(table.first_nll, entropy, atol=0.1)
    # one batched agent call per step of each chunk, never one per continuation
    assert table.agent_calls <= math.ceil(table.continuations / 128) * LENGTH
    assert table.continuations == len(steps) * 2 * 400


class ForgetfulChain(ChainEnv):
    """Not deterministic given (seed, actions): the observation counts resets."""

    resets = 0

    def _observation(self) -> str:
        return super()._observation() + f" (reset {ForgetfulChain.resets})"

    def reset(self, *, seed, options=None):
        ForgetfulChain.resets += 1
        return super().reset(seed=seed, options=options)


def test_a_state_that_does_not_restore_is_counted_and_left_out():
    steps = _record([3])
    with EnvPool.from_envs([ForgetfulChain(LENGTH) for _ in range(8)]) as pool:
        table = monte_carlo_truth(pool, steps, CoinAgent(P), continuations=4, gamma=GAMMA,
                                  step_reward=lambda s: s.outcome.reward)
    assert table.mismatches == table.continuations == len(steps) * 8
    assert np.isnan(table.advantage).all() and (table.usable == 0).all()
    assert "observation" in table.examples[0]


def test_needs_two_continuations():
    with pytest.raises(ValueError, match="continuations must be >= 2"):
        with EnvPool.from_envs([ChainEnv()]) as pool:
            monte_carlo_truth(pool, _record([1]), CoinAgent(P), continuations=1, gamma=1.0,
                              step_reward=lambda s: 0.0)
