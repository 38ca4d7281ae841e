"""``TextEnv`` on the fast engine, a drop-in for ``gaca.envs.alfworld.AlfworldEnv`` on generated games.

    env = FastAlfworldEnv(games, max_steps=50)        # games: GeneratedGames (or any GameSource)
    obs, info = env.reset(seed=s)                      # game s % len(games), its initial state
    obs, reward, terminated, truncated, info = env.step("go to countertop 1")

Same contract as ``AlfworldEnv``: reward ``success_reward`` on the winning step, ``terminated`` on
a win, ``truncated`` at ``max_steps``, ``"Nothing happens."`` and ``info["valid"] = False`` for a
command that is not admissible, the same ``info`` keys. The games' files are read once per
process (``load_game`` caches them), so an environment costs no engine process and no planner.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Protocol

from gaca.envs.alfworld_fast.engine import FastState
from gaca.envs.alfworld_fast.expert import plan as expert_plan
from gaca.envs.alfworld_fast.game import FastGame, load_game

logger = logging.getLogger(__name__)

_TASK_PREFIX = "Your task is to: "


class _Record(Protocol):
    game_file: str
    task_id: str
    task_type: str
    task: str


class _Games(Protocol):
    def __len__(self) -> int: ...

    def __getitem__(self, index: int) -> Any: ...


class FastAlfworldEnv:
    """ALFWorld ``TextEnv`` played by :class:`FastState` (see module docstring)."""

    def __init__(
        self,
        games: _Games,
        *,
        max_steps: int = 50,
        expert: bool = False,
        success_reward: float = 10.0,
        hide_actions: Sequence[str] = ("help",),
        check_logic: bool = True,
    ) -> None:
        """
        Args:
          games: the games (``GeneratedGames``/``OfficialGames`` or a list of ``GameRecord``s);
            ``reset(seed=s)`` plays ``games[s % len(games)]``.
          max_steps: step limit; reaching it without a win truncates the episode.
          expert: add ``info["expert_plan"]``: the game's stored walkthrough while the episode
            follows it, else a plan from the native task expert (``expert.plan``).
          success_reward: reward of the winning step (ALFWorld / verl-agent: 10).
          hide_actions: commands left out of ``info["admissible_actions"]`` (still accepted).
          check_logic: refuse games whose domain/grammar are not alfworld's bundled ones.
        """
        if len(games) < 1:
            raise ValueError("no games")
        if max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {max_steps}")
        self.games = games
        self.max_steps = max_steps
        self.expert = expert
        self.success_reward = float(success_reward)
        self.hide_actions = frozenset(hide_actions)
        self.check_logic = check_logic
        self._record: _Record | None = None
        self._game: FastGame | None = None
        self._state: FastState | None = None
        self._history: list[str] = []
        self._steps = 0
        self._done = True

    @property
    def num_games(self) -> int:
        """Number of games ``reset`` cycles over."""
        return len(self.games)

    def game(self, seed: int) -> Any:
        """The game record ``reset(seed=seed)`` plays."""
        return self.games[seed % len(self.games)]

    def reset(self, *, seed: int, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Start game ``seed % num_games`` from its initial state; return (observation, info)."""
        record = self.game(int(seed))
        game = load_game(record.game_file, check=self.check_logic)
        if self._state is not None and self._game is game:
            self._state.reset()
        else:
            self._state = FastState(game)
        self._record, self._game = record, game
        self._history = []
        self._steps = 0
        self._done = False
        obs = self._state.intro()
        return obs, self._info(valid=True, obs=obs)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Apply ``action``; return (observation, reward, terminated, truncated, info)."""
        if self._state is None or self._done:
            raise RuntimeError("step() called before reset() or after the episode ended")
        action = str(action).strip()
        obs, valid = self._state.step(action)
        if valid:
            self._history.append(action)
        self._steps += 1
        won = self._state.won
        terminated = won
        truncated = (not terminated) and self._steps >= self.max_steps
        self._done = terminated or truncated
        reward = self.success_reward if won else 0.0
        return obs, reward, terminated, truncated, self._info(valid=valid, obs=obs)

    def _info(self, valid: bool, obs: str) -> dict[str, Any]:
        rec, state = self._record, self._state
        assert rec is not None and state is not None
        task = rec.task
        if not task and _TASK_PREFIX in obs:
            task = obs.split(_TASK_PREFIX, 1)[1].strip()
        admissible = state.admissible()
        if self.hide_actions:
            admissible = [a for a in admissible if a not in self.hide_actions]
        info: dict[str, Any] = {
            "task": task,
            "task_id": rec.task_id,
            "task_type": rec.task_type,
            "admissible_actions": admissible,
            "won": bool(state.won),
            "valid": bool(valid),
            "step": self._steps,
            "game_file": rec.game_file,
        }
        if self.expert:
            info["expert_plan"] = self.expert_plan()
        return info

    def expert_plan(self) -> list[str]:
        """Remaining plan from the current state (empty once won)."""
        state = self._state
        assert state is not None
        if state.won:
            return []
        walk = list(state.game.walkthrough)
        n = len(self._history)
        if walk and n < len(walk) and walk[:n] == self._history:
            return walk[n:]
        return expert_plan(state)

    def close(self) -> None:
        """Nothing to release (kept for the ``TextEnv`` protocol)."""
        self._state = None


__all__ = ["FastAlfworldEnv"]
