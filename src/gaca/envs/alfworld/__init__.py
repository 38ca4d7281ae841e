"""ALFWorld offline: generated household games on the native engine or on alfworld's TextWorld engine.

    from gaca.envs import make_env
    env = make_env("alfworld", split="train", num_games=60, max_steps=10)   # fields of AlfworldConfig

``make(config, split=..., num_games=..., expert=...)`` is the registered factory. Generated games
need no download (``generator``); ``source="official"`` plays the official game files under
``$ALFWORLD_DATA`` on the TextWorld engine. This package's ``__init__`` and ``config`` import
neither ``alfworld`` nor ``textworld`` (configs load anywhere); the names below that need them load
on first use. Requires ``alfworld==0.4.2`` and ``textworld[pddl]==1.7.0`` to play.
"""

from __future__ import annotations

import importlib
from typing import Any

from gaca.envs.alfworld.config import (
    OFFICIAL_SPLITS,
    SPLIT_DIRS,
    TASK_TYPES,
    AlfworldConfig,
    GenConfig,
    Split,
)
from gaca.envs.base import TextEnv

#: Names this package re-exports from its modules, imported on first access.
_LAZY = {
    "AlfworldEnv": "env", "NOTHING_HAPPENS": "native.engine",
    "Engine": "engines", "NativeEngine": "engines", "TextWorldEngine": "engines",
    "GameRecord": "games", "GameSource": "games", "GeneratedGames": "generator", "OfficialGames": "games",
    "combo_split": "generator", "default_cache_dir": "generator", "games_root": "generator",
    "generate_game": "generator", "generate_games": "generator", "unseen_rooms": "generator",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def game_source(config: AlfworldConfig, split: str, num_games: int | None) -> Any:
    """The games ``split`` of ``config`` plays (generated on demand, or the official files)."""
    if config.source == "official":
        from gaca.envs.alfworld.games import OfficialGames

        return OfficialGames(split, data_dir=config.data_dir, task_types=config.task_types, num_games=num_games)
    if split not in SPLIT_DIRS:
        raise ValueError(f"generated games have splits {sorted(SPLIT_DIRS)}, got {split!r}")
    from gaca.envs.alfworld.generator import GeneratedGames

    return GeneratedGames(split, 60 if num_games is None else num_games, config.game_seed,  # type: ignore[arg-type]
                          config.generator, config.cache_dir, config.task_types)


def make(config: AlfworldConfig, *, split: str, num_games: int | None, expert: bool = False) -> TextEnv:
    """An ALFWorld ``TextEnv``; ``reset(seed=s)`` plays game ``s % num_games`` of ``split``.

    ``expert``: expose ``info["expert_plan"]``, the engine's remaining expert plan.
    """
    from gaca.envs.alfworld.engines import NativeEngine, TextWorldEngine
    from gaca.envs.alfworld.env import AlfworldEnv

    engine = NativeEngine() if config.engine == "native" else TextWorldEngine(expert=expert)
    return AlfworldEnv(game_source(config, split, num_games), engine, max_steps=config.max_steps, expert=expert,
                       success_reward=config.success_reward, hide_actions=config.hide_actions)


def prepare(config: AlfworldConfig, *, split: str, num_games: int) -> None:
    """Generate the split's missing games here, once, with the planner's timeout guard (a pool's
    daemonic workers would each plan in-process, unguarded and in parallel)."""
    source = game_source(config, split, num_games)
    if hasattr(source, "pregenerate"):
        source.pregenerate()


__all__ = [
    "OFFICIAL_SPLITS",
    "SPLIT_DIRS",
    "TASK_TYPES",
    "AlfworldConfig",
    "GenConfig",
    "Split",
    "game_source",
    "make",
    "prepare",
    *sorted(_LAZY),
]
