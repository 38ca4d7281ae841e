"""The ALFWorld text environment (``TextEnv``), on either engine (``engines``).

    env = AlfworldEnv(games, NativeEngine(), max_steps=50)
    obs, info = env.reset(seed=s)          # game s % len(games); same seed -> same game and state
    obs, reward, terminated, truncated, info = env.step("go to countertop 1")

Reward ``success_reward`` (10.0) on the step that wins, else 0.0; ``terminated`` on a win;
``truncated`` when ``max_steps`` steps were taken without a win. A command the engine does not
accept leaves the state unchanged, gives ALFWorld's ``"Nothing happens."`` and ``info["valid"] =
False``. Observations are the engine's text as is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gaca.envs.alfworld.engines import Engine
from gaca.envs.alfworld.games import TASK_PREFIX, GameRecord, GameSource


class AlfworldEnv:
    """``TextEnv`` over a :class:`GameSource`, played by an :class:`Engine` (see module docstring)."""

    def __init__(
        self,
        games: GameSource | Sequence[GameRecord],
        engine: Engine,
        *,
        max_steps: int = 50,
        expert: bool = False,
        success_reward: float = 10.0,
        hide_actions: Sequence[str] = ("help",),
    ) -> None:
        """
        Args:
          games: the games; ``reset(seed=s)`` plays ``games[s % len(games)]``.
          engine: ``NativeEngine()`` or ``TextWorldEngine(expert=expert)``.
          max_steps: step limit; reaching it without a win truncates the episode.
          expert: add ``info["expert_plan"]``, the engine's remaining expert plan from the current state.
          success_reward: reward of the winning step (ALFWorld / verl-agent: 10).
          hide_actions: commands left out of ``info["admissible_actions"]`` (verl-agent hides
            ``help``); the engine still accepts them.
        """
        if len(games) < 1:
            raise ValueError("no games")
        if max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {max_steps}")
        self.games = games
        self.engine = engine
        self.max_steps = max_steps
        self.expert = expert
        self.success_reward = float(success_reward)
        self.hide_actions = frozenset(hide_actions)
        self._record: GameRecord | None = None
        self._steps = 0
        self._done = True

    @property
    def num_games(self) -> int:
        """Number of games ``reset`` cycles over."""
        return len(self.games)

    def game(self, seed: int) -> GameRecord:
        """The game ``reset(seed=seed)`` plays."""
        return self.games[seed % len(self.games)]

    def reset(self, *, seed: int, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Start game ``seed % num_games`` from its initial state; return (observation, info)."""
        self._record = self.game(int(seed))
        obs = self.engine.start(self._record)
        self._steps = 0
        self._done = False
        return obs, self._info(valid=True, obs=obs)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Apply ``action``; return (observation, reward, terminated, truncated, info)."""
        if self._record is None or self._done:
            raise RuntimeError("step() called before reset() or after the episode ended")
        obs, valid = self.engine.step(str(action).strip())
        self._steps += 1
        won = self.engine.won()
        truncated = (not won) and self._steps >= self.max_steps
        self._done = won or truncated
        reward = self.success_reward if won else 0.0
        return obs, reward, won, truncated, self._info(valid=valid, obs=obs)

    def _info(self, valid: bool, obs: str) -> dict[str, Any]:
        rec = self._record
        assert rec is not None
        task = rec.task
        if not task and TASK_PREFIX in obs:
            task = obs.split(TASK_PREFIX, 1)[1].strip()
        info: dict[str, Any] = {
            "task": task,
            "task_id": rec.task_id,
            "task_type": rec.task_type,
            "admissible_actions": [a for a in self.engine.admissible() if a not in self.hide_actions],
            "won": self.engine.won(),
            "valid": bool(valid),
            "step": self._steps,
            "game_file": rec.game_file,
        }
        if self.expert:
            info["expert_plan"] = self.engine.expert_plan()
        return info

    def close(self) -> None:
        """Release the engine."""
        self.engine.close()


__all__ = ["AlfworldEnv"]
