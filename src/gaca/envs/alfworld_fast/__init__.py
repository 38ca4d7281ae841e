"""A fast native ALFWorld engine: the same generated games, the same text, no TextWorld at play time.

``make_fast_env(**kwargs)`` takes the keyword arguments of ``gaca.envs.alfworld.make`` and returns
a :class:`FastAlfworldEnv` over the same games (generated games only: official ALFWorld data
plays on the real engine). Step for step it returns what alfworld's TextWorld PDDL engine returns
(observation text, admissible commands in the same order, reward, ``won``, step limit); the
differential tests in ``tests/envs/test_alfworld_fast*.py`` replay expert plans and random walks
on both engines and compare every step. See ``engine`` for how the rules were carried over.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gaca.envs.alfworld_fast.engine import HELP_TEXT, NOTHING_HAPPENS, FastState, display_list
from gaca.envs.alfworld_fast.env import FastAlfworldEnv
from gaca.envs.alfworld_fast.expert import plan as expert_plan
from gaca.envs.alfworld_fast.game import FastGame, UnsupportedGame, build_game, demangle_names, load_game


def make_fast_env(
    split: str = "train",
    num_games: int | None = 60,
    seed: int = 0,
    cache_dir: str | None = None,
    max_steps: int = 50,
    expert: bool = False,
    *,
    source: str = "generated",
    task_types: Sequence[str] | None = None,
    success_reward: float = 10.0,
    hide_actions: Sequence[str] = ("help",),
    pregenerate: bool = False,
    **gen_kwargs: Any,
) -> FastAlfworldEnv:
    """The fast-engine twin of ``gaca.envs.alfworld.make`` (same arguments, generated games only).

    Games are generated (on the real engine, once, into the cache) exactly as ``make`` does;
    only playing them is native. ``gen_kwargs``: ``max_receptacles``, ``num_distractors``,
    ``closed_prob``, ``max_target_instances``, ``max_plan_length``, ``eval_fraction`` (see
    ``GenConfig``); ``fast_engine`` and ``data_dir`` are accepted and ignored.
    """
    from gaca.envs.alfworld import SPLIT_DIRS, GenConfig, GeneratedGames

    if source != "generated":
        raise ValueError("the fast engine plays generated games only; use engine='real' for official data")
    if split not in SPLIT_DIRS:
        raise ValueError(f"generated games have splits {sorted(SPLIT_DIRS)}, got {split!r}")
    gen_kwargs.pop("fast_engine", None)
    gen_kwargs.pop("data_dir", None)
    cfg = GenConfig(**gen_kwargs)
    games = GeneratedGames(split, 60 if num_games is None else num_games, seed, cfg, cache_dir, task_types)  # type: ignore[arg-type]
    if pregenerate:
        games.pregenerate()
    return FastAlfworldEnv(games, max_steps=max_steps, expert=expert, success_reward=success_reward,
                           hide_actions=hide_actions)


__all__ = [
    "HELP_TEXT",
    "NOTHING_HAPPENS",
    "FastAlfworldEnv",
    "FastGame",
    "FastState",
    "UnsupportedGame",
    "build_game",
    "demangle_names",
    "display_list",
    "expert_plan",
    "load_game",
    "make_fast_env",
]
