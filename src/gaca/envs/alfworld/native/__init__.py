"""gaca's native ALFWorld engine: the same generated games, the same text, no TextWorld at play time.

Step for step it returns what alfworld's TextWorld PDDL engine returns (observation text,
admissible commands in the same order, ``won``); the differential tests in
``tests/envs/test_alfworld_fast*.py`` replay expert plans and random walks on both engines and
compare every step (``gaca.testing.alfworld_differential``). ``engine`` says how the rules were
carried over; ``gaca.envs.alfworld.engines.NativeEngine`` plugs it into ``AlfworldEnv``.
"""

from __future__ import annotations

from gaca.envs.alfworld.native.engine import HELP_TEXT, NOTHING_HAPPENS, FastState, display_list
from gaca.envs.alfworld.native.expert import plan as expert_plan
from gaca.envs.alfworld.native.game import FastGame, UnsupportedGame, build_game, demangle_names, load_game

__all__ = [
    "HELP_TEXT",
    "NOTHING_HAPPENS",
    "FastGame",
    "FastState",
    "UnsupportedGame",
    "build_game",
    "demangle_names",
    "display_list",
    "expert_plan",
    "load_game",
]
