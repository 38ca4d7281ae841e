"""Reference agents for the shop: the oracle (replays ``info["expert_plan"]``) and a random one."""

from __future__ import annotations

from typing import Any

from gaca.envs import agents
from gaca.envs.webshop.env import SEARCH_ACTION
from gaca.envs.webshop.reward import tokenize


class OracleAgent:
    """Takes the oracle's canonical next action; needs an environment made with ``expert=True``."""

    def act(self, obs: str, info: dict[str, Any]) -> str:
        """The first action of ``info["expert_plan"]``."""
        plan = info.get("expert_plan")
        if plan is None:
            raise KeyError("info has no 'expert_plan': build the environment with make(expert=True)")
        if not plan:
            raise RuntimeError("the expert has no action: the episode is over")
        return plan[0]


class RandomAgent(agents.RandomAgent):
    """Picks uniformly among the admissible actions; searches a random subset of the instruction's words.

    Args:
      seed: seed of the agent's own generator (same seed, same actions on the same episodes).
    """

    def act(self, obs: str, info: dict[str, Any]) -> str:
        """A random admissible action (a concrete query in place of ``search[<your query>]``)."""
        action = super().act(obs, info)
        if action == SEARCH_ACTION:
            words = tokenize(info["task"]) or ["shop"]
            k = self.rng.randint(1, min(6, len(words)))
            action = f"search[{' '.join(self.rng.sample(words, k))}]"
        return action


__all__ = ["OracleAgent", "RandomAgent"]
