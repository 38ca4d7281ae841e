"""ALFWorld's settings (the ``[env]`` table with ``name = "alfworld"``) and the generator's knobs.

Importing this module needs neither ``alfworld`` nor ``textworld``: configs load and validate on
any machine, and the engine is imported only when an environment is built.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from typing import ClassVar, Literal

from gaca import validate
from gaca.envs.config import EnvConfig

#: The six ALFWorld task families, in ALFWorld's own order (``alfred_tw_env.TASK_TYPES``).
TASK_TYPES: tuple[str, ...] = (
    "pick_and_place_simple",
    "look_at_obj_in_light",
    "pick_clean_then_place_in_recep",
    "pick_heat_then_place_in_recep",
    "pick_cool_then_place_in_recep",
    "pick_two_obj_and_place",
)
#: Directory name of the official data release (its files, and the generated games' layout, lie under it).
DATA_VERSION_DIR = "json_2.1.1"
#: Bumped whenever generated games would change: part of the cache key.
GENERATOR_VERSION = 2
#: Generated splits -> their directory. ``train``: the training games. ``valid_seen``: other games of
#: the train split's (scene, object, receptacle) combinations (ALFWorld's name). ``eval``: games of
#: combinations never trained on, in the training floor plans. ``unseen_rooms``: games in floor plans
#: that no other split uses (what ALFWorld's ``valid_unseen`` holds out: whole rooms).
SPLIT_DIRS: dict[str, str] = {"train": "train", "eval": "eval_unseen_combinations", "valid_seen": "valid_seen",
                              "unseen_rooms": "valid_unseen_rooms"}
#: gaca split -> the official split directory (official ``valid_unseen`` holds out whole rooms).
OFFICIAL_SPLITS: dict[str, str] = {"train": "train", "eval": "valid_unseen", "valid_unseen": "valid_unseen",
                                   "unseen_rooms": "valid_unseen", "valid_seen": "valid_seen"}

Split = Literal["train", "eval", "valid_seen", "unseen_rooms"]


@dataclass(frozen=True)
class GenConfig:
    """Difficulty knobs of the game generator (all part of the cache key)."""

    max_receptacles: int | None = None
    """Keep at most this many receptacles of the floor plan (the task's own always kept); None: all."""
    num_distractors: int = 12
    """Objects of other classes scattered over the receptacles."""
    closed_prob: float | None = None
    """Probability that each target instance starts inside a closed (openable) receptacle;
    None: uniform over the compatible receptacles, as in ALFRED."""
    max_target_instances: int = 3
    """Instances of the target class: uniform in [1, this] ([2, this + 1] for pick_two)."""
    max_plan_length: int = 30
    """Reject a game whose expert plan is longer (ALFWorld's step limit is 50)."""
    eval_fraction: float = 0.2
    """Share of (scene, object, receptacle) combinations that belong to the eval split."""
    unseen_rooms_per_type: int = 3
    """Floor plans of each room type (kitchen, living room, bedroom, bathroom) that only the
    ``unseen_rooms`` split uses (more where a task family would otherwise have none)."""
    checker: Literal["planner", "native"] = "planner"
    """How a candidate game is checked winnable; its plan becomes the game's walkthrough. ``planner``:
    alfworld's PDDL planner expert on the TextWorld engine (optimal plans; 0.5-4 s a game, and a
    candidate it has not solved in ``SOLVE_TIMEOUT_S`` is rejected, so about one game in ten costs a
    minute and which games are made can depend on the machine's speed). ``native``: gaca's native
    engine and task expert (milliseconds a game, deterministic; plans are correct, not always the
    shortest). Each checker makes its own game set."""

    def __post_init__(self) -> None:
        if self.max_receptacles is not None and self.max_receptacles < 3:
            raise ValueError(f"max_receptacles must be >= 3 or None, got {self.max_receptacles}")
        if self.num_distractors < 0:
            raise ValueError(f"num_distractors must be >= 0, got {self.num_distractors}")
        if self.closed_prob is not None and not 0.0 <= self.closed_prob <= 1.0:
            raise ValueError(f"closed_prob must be in [0, 1] or None, got {self.closed_prob}")
        if self.max_target_instances < 1:
            raise ValueError(f"max_target_instances must be >= 1, got {self.max_target_instances}")
        if self.max_plan_length < 1:
            raise ValueError(f"max_plan_length must be >= 1, got {self.max_plan_length}")
        if not 0.0 < self.eval_fraction < 1.0:
            raise ValueError(f"eval_fraction must be in (0, 1), got {self.eval_fraction}")
        if not 1 <= self.unseen_rooms_per_type <= 10:
            raise ValueError(f"unseen_rooms_per_type must be in [1, 10], got {self.unseen_rooms_per_type}")
        validate.literal_fields(self, "env.generator.")

    def key(self) -> str:
        """Short stable hash of the knobs and the generator version (names the cache directory)."""
        knobs = dataclasses.asdict(self)
        if knobs["checker"] == "planner":
            del knobs["checker"]  # game sets made before the field existed keep their directory
        blob = json.dumps({"v": GENERATOR_VERSION, **knobs}, sort_keys=True)
        return hashlib.sha1(blob.encode()).hexdigest()[:10]


@dataclass(frozen=True)
class AlfworldConfig(EnvConfig):
    """ALFWorld households (Shridhar et al. 2021, arXiv:2010.03768), generated offline or official."""

    SPLITS: ClassVar[tuple[str, ...]] = ("train", "eval", "valid_seen", "unseen_rooms", "valid_unseen")

    name: str = "alfworld"
    intro: str = "You are an expert agent acting in a text-based household environment (ALFWorld)."
    engine: Literal["native", "textworld"] = "native"
    """``native``: gaca's engine, checked step for step against alfworld's TextWorld engine and about
    1000x faster (generated games only); ``textworld``: alfworld's own TextWorld PDDL engine."""
    source: Literal["generated", "official"] = "generated"
    """``generated``: games made offline from alfworld's floor plans (see ``generator``);
    ``official``: ALFWorld's game files under ``data_dir`` (played on the TextWorld engine)."""
    data_dir: str | None = None
    """Official games: the ALFWorld data directory (None: ``$ALFWORLD_DATA``)."""
    game_seed: int = 0
    """Generated games: the seed of the game set (the same seed and knobs give the same games)."""
    cache_dir: str | None = None
    """Generated games: where they are kept (None: ``$GACA_CACHE/alfworld`` or ``~/.cache/gaca/alfworld``)."""
    task_types: tuple[str, ...] = TASK_TYPES
    """Task families to play; games cycle over them in ALFWorld's order (``TASK_TYPES``)."""
    success_reward: float = 10.0
    """Reward of the winning step (ALFWorld / verl-agent: 10)."""
    hide_actions: tuple[str, ...] = ("help",)
    """Commands left out of the admissible actions shown to the agent (the engine still accepts them)."""
    generator: GenConfig = field(default_factory=GenConfig)
    """Generated games: the difficulty knobs (``[env.generator]``)."""

    def __post_init__(self) -> None:
        for name in ("task_types", "hide_actions"):  # TOML and callers give lists
            object.__setattr__(self, name, tuple(getattr(self, name)))
        super().__post_init__()
        unknown = [t for t in self.task_types if t not in TASK_TYPES]
        if unknown or not self.task_types:
            raise ValueError(f"env.task_types must be a non-empty subset of {list(TASK_TYPES)}, got "
                             f"{list(self.task_types)}")
        if self.source == "generated":
            for split in (self.train_split, self.eval_split):
                if split not in SPLIT_DIRS:
                    raise ValueError(f"generated ALFWorld games have splits {list(SPLIT_DIRS)}, got {split!r}")
        elif self.engine != "textworld":
            raise ValueError("official ALFWorld games play on the TextWorld engine: set env.engine='textworld'")


__all__ = ["DATA_VERSION_DIR", "GENERATOR_VERSION", "OFFICIAL_SPLITS", "SPLIT_DIRS", "TASK_TYPES", "AlfworldConfig",
           "GenConfig", "Split"]
