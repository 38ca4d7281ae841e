"""A tiny deterministic TextEnv for the agent-loop test, the hallway: walk east three times to win.

(Not ``gaca.testing.fakes.CorridorEnv``, which the other test packages share: other actions, a goal per seed.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gaca.envs import EnvConfig


class HallwayEnv:
    """Rooms 0..3 in a row; ``go east`` moves right, ``wait`` stays; room 3 wins (reward 10)."""

    def __init__(self, max_steps: int = 6, length: int = 3) -> None:
        self.max_steps = max_steps
        self.length = length
        self._room = 0
        self._steps = 0

    def _info(self, won: bool = False, valid: bool = True) -> dict[str, Any]:
        return {"task": "reach the last room.", "task_id": "corridor", "task_type": "walk",
                "admissible_actions": ["go east", "wait"], "won": won, "valid": valid}

    def reset(self, *, seed: int, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        self._room, self._steps = 0, 0
        return f"You are in room {self._room}.", self._info()

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self._steps += 1
        valid = action in ("go east", "wait")
        if action == "go east":
            self._room += 1
        won = self._room >= self.length
        truncated = not won and self._steps >= self.max_steps
        return f"You are in room {self._room}.", 10.0 if won else 0.0, won, truncated, self._info(won, valid)

    def close(self) -> None:
        pass


@dataclass(frozen=True)
class HallwayConfig(EnvConfig):
    """The hallway's settings."""

    name: str = "hallway"
    max_steps: int = 6
    intro: str = "You walk down a corridor."
    length: int = 3
    """Rooms to walk east."""


def make(config: HallwayConfig, *, split: str, num_games: int, expert: bool = False) -> HallwayEnv:
    return HallwayEnv(config.max_steps, config.length)
