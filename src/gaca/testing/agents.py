"""Reference agents for tests and baselines: the environment's expert, random agents, the shop's oracle.

    stats = play_episode(env, ExpertAgent(), seed=3)     # needs an env made with expert=True
    stats["won"], stats["steps"], stats["return"]
    batch = play_episodes(pool, seeds, RandomAgent(0))   # many episodes, batched (gaca.envs.episodes)

Agents see only what a policy sees (the ``Turn``: observation text and ``info``). Each decides every
turn on its own (``choose``); ``act`` answers a batch of turns for the episode driver. Any family:
``ExpertAgent``, ``RandomAgent``; WebShop: ``OracleAgent``, ``WebShopRandomAgent``.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from gaca.envs import Decision, EnvPool, TextEnv, Turn, play_episodes
from gaca.envs.webshop.env import SEARCH_ACTION
from gaca.envs.webshop.reward import tokenize


class TurnAgent:
    """Base of agents that decide each turn alone: ``act`` maps ``choose`` over the batch."""

    def choose(self, turn: Turn) -> str:
        raise NotImplementedError

    def act(self, turns: Sequence[Turn]) -> list[Decision]:
        return [Decision(self.choose(t)) for t in turns]


class ExpertAgent(TurnAgent):
    """Follows the environment's expert: the first action of ``info["expert_plan"]``.

    Falls back to ``fallback`` (``"look"``) when the plan is empty (e.g. the planner found none).
    """

    def __init__(self, fallback: str = "look") -> None:
        self.fallback = fallback

    def choose(self, turn: Turn) -> str:
        if "expert_plan" not in turn.info:
            raise KeyError("info has no 'expert_plan': make the env with expert=True")
        plan = turn.info["expert_plan"]
        return plan[0] if plan else self.fallback


class RandomAgent(TurnAgent):
    """Uniform over the admissible actions; reproducible from ``seed``.

    Each episode draws from its own generator, seeded by (``seed``, the episode's environment seed)
    at its first step, so an episode's actions depend neither on what the agent played before nor
    on which other episodes run beside it.
    """

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self._rngs: dict[int, random.Random] = {}

    def rng(self, turn: Turn) -> random.Random:
        """The generator of ``turn``'s episode."""
        if turn.step == 0 or turn.episode not in self._rngs:
            self._rngs[turn.episode] = random.Random(f"{self.seed}|{turn.seed}")
        return self._rngs[turn.episode]

    def choose(self, turn: Turn) -> str:
        actions = turn.admissible_actions
        rng = self.rng(turn)
        return rng.choice(actions) if actions else "look"


class OracleAgent(TurnAgent):
    """WebShop: takes the oracle's canonical next action; needs an environment made with ``expert=True``."""

    def choose(self, turn: Turn) -> str:
        """The first action of ``info["expert_plan"]``."""
        plan = turn.info.get("expert_plan")
        if plan is None:
            raise KeyError("info has no 'expert_plan': build the environment with expert=True")
        if not plan:
            raise RuntimeError("the expert has no action: the episode is over")
        return plan[0]


class WebShopRandomAgent(RandomAgent):
    """WebShop: picks uniformly among the admissible actions; searches a random subset of the instruction's words.

    Args:
      seed: seed of the agent's own generator (same seed, same actions on the same episodes).
    """

    def choose(self, turn: Turn) -> str:
        """A random admissible action (a concrete query in place of ``search[<your query>]``)."""
        action = super().choose(turn)
        if action == SEARCH_ACTION:
            rng = self.rng(turn)
            words = tokenize(turn.task) or ["shop"]
            k = rng.randint(1, min(6, len(words)))
            action = f"search[{' '.join(rng.sample(words, k))}]"
        return action


def play_episode(env: TextEnv, agent: Any, seed: int, max_steps: int | None = None) -> dict[str, Any]:
    """Play one episode of ``env`` (reset with ``seed``) with ``agent`` (an ``Agent``).

    Returns:
      dict with ``won`` (bool), ``steps`` (int), ``return`` (sum of rewards), ``terminated``,
      ``truncated``, ``invalid`` (inadmissible actions taken), ``task_id``, ``task_type``, ``task``,
      ``actions`` (list[str]) and ``observations`` (list[str], the reset text first).
    Raises:
      RuntimeError when the environment raised (the message of its error).
    """
    [ep] = play_episodes(EnvPool.from_envs([env]), [seed], agent, max_steps=max_steps or env.max_steps).episodes
    if ep.error:
        raise RuntimeError(f"the environment failed: {ep.error}")
    return {
        "won": ep.won,
        "steps": ep.length,
        "return": ep.env_return,
        "terminated": ep.last.terminated,
        "truncated": ep.last.truncated,
        "invalid": ep.invalid,
        "task_id": ep.task_id,
        "task_type": ep.task_type,
        "task": ep.task,
        "actions": [s.decision.action for s in ep.steps],
        "observations": [ep.first.observation] + [s.outcome.observation for s in ep.steps],
    }


__all__ = ["ExpertAgent", "OracleAgent", "RandomAgent", "TurnAgent", "WebShopRandomAgent", "play_episode"]
