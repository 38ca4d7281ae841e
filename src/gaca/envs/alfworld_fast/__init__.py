"""A fast native ALFWorld engine: the same generated games, the same text, no TextWorld at play time.

``make_fast_env(**kwargs)`` takes the keyword arguments of ``gaca.envs.alfworld.make`` and returns
a :class:`FastAlfworldEnv` over the same games (generated games only: official ALFWorld data
plays on the real engine). Step for step it returns what alfworld's TextWorld PDDL engine returns
(observation text, admissible commands in the same order, reward, ``won``, step limit); the
differential tests in ``tests/envs/test_alfworld_fast*.py`` replay expert plans and random walks
on both engines and compare every step. See ``engine`` for how the rules were carried over.
"""

from __future__ import annotations

from typing import Any

from gaca.envs.alfworld_fast.engine import HELP_TEXT, NOTHING_HAPPENS, FastState, display_list
from gaca.envs.alfworld_fast.env import FastAlfworldEnv
from gaca.envs.alfworld_fast.expert import plan as expert_plan
from gaca.envs.alfworld_fast.game import FastGame, UnsupportedGame, build_game, demangle_names, load_game


def make_fast_env(**kwargs: Any) -> FastAlfworldEnv:
    """``gaca.envs.alfworld.make(**kwargs, engine="fast")``: generated games on the native engine.

    Games are generated (on the real engine, once, into the cache) exactly as ``make`` does; only
    playing them is native. Official data plays on the real engine only, so ``source`` must be
    ``"generated"``.
    """
    from gaca.envs.alfworld import make

    if kwargs.get("source", "generated") != "generated":
        raise ValueError("the fast engine plays generated games only; use engine='real' for official data")
    return make(**{**kwargs, "engine": "fast"})  # type: ignore[return-value]


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
