"""ALFWorld offline: generated household games on alfworld's real TextWorld engine.

``make(**kwargs)`` builds the environment the registry (``gaca.envs.make_env("alfworld", ...)``)
hands out. Generated games need no download (see ``generator``); ``source="official"`` plays the
official game files under ``$ALFWORLD_DATA`` through the same class.

Requires ``alfworld==0.4.2`` and ``textworld[pddl]==1.7.0``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from gaca.envs.alfworld.env import (
    NOTHING_HAPPENS,
    OFFICIAL_SPLITS,
    AlfworldEnv,
    GeneratedGames,
    OfficialGames,
)
from gaca.envs.alfworld.generator import (
    SPLIT_DIRS,
    TASK_TYPES,
    GameRecord,
    GenConfig,
    combo_split,
    default_cache_dir,
    games_root,
    generate_game,
    generate_games,
)
from gaca.envs.base import TextEnv


def make(
    split: str = "train",
    num_games: int | None = 60,
    seed: int = 0,
    cache_dir: str | None = None,
    max_steps: int = 50,
    expert: bool = False,
    *,
    source: Literal["generated", "official"] = "generated",
    data_dir: str | None = None,
    task_types: Sequence[str] | None = None,
    success_reward: float = 10.0,
    hide_actions: Sequence[str] = ("help",),
    fast_engine: bool = True,
    pregenerate: bool = False,
    max_receptacles: int | None = None,
    num_distractors: int = 12,
    closed_prob: float | None = None,
    max_target_instances: int = 3,
    max_plan_length: int = 30,
    eval_fraction: float = 0.2,
    engine: Literal["real", "fast"] = "fast",
) -> TextEnv:
    """An ALFWorld ``TextEnv``; ``reset(seed=s)`` plays game ``s % num_games`` of ``split``.

    Args:
      split: ``"train"``, ``"eval"`` (generated: held-out (scene, object, receptacle) combinations;
        official: ``valid_unseen``) or ``"valid_seen"`` (generated: other games of the train
        combinations; official: ``valid_seen``); official also accepts ``"valid_unseen"``.
      num_games: games in the cycle (official: None = all).
      seed: generation seed of the game set (generated only).
      cache_dir: where generated games are kept (default ``$GACA_CACHE/alfworld`` or
        ``~/.cache/gaca/alfworld``).
      max_steps: step limit (ALFWorld / verl-agent: 50).
      expert: expose ``info["expert_plan"]`` (alfworld's planner expert, re-planned every step).
      source: ``"generated"`` or ``"official"`` (``data_dir`` or ``$ALFWORLD_DATA``).
      task_types: restrict to these families (default all six, ``TASK_TYPES``).
      success_reward, hide_actions, fast_engine: see ``AlfworldEnv``.
      pregenerate: generate all games now instead of on first use.
      max_receptacles, num_distractors, closed_prob, max_target_instances, max_plan_length,
        eval_fraction: difficulty knobs, see ``GenConfig``.
      engine: ``"fast"`` (default: ``gaca.envs.alfworld_fast``, the native engine verified step for
        step against the real one, ~1000x faster) or ``"real"`` (alfworld's TextWorld PDDL engine).
        Official data always plays on the real engine.
    """
    if engine not in ("real", "fast"):
        raise ValueError(f"engine must be 'real' or 'fast', got {engine!r}")
    games: GeneratedGames | OfficialGames
    if source == "official":
        games = OfficialGames(split, data_dir=data_dir, task_types=task_types, num_games=num_games)
    elif source == "generated":
        if split not in SPLIT_DIRS:
            raise ValueError(f"generated games have splits {sorted(SPLIT_DIRS)}, got {split!r}")
        cfg = GenConfig(
            max_receptacles=max_receptacles,
            num_distractors=num_distractors,
            closed_prob=closed_prob,
            max_target_instances=max_target_instances,
            max_plan_length=max_plan_length,
            eval_fraction=eval_fraction,
        )
        games = GeneratedGames(split, 60 if num_games is None else num_games, seed, cfg, cache_dir, task_types)  # type: ignore[arg-type]
        if pregenerate:
            games.pregenerate()
    else:
        raise ValueError(f"source must be 'generated' or 'official', got {source!r}")
    if engine == "fast" and source == "generated":
        from gaca.envs.alfworld_fast import FastAlfworldEnv

        return FastAlfworldEnv(games, max_steps=max_steps, expert=expert, success_reward=success_reward,
                               hide_actions=hide_actions)
    return AlfworldEnv(
        games,
        max_steps=max_steps,
        expert=expert,
        success_reward=success_reward,
        hide_actions=hide_actions,
        fast_engine=fast_engine,
    )


__all__ = [
    "NOTHING_HAPPENS",
    "OFFICIAL_SPLITS",
    "SPLIT_DIRS",
    "TASK_TYPES",
    "AlfworldEnv",
    "GameRecord",
    "GenConfig",
    "GeneratedGames",
    "OfficialGames",
    "combo_split",
    "default_cache_dir",
    "games_root",
    "generate_game",
    "generate_games",
    "make",
]
