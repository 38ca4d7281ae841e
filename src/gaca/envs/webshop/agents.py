"""Reference agents for the shop: the oracle (replays ``info["expert_plan"]``) and a random one."""

from __future__ import annotations

from gaca.envs import agents
from gaca.envs.episodes import Turn
from gaca.envs.webshop.env import SEARCH_ACTION
from gaca.envs.webshop.reward import tokenize


class OracleAgent(agents.TurnAgent):
    """Takes the oracle's canonical next action; needs an environment made with ``expert=True``."""

    def choose(self, turn: Turn) -> str:
        """The first action of ``info["expert_plan"]``."""
        plan = turn.info.get("expert_plan")
        if plan is None:
            raise KeyError("info has no 'expert_plan': build the environment with expert=True")
        if not plan:
            raise RuntimeError("the expert has no action: the episode is over")
        return plan[0]


class RandomAgent(agents.RandomAgent):
    """Picks uniformly among the admissible actions; searches a random subset of the instruction's words.

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


__all__ = ["OracleAgent", "RandomAgent"]
