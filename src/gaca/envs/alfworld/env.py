"""The ALFWorld text environment (``TextEnv``) on alfworld's own TextWorld PDDL engine.

One class plays both generated games (:class:`GeneratedGames`, drawn and cached on demand) and the
official ALFWorld game files (:class:`OfficialGames`, from ``$ALFWORLD_DATA``):

    obs, info = env.reset(seed=s)          # game s % num_games; same seed -> same game and state
    obs, reward, terminated, truncated, info = env.step("go to countertop 1")

Reward ``success_reward`` (10.0) on the step that wins, else 0.0; ``terminated`` on a win;
``truncated`` when ``max_steps`` (50) steps were taken without a win. An action the engine does not
accept leaves the state unchanged, gives ALFWorld's ``"Nothing happens."`` and ``info["valid"] =
False``. Observations are the engine's text as is (the anchor key of a step is that text).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from typing import Any, Protocol

from gaca.envs.alfworld import speedups
from gaca.envs.alfworld.generator import (
    DATA_VERSION_DIR,
    TASK_TYPES,
    GameRecord,
    GenConfig,
    Split,
    close_tw_env,
    generate_game,
    load_game,
    make_tw_env,
)

logger = logging.getLogger(__name__)

NOTHING_HAPPENS = "Nothing happens."
_TASK_PREFIX = "Your task is to: "


class GameSource(Protocol):
    """An indexable collection of games."""

    def __len__(self) -> int: ...

    def __getitem__(self, index: int) -> GameRecord: ...


class GeneratedGames:
    """Generated games ``0 .. num_games - 1`` of one split (families round-robin), made on first use.

    With ``task_types`` the games cycle over those families only; game j maps to generator index
    ``6 * (j // k) + TASK_TYPES.index(task_types[j % k])`` so every filter shares one cache.
    """

    def __init__(
        self,
        split: Split = "train",
        num_games: int = 60,
        seed: int = 0,
        cfg: GenConfig | None = None,
        cache_dir: str | None = None,
        task_types: Sequence[str] | None = None,
    ) -> None:
        if num_games < 1:
            raise ValueError(f"num_games must be >= 1, got {num_games}")
        types = tuple(task_types) if task_types else TASK_TYPES
        unknown = [t for t in types if t not in TASK_TYPES]
        if unknown:
            raise ValueError(f"unknown task types {unknown}; known: {TASK_TYPES}")
        self.task_types = tuple(t for t in TASK_TYPES if t in types)
        self.split, self.num_games, self.seed = split, num_games, seed
        self.cfg, self.cache_dir = cfg or GenConfig(), cache_dir

    def __len__(self) -> int:
        return self.num_games

    def generator_index(self, j: int) -> int:
        """The generator's index of game ``j``."""
        k = len(self.task_types)
        return len(TASK_TYPES) * (j // k) + TASK_TYPES.index(self.task_types[j % k])

    def __getitem__(self, j: int) -> GameRecord:
        if not 0 <= j < self.num_games:
            raise IndexError(j)
        return generate_game(self.generator_index(j), self.split, self.seed, self.cfg, self.cache_dir)

    def pregenerate(self) -> list[GameRecord]:
        """Generate (or read) every game now."""
        return [self[j] for j in range(self.num_games)]


#: gaca split -> the official split directory.
OFFICIAL_SPLITS = {
    "train": "train",
    "eval": "valid_unseen",
    "valid_unseen": "valid_unseen",
    "valid_seen": "valid_seen",
}


class OfficialGames:
    """The official ALFWorld game files under ``data_dir`` (default ``$ALFWORLD_DATA``).

    Same rules as alfworld's ``AlfredTWEnv.collect_game_files``: a trial directory with
    ``traj_data.json`` and a ``game.tw-pddl`` marked solvable, movable/sliced tasks skipped; sorted.
    """

    def __init__(self, split: str = "train", data_dir: str | None = None,
                 task_types: Sequence[str] | None = None, num_games: int | None = None) -> None:
        data_dir = data_dir or os.environ.get("ALFWORLD_DATA")
        if not data_dir:
            raise ValueError("official ALFWorld games need data_dir or $ALFWORLD_DATA")
        if split not in OFFICIAL_SPLITS:
            raise ValueError(f"split must be one of {sorted(OFFICIAL_SPLITS)}, got {split!r}")
        root = os.path.join(data_dir, DATA_VERSION_DIR, OFFICIAL_SPLITS[split])
        if not os.path.isdir(root):
            raise FileNotFoundError(f"no ALFWorld split directory {root}")
        types = set(task_types or TASK_TYPES)
        self.records: list[GameRecord] = []
        for dirpath, _, files in sorted(os.walk(root)):
            if "traj_data.json" not in files or "game.tw-pddl" not in files:
                continue
            if "movable" in dirpath or "Sliced" in dirpath:
                continue
            with open(os.path.join(dirpath, "traj_data.json")) as f:
                traj = json.load(f)
            if traj["task_type"] not in types:
                continue
            game_file = os.path.join(dirpath, "game.tw-pddl")
            with open(game_file) as f:
                gamedata = json.load(f)
            if not gamedata.get("solvable"):
                continue
            params = traj.get("pddl_params", {})
            rel = os.path.relpath(dirpath, root)
            self.records.append(GameRecord(
                game_file=game_file,
                task_id=rel.replace(os.sep, "/"),
                task_type=traj["task_type"],
                task=_task_from_grammar(gamedata.get("grammar", "")),
                scene=int(traj.get("scene", {}).get("scene_num", -1)),
                object_target=params.get("object_target", ""),
                parent_target=params.get("parent_target", "") or params.get("toggle_target", ""),
                expert_plan=tuple(gamedata.get("walkthrough") or ()),
            ))
        if num_games is not None:
            self.records = self.records[:num_games]
        if not self.records:
            raise FileNotFoundError(f"no playable ALFWorld games under {root}")

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, j: int) -> GameRecord:
        return self.records[j]


def _task_from_grammar(grammar: str) -> str:
    """The goal text the grammar's ``task`` rule carries ("put a mug in coffeemachine.")."""
    i = grammar.find(_TASK_PREFIX)
    if i < 0:
        return ""
    j = grammar.find('"', i)
    return grammar[i + len(_TASK_PREFIX) : j].strip() if j > 0 else ""


class AlfworldEnv:
    """``TextEnv`` over a :class:`GameSource`, played by alfworld's wrappers around TextWorld's PddlEnv."""

    def __init__(
        self,
        games: GameSource,
        *,
        max_steps: int = 50,
        expert: bool = False,
        success_reward: float = 10.0,
        hide_actions: Sequence[str] = ("help",),
        fast_engine: bool = True,
    ) -> None:
        """
        Args:
          games: the games; ``reset(seed=s)`` plays ``games[s % len(games)]``.
          max_steps: step limit; reaching it without a win truncates the episode.
          expert: add alfworld's planner expert; ``info["expert_plan"]`` is then its remaining plan
            from the current state (re-planned after every step).
          success_reward: reward of the winning step (ALFWorld / verl-agent: 10).
          hide_actions: commands left out of ``info["admissible_actions"]`` (verl-agent hides
            ``help``); the engine still accepts them.
          fast_engine: memoize TextWorld's template parsing and PDDL translation (same text, faster;
            see ``speedups``).
        """
        if len(games) < 1:
            raise ValueError("no games")
        if max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {max_steps}")
        if fast_engine:
            speedups.install()
        self.games = games
        self.max_steps = max_steps
        self.expert = expert
        self.success_reward = float(success_reward)
        self.hide_actions = frozenset(hide_actions)
        self._env = make_tw_env(expert=expert)
        self._loaded: str | None = None
        self._record: GameRecord | None = None
        self._state: Any = None
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
        record = self.game(int(seed))
        if self._loaded != record.game_file:
            load_game(self._env, record.game_file)
            self._loaded = record.game_file
        self._record = record
        self._state = self._env.reset()
        self._steps = 0
        self._done = False
        obs = self._state.feedback
        return obs, self._info(valid=True, obs=obs)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Apply ``action``; return (observation, reward, terminated, truncated, info)."""
        if self._state is None or self._done:
            raise RuntimeError("step() called before reset() or after the episode ended")
        action = str(action).strip()
        valid = action in self._state["admissible_commands"]
        self._state, _, _ = self._env.step(action)
        self._steps += 1
        obs = self._state.feedback
        won = bool(self._state["won"])
        terminated = won
        truncated = (not terminated) and self._steps >= self.max_steps
        self._done = terminated or truncated
        reward = self.success_reward if won else 0.0
        return obs, reward, terminated, truncated, self._info(valid=valid, obs=obs)

    def _info(self, valid: bool, obs: str) -> dict[str, Any]:
        rec = self._record
        assert rec is not None and self._state is not None
        task = rec.task
        if not task and _TASK_PREFIX in obs:
            task = obs.split(_TASK_PREFIX, 1)[1].strip()
        info: dict[str, Any] = {
            "task": task,
            "task_id": rec.task_id,
            "task_type": rec.task_type,
            "admissible_actions": [a for a in self._state["admissible_commands"] if a not in self.hide_actions],
            "won": bool(self._state["won"]),
            "valid": bool(valid),
            "step": self._steps,
            "game_file": rec.game_file,
        }
        if self.expert:
            info["expert_plan"] = list(self._state.get("extra.expert_plan") or [])
        return info

    def close(self) -> None:
        """Release the engine (its copy of fast-downward's library)."""
        if self._env is not None:
            close_tw_env(self._env)
            self._env = None


__all__ = ["NOTHING_HAPPENS", "OFFICIAL_SPLITS", "AlfworldEnv", "GameSource", "GeneratedGames", "OfficialGames"]
