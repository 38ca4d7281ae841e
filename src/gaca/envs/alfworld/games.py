"""The games an ALFWorld environment cycles over: what a game is, and ALFWorld's official files.

A game source is indexable: ``games[j]`` is a :class:`GameRecord` (where the game file lies, its
task and family). ``AlfworldEnv.reset(seed=s)`` plays ``games[s % len(games)]``. The sources are
``OfficialGames`` (here) and ``generator.GeneratedGames`` (games made on demand).
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from gaca.envs.alfworld.config import DATA_VERSION_DIR, OFFICIAL_SPLITS, TASK_TYPES

#: Where ALFWorld's goal text starts in a game's introduction.
TASK_PREFIX = "Your task is to: "


@dataclass(frozen=True)
class GameRecord:
    """One generated (or official) game: where it lies and what it asks."""

    game_file: str
    """Path of the ``game.tw-pddl`` file."""
    task_id: str
    task_type: str
    task: str
    """Goal text as the game shows it ("put a clean mug in coffeemachine.")."""
    scene: int
    object_target: str
    parent_target: str
    """Goal receptacle class; for look_at_obj_in_light the lamp class."""
    expert_plan: tuple[str, ...] = field(default=())
    """The planner expert's plan from the initial state (empty when unknown)."""

    def to_json(self) -> dict[str, Any]:
        """Plain-JSON form (paths as stored)."""
        d = dataclasses.asdict(self)
        d["expert_plan"] = list(self.expert_plan)
        return d


class GameSource(Protocol):
    """An indexable collection of games."""

    def __len__(self) -> int: ...

    def __getitem__(self, index: int) -> GameRecord: ...


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
    i = grammar.find(TASK_PREFIX)
    if i < 0:
        return ""
    j = grammar.find('"', i)
    return grammar[i + len(TASK_PREFIX) : j].strip() if j > 0 else ""


__all__ = ["TASK_PREFIX", "GameRecord", "GameSource", "OfficialGames"]
