"""A chain whose true advantages are known in closed form, and a coin-flipping agent for it.

Every episode lasts ``length`` steps; at each step the agent says "a" or "b". The episode pays 10
at its last step when the action at the decisive step d was "a" and the one at the spoiler step
s > d was "b" (d and s come from the seed). An agent that says "a" with probability p wins with
probability p(1 − p), and the advantage of each step's action is (undiscounted return-to-go):

    t = d: A(a) = 10(1 − p)·(1 − p),   A(b) = −10·p(1 − p)
    t = s: after a at d: A(b) = 10·p,   A(a) = −10(1 − p);   after b at d: 0
    else:  0

and the discounted one is γ^(length − 1 − t) times that (the only reward is at the last step).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from gaca.envs.episodes import Decision


class ChainEnv:
    """A ``TextEnv`` (see module docstring). The observation names the step and the actions so far,
    so a wrongly restored state shows."""

    def __init__(self, length: int = 6) -> None:
        self.max_steps = length
        self.length = length
        self.actions: list[str] = []
        self.seed = 0

    def decisive_steps(self, seed: int) -> tuple[int, int]:
        d = seed % (self.length - 2)
        return d, d + 1 + (seed // 7) % (self.length - 1 - d)

    def _info(self, valid: bool = True) -> dict[str, Any]:
        return {"task": "choose well", "task_id": f"chain-{self.seed}", "task_type": "chain",
                "admissible_actions": ["a", "b"], "won": self._won(), "valid": valid}

    def _won(self) -> bool:
        d, s = self.decisive_steps(self.seed)
        return len(self.actions) == self.length and self.actions[d] == "a" and self.actions[s] == "b"

    def _observation(self) -> str:
        return f"step {len(self.actions)} after [{' '.join(self.actions)}]"

    def reset(self, *, seed: int, options: dict | None = None) -> tuple[str, dict[str, Any]]:
        self.seed, self.actions = seed, []
        return self._observation(), self._info()

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        valid = action in ("a", "b")
        self.actions.append(action if valid else "b")
        done = len(self.actions) == self.length
        reward = 10.0 if done and self._won() else 0.0
        return self._observation(), reward, done, False, self._info(valid)

    def close(self) -> None:
        pass

    def true_advantage(self, seed: int, prefix: list[str], action: str, p: float) -> float:
        """Closed-form undiscounted A(s_t, a_t) for the coin-flipping agent (module docstring)."""
        d, s = self.decisive_steps(seed)
        t = len(prefix)
        if t == d:
            return 10 * (1 - p) * (1 - p) if action == "a" else -10 * p * (1 - p)
        if t == s and prefix[d] == "a":
            return 10 * p if action == "b" else -10 * (1 - p)
        return 0.0


@dataclass(frozen=True)
class CoinPayload:
    logprobs: torch.Tensor


class CoinAgent:
    """Says "a" with probability p (its decision carries the log-prob of what it said)."""

    def __init__(self, p: float, seed: int = 0) -> None:
        self.p = p
        self.generator = torch.Generator().manual_seed(seed)

    def act(self, turns):
        draws = torch.rand(len(turns), generator=self.generator) < self.p
        return [Decision("a" if a else "b", payload=CoinPayload(torch.tensor([math.log(self.p if a else 1 - self.p)])))
                for a in draws.tolist()]
