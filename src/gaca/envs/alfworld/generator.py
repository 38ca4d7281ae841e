"""Generate ALFWorld games offline: PDDL problems for the six task families, solved by the planner.

``alfworld`` ships the PDDL domain (``alfred.pddl``), the text grammar (``alfred.twl2``), the
floor-plan layouts and the experts, but not its game files. This module writes the games itself,
in the official on-disk format, so that alfworld's own TextWorld PDDL environment (with its
demangler, infos and expert wrappers) plays them unchanged:

    <root>/json_2.1.1/<split>/<task_type>-<Obj>-<Mrecep>-<Recep>-<scene>/<trial>/
        initial_state.pddl   the PDDL problem (ALFRED's mangled ids: ``Apple_bar__plus_00_dot_47...``)
        traj_data.json       task_type, pddl_params, scene, templated goal text (+ a ``gaca`` block)
        game.tw-pddl         {pddl_domain, grammar (goal text filled in), pddl_problem, solvable, walkthrough}

A game is a deterministic function of ``(seed, split, index, GenConfig)``. Game ``index`` belongs to
family ``TASK_TYPES[index % 6]``; its scene, target object and receptacle are drawn until their
``(scene, object, receptacle)`` combination falls in the requested split (a stable hash assigns
every combination to exactly one split, so train and eval share none). ``valid_seen`` games, like
ALFWorld's split of that name, draw from the train split's combinations but are other games (their
own random draws of task, placements and distractors): held-out instances of seen combinations,
where ``eval`` holds out the combinations themselves. ``unseen_rooms`` games are set in floor plans
that no other split uses (``unseen_rooms``: a few per room type), as ALFWorld's ``valid_unseen``
holds out whole rooms. The world is then filled
(target instances, distractors, lamps), written, and checked by ``GenConfig.checker`` (alfworld's
planner expert on the TextWorld engine, or gaca's native engine and expert): the game is kept only
if executing the checker's plan wins within ``max_plan_length`` steps; otherwise the next attempt is
drawn. Generated games are cached on disk under a directory named by the config hash;
``GeneratedGames`` is the game source that makes them for an environment on first use.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import logging
import os
import random
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import alfworld.gen.constants as alfred
from alfworld.gen import goal_library
from alfworld.info import ALFRED_PDDL_PATH, ALFRED_TWL2_PATH

from gaca.envs.alfworld.config import DATA_VERSION_DIR, GENERATOR_VERSION, SPLIT_DIRS, TASK_TYPES, GenConfig, Split
from gaca.envs.alfworld.games import GameRecord
from gaca.envs.alfworld.scenes import (
    LAMP_HOLDERS,
    STATIC_RECEPTACLES,
    Receptacle,
    Scene,
    can_contain,
    load_scene,
    scene_numbers,
)
from gaca.persist import atomic_directory, write_json

logger = logging.getLogger(__name__)

# The appliance each state-changing family needs, and the property its object must have.
_APPLIANCE = {
    "pick_clean_then_place_in_recep": "SinkBasin",
    "pick_heat_then_place_in_recep": "Microwave",
    "pick_cool_then_place_in_recep": "Fridge",
}
_PROPERTY = {
    "pick_clean_then_place_in_recep": "Cleanable",
    "pick_heat_then_place_in_recep": "Heatable",
    "pick_cool_then_place_in_recep": "Coolable",
}


# ---------------------------------------------------------------------------------------------
# Task sampling
# ---------------------------------------------------------------------------------------------


def combo_split(scene: int, obj: str, recep: str, eval_fraction: float = 0.2) -> Split:
    """The split owning the (scene, target object, receptacle) combination (stable hash)."""
    h = int(hashlib.sha1(f"{scene}|{obj}|{recep}".encode()).hexdigest()[:8], 16)
    return "eval" if (h % 10_000) < eval_fraction * 10_000 else "train"


@dataclass(frozen=True)
class TaskSpec:
    """A task before the world is filled in."""

    task_type: str
    scene: int
    obj: str
    recep: str
    """Goal receptacle class ("" for look_at_obj_in_light)."""
    toggle: str
    """Lamp class for look_at_obj_in_light, else ""."""

    @property
    def combo(self) -> tuple[int, str, str]:
        """(scene, object, receptacle) that the split is decided on (the lamp for look tasks)."""
        return (self.scene, self.obj, self.recep or self.toggle)


def _family_scenes(task_type: str) -> list[Scene]:
    rooms = alfred.GOALS_VALID[task_type]
    out = []
    for num in scene_numbers():
        s = load_scene(num)
        if s.room not in rooms:
            continue
        rtypes = set(s.receptacle_types)
        if task_type in _APPLIANCE and _APPLIANCE[task_type] not in rtypes:
            continue
        if task_type == "look_at_obj_in_light" and not (s.lamps and rtypes & set(LAMP_HOLDERS)):
            continue
        out.append(s)
    return out


def _candidate_tasks(task_type: str, scene: Scene) -> list[TaskSpec]:
    """Every (object, receptacle[, lamp]) this scene supports for the family."""
    rtypes = scene.receptacle_types
    tasks = []
    for obj in scene.object_types:
        if task_type in _PROPERTY and obj not in alfred.VAL_ACTION_OBJECTS[_PROPERTY[task_type]]:
            continue
        appliance = _APPLIANCE.get(task_type)
        if task_type == "look_at_obj_in_light":
            # The object must start somewhere it can be taken from.
            if not any(can_contain(r, obj) for r in rtypes):
                continue
            tasks.extend(TaskSpec(task_type, scene.num, obj, "", lamp) for lamp in scene.lamps)
            continue
        for recep in rtypes:
            if recep == appliance or not can_contain(recep, obj):
                continue
            # The object must be able to start in a receptacle of another class (not the appliance
            # for cooling: ALFWorld counts whatever lies in a fridge as cool).
            starts = [r for r in rtypes if r != recep and can_contain(r, obj)]
            if task_type == "pick_cool_then_place_in_recep":
                starts = [r for r in starts if r != "Fridge"]
            if starts:
                tasks.append(TaskSpec(task_type, scene.num, obj, recep, ""))
    return tasks


def _room_rank(num: int) -> str:
    return hashlib.sha1(f"room|{num}".encode()).hexdigest()


@functools.cache
def unseen_rooms(per_type: int) -> frozenset[int]:
    """The floor plans only the ``unseen_rooms`` split uses: per room type the ``per_type`` with the
    smallest stable hash, plus, for a task family left without one, its eligible plan of smallest hash."""
    by_room: dict[str, list[int]] = {}
    for num in scene_numbers():
        by_room.setdefault(load_scene(num).room, []).append(num)
    held = {n for nums in by_room.values() for n in sorted(nums, key=_room_rank)[:per_type]}
    for task_type in TASK_TYPES:
        eligible = [s.num for s in _family_scenes(task_type) if _candidate_tasks(task_type, s)]
        if eligible and not held & set(eligible):
            held.add(min(eligible, key=_room_rank))
    return frozenset(held)


def sample_task(task_type: str, split: Split, rng: random.Random, cfg: GenConfig) -> TaskSpec:
    """Draw a task of ``task_type`` for ``split``: in ``unseen_rooms`` any task of a held-out floor
    plan; otherwise a task of the other floor plans whose combination belongs to the split
    (``valid_seen``: to train)."""
    if task_type not in TASK_TYPES:
        raise ValueError(f"unknown task type {task_type!r}; known: {TASK_TYPES}")
    held = unseen_rooms(cfg.unseen_rooms_per_type)
    owner = "train" if split == "valid_seen" else split
    scenes = [s for s in _family_scenes(task_type) if (s.num in held) == (split == "unseen_rooms")]
    for _ in range(200):
        scene = rng.choice(scenes)
        cands = [t for t in _candidate_tasks(task_type, scene)
                 if split == "unseen_rooms" or combo_split(*t.combo, cfg.eval_fraction) == owner]
        if cands:
            return rng.choice(cands)
    raise RuntimeError(f"no {task_type} task found for split {split!r}")


# ---------------------------------------------------------------------------------------------
# World filling and PDDL writing
# ---------------------------------------------------------------------------------------------


def mangle(name: str) -> str:
    """ALFRED's PDDL-safe spelling of an id (``PlannedGameState.fix_pddl_str_chars``)."""
    for a, b in (("-", "_minus_"), ("|", "_bar_"), ("+", "_plus_"), (".", "_dot_"), (",", "_comma_")):
        name = name.replace(a, b)
    return name


def _loc(pose: tuple[int, int, int, int]) -> str:
    return "loc|{}|{}|{}|{}".format(*pose)


def _fmt(v: float) -> str:
    return f"{v:+06.2f}"


@dataclass
class World:
    """A filled-in game: receptacles, objects and where everything is."""

    spec: TaskSpec
    receptacles: list[Receptacle]
    locations: dict[str, str]
    """receptacle id -> location id (unique per receptacle, so "go to X" names one place)."""
    objects: list[tuple[str, str, str]]
    """(object id, object class, receptacle id it lies in)."""
    agent_loc: str
    toggleable: set[str]


def build_world(spec: TaskSpec, rng: random.Random, cfg: GenConfig) -> World:
    """Choose receptacles, place target instances, lamps and distractors (all from ``rng``)."""
    scene = load_scene(spec.scene)
    recs = list(scene.receptacles)
    appliance = _APPLIANCE.get(spec.task_type)

    # Receptacle subset: the goal class, the appliance and a lamp holder are always kept.
    if cfg.max_receptacles is not None and len(recs) > cfg.max_receptacles:
        needed: list[Receptacle] = []
        for rtype in filter(None, (spec.recep, appliance)):
            needed.append(rng.choice([r for r in recs if r.rtype == rtype]))
        if spec.toggle:
            needed.append(rng.choice([r for r in recs if r.rtype in LAMP_HOLDERS]))
        start_ok = [
            r for r in recs
            if r.rtype != spec.recep and can_contain(r.rtype, spec.obj) and r not in needed
            and not (spec.task_type == "pick_cool_then_place_in_recep" and r.rtype == "Fridge")
        ]
        needed.append(rng.choice(start_ok))
        rest = [r for r in recs if r not in needed]
        rng.shuffle(rest)
        keep = set(needed) | set(rest[: max(0, cfg.max_receptacles - len(needed))])
        recs = [r for r in recs if r in keep]  # keep the scene's order

    # Unique locations (two drawers opened from one spot get distinct horizons).
    locations: dict[str, str] = {}
    used: set[tuple[int, int, int, int]] = set()
    for r in recs:
        x, z, rot, hor = r.pose
        while (x, z, rot, hor) in used:
            hor += 15
        used.add((x, z, rot, hor))
        locations[r.id] = _loc((x, z, rot, hor))
    for _ in range(1000):
        px, pz = rng.choice(scene.points)
        pose = (round(px / 0.25), round(pz / 0.25), rng.choice((0, 90, 180, 270)), 30)
        if pose not in used:
            break
    agent_loc = _loc(pose)

    objects: list[tuple[str, str, str]] = []
    taken_ids: set[str] = set()

    def new_id(otype: str, r: Receptacle) -> str:
        while True:
            x, z = r.pose[0] * 0.25 + rng.uniform(-0.6, 0.6), r.pose[1] * 0.25 + rng.uniform(-0.6, 0.6)
            oid = f"{otype}|{_fmt(x)}|{_fmt(rng.uniform(0.0, 1.8))}|{_fmt(z)}"
            if oid not in taken_ids:
                taken_ids.add(oid)
                return oid

    # Target instances: never already in a goal-class receptacle (nor the fridge for cooling).
    lo, hi = (2, cfg.max_target_instances + 1) if spec.task_type == "pick_two_obj_and_place" else (
        1, cfg.max_target_instances)
    n_target = rng.randint(lo, hi)
    starts = [
        r for r in recs
        if can_contain(r.rtype, spec.obj) and r.rtype != spec.recep
        and not (spec.task_type == "pick_cool_then_place_in_recep" and r.rtype == "Fridge")
    ]
    if not starts:
        raise RuntimeError(f"no start receptacle for {spec}")
    closed = [r for r in starts if r.openable]
    open_ = [r for r in starts if not r.openable]
    for _ in range(n_target):
        pool = starts
        if cfg.closed_prob is not None and closed and open_:
            pool = closed if rng.random() < cfg.closed_prob else open_
        r = rng.choice(pool)
        objects.append((new_id(spec.obj, r), spec.obj, r.id))

    # Lamps stand on lamp holders (only the task's lamp is toggleable, as in ALFWorld's games).
    toggleable: set[str] = set()
    holders = [r for r in recs if r.rtype in LAMP_HOLDERS]
    if holders:
        for lamp in scene.lamps:
            r = rng.choice(holders)
            lid = new_id(lamp, r)
            objects.append((lid, lamp, r.id))
            if lamp == spec.toggle:
                toggleable.add(lid)

    # Distractors: other classes of the scene, on receptacles that can hold them.
    others = [o for o in scene.object_types if o != spec.obj]
    for _ in range(cfg.num_distractors):
        if not others:
            break
        otype = rng.choice(others)
        fits = [r for r in recs if can_contain(r.rtype, otype)]
        if spec.task_type in ("pick_and_place_simple", "pick_two_obj_and_place") and not fits:
            continue
        if fits:
            r = rng.choice(fits)
            objects.append((new_id(otype, r), otype, r.id))
    return World(spec, recs, locations, objects, agent_loc, toggleable)


def goal_pddl(spec: TaskSpec) -> str:
    """The family's goal formula from alfworld's goal library (ALFRED's ``#`` typing fixed)."""
    g = goal_library.gdict[spec.task_type]["pddl"]
    return g.format(obj=spec.obj, recep=spec.recep, toggle=spec.toggle).replace("#", "-")


def problem_pddl(world: World, name: str) -> str:
    """Write the PDDL problem of ``world`` (ALFRED's layout of ``initial_state.pddl``)."""
    m = mangle
    # Every class is declared as a type constant (the domain names e.g. SinkBasinType, KnifeType).
    otypes = sorted(set(alfred.OBJECTS_SET) - STATIC_RECEPTACLES)
    rtypes = sorted(STATIC_RECEPTACLES)
    present_otypes = sorted({o for _, o, _ in world.objects})
    locs = sorted(set(world.locations.values()) | {world.agent_loc})
    rec_by_id = {r.id: r for r in world.receptacles}

    objs = ["agent1 - agent"]
    objs += [f"{t}Type - otype" for t in otypes]
    objs += [f"{t}Type - rtype" for t in rtypes]
    objs += [f"{m(oid)} - object" for oid, _, _ in sorted(world.objects)]
    objs += [f"{m(r.id)} - receptacle" for r in world.receptacles]
    objs += [f"{m(loc)} - location" for loc in locs]

    init: list[str] = []
    for r in world.receptacles:
        init.append(f"(receptacleType {m(r.id)} {r.rtype}Type)")
    for oid, otype, _ in sorted(world.objects):
        init.append(f"(objectType {m(oid)} {otype}Type)")
    for rt in sorted({r.rtype for r in world.receptacles}):
        init += [f"(canContain {rt}Type {ot}Type)" for ot in present_otypes if can_contain(rt, ot)]
    for oid, otype, _ in sorted(world.objects):
        if otype not in ("DeskLamp", "FloorLamp"):
            init.append(f"(pickupable {m(oid)})")
        if otype in alfred.MOVABLE_RECEPTACLES_SET:
            init.append(f"(isReceptacleObject {m(oid)})")
        for prop, pred in (("Cleanable", "cleanable"), ("Heatable", "heatable"), ("Coolable", "coolable"),
                           ("Sliceable", "sliceable")):
            if otype in alfred.VAL_ACTION_OBJECTS[prop]:
                init.append(f"({pred} {m(oid)})")
        if oid in world.toggleable:
            init.append(f"(toggleable {m(oid)})")
    for r in world.receptacles:
        if r.openable:
            init.append(f"(openable {m(r.id)})")
    init.append(f"(atLocation agent1 {m(world.agent_loc)})")
    for oid, _, rid in sorted(world.objects):
        init.append(f"(inReceptacle {m(oid)} {m(rid)})")
    for r in world.receptacles:
        init.append(f"(receptacleAtLocation {m(r.id)} {m(world.locations[r.id])})")
    for oid, _, rid in sorted(world.objects):
        init.append(f"(objectAtLocation {m(oid)} {m(world.locations[rec_by_id[rid].id])})")

    sep = "\n        "
    return (
        f"(define (problem plan_{name})\n(:domain alfred)\n(:objects\n        {sep.join(objs)}\n        )\n\n"
        f"(:init\n        {sep.join(init)}\n        )\n\n{goal_pddl(world.spec)}"
    )


def task_text(spec: TaskSpec, rng: random.Random) -> str:
    """ALFWorld's templated goal description (alfworld's ``get_templated_task_desc``, seeded)."""
    template = rng.choice(goal_library.gdict[spec.task_type]["templates"])
    return template.format(obj=spec.obj.lower(), recep=spec.recep.lower(), toggle=spec.toggle.lower(), mrecep="")


def traj_data(spec: TaskSpec, trial: str, desc: str, extra: dict[str, Any]) -> dict[str, Any]:
    """The subset of ALFRED's ``traj_data.json`` that alfworld reads, plus a ``gaca`` block."""
    return {
        "task_id": trial,
        "task_type": spec.task_type,
        "pddl_params": {
            "object_target": spec.obj,
            "parent_target": spec.recep,
            "toggle_target": spec.toggle,
            "mrecep_target": "",
            "object_sliced": False,
        },
        "scene": {"floor_plan": f"FloorPlan{spec.scene}", "scene_num": spec.scene},
        "turk_annotations": {"anns": [{"task_desc": desc, "high_descs": [], "assignment_id": "gaca-template"}]},
        "gaca": extra,
    }


def task_dirname(spec: TaskSpec) -> str:
    """ALFRED's task directory name ``<task_type>-<Obj>-<Mrecep>-<Recep>-<scene>``."""
    return f"{spec.task_type}-{spec.obj}-None-{spec.recep or spec.toggle}-{spec.scene}"


def game_logic(desc: str) -> dict[str, str]:
    """The bundled domain and grammar, with the goal text filled in (``add_task_to_grammar``)."""
    with open(ALFRED_PDDL_PATH) as f:
        domain = f.read()
    with open(ALFRED_TWL2_PATH) as f:
        grammar = f.read()
    return {"pddl_domain": domain, "grammar": grammar.replace("UNKNOWN GOAL", desc)}


# ---------------------------------------------------------------------------------------------
# Playing with alfworld's wrappers; the planner expert
# ---------------------------------------------------------------------------------------------


@contextmanager
def _keep_argv() -> Iterator[None]:
    """fast_downward's translator overwrites ``sys.argv``; put it back."""
    argv = list(sys.argv)
    try:
        yield
    finally:
        sys.argv[:] = argv


_FREE_LIBS: list[Any] = []


def make_tw_env(expert: bool, facts: bool = False) -> Any:
    """alfworld's TextWorld PDDL environment with its demangler, infos and (planner) expert wrappers.

    Each PddlEnv holds its own copy of fast-downward's shared library. Unloading one (dlclose)
    and loading another crashes the process, so closed envs hand their copy back to a per-process
    free list (see ``close_tw_env``) and new envs take it from there.
    """
    import fast_downward
    import textworld
    from alfworld.agents.environment.alfred_tw_env import (
        AlfredDemangler,
        AlfredExpert,
        AlfredExpertType,
        AlfredInfos,
    )
    from textworld.envs import PddlEnv

    infos = textworld.EnvInfos(won=True, admissible_commands=True, facts=facts, extras=["gamefile"])
    if _FREE_LIBS:
        lib, load_lib = _FREE_LIBS.pop(), fast_downward.load_lib
        fast_downward.load_lib = lambda: lib  # PddlEnv.__init__ calls fast_downward.load_lib()
        try:
            pddl_env = PddlEnv(infos)
        finally:
            fast_downward.load_lib = load_lib
    else:
        pddl_env = PddlEnv(infos)
    env = AlfredInfos(AlfredDemangler(pddl_env, shuffle=False))
    if expert:
        env = AlfredExpert(env, expert_type=AlfredExpertType.PLANNER)
    return env


def load_game(env: Any, game_file: str) -> None:
    """``env.load(game_file)`` with ``sys.argv`` protected."""
    with _keep_argv():
        env.load(game_file)


def close_tw_env(env: Any) -> None:
    """Hand the env's fast-downward library copy back for reuse (never unloaded, see make_tw_env)."""
    pddl_env = env.unwrapped
    lib = getattr(pddl_env, "downward_lib", None)
    if lib is not None:
        pddl_env.downward_lib = None
        _FREE_LIBS.append(lib)


def solve(game_file: str, env: Any | None = None, max_steps: int = 50) -> list[str] | None:
    """Plan with alfworld's planner expert and execute the plan; the plan if it wins, else None."""
    own = env is None
    env = env or make_tw_env(expert=True)
    try:
        load_game(env, game_file)
        state = env.reset()
        plan = list(state["extra.expert_plan"])
        if not plan:
            return None
        for cmd in plan[:max_steps]:
            if cmd not in state["admissible_commands"]:
                return None
            state, _, done = env.step(cmd)
            if done:
                break
        return plan if state["won"] else None
    finally:
        if own:
            close_tw_env(env)


# ---------------------------------------------------------------------------------------------
# Generation with an on-disk cache
# ---------------------------------------------------------------------------------------------


def default_cache_dir() -> str:
    """``$GACA_CACHE/alfworld`` or ``~/.cache/gaca/alfworld``."""
    root = os.environ.get("GACA_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "gaca")
    return os.path.join(root, "alfworld")


def games_root(cache_dir: str | None, cfg: GenConfig) -> str:
    """Root of the official-style layout holding the games generated with ``cfg``."""
    return os.path.join(cache_dir or default_cache_dir(), f"gen-{cfg.key()}")


class _Rejected(Exception):
    """A generated game the checker could not solve within the plan-length limit."""


def _write_checked_game(directory: Path, desc: str, problem: str, traj: dict[str, Any], cfg: GenConfig) -> list[str]:
    """Write a game's files into ``directory`` and check it; its expert plan, or ``_Rejected``."""
    game_file = os.path.join(directory, "game.tw-pddl")
    gamedata = {**game_logic(desc), "pddl_problem": problem, "solvable": None, "walkthrough": None}
    with open(game_file, "w") as f:
        json.dump(gamedata, f)
    with open(os.path.join(directory, "initial_state.pddl"), "w") as f:
        f.write(problem)
    with open(os.path.join(directory, "traj_data.json"), "w") as f:
        json.dump(traj, f, indent=1)
    plan = CHECKERS[cfg.checker](game_file, gamedata)
    if plan is None or len(plan) > cfg.max_plan_length:
        raise _Rejected(f"plan={None if plan is None else len(plan)}")
    gamedata.update(solvable=True, walkthrough=plan)
    with open(game_file, "w") as f:
        json.dump(gamedata, f)
    return plan


def _record_path(root: str, split: Split, seed: int, index: int) -> str:
    return os.path.join(root, "index", split, f"seed{seed}", f"{index:06d}.json")


def generate_game(
    index: int,
    split: Split = "train",
    seed: int = 0,
    cfg: GenConfig | None = None,
    cache_dir: str | None = None,
    max_attempts: int = 50,
) -> GameRecord:
    """Game ``index`` of ``split`` for ``seed`` (generated once, then read from the cache)."""
    if split not in SPLIT_DIRS:
        raise ValueError(f"split must be one of {sorted(SPLIT_DIRS)}, got {split!r}")
    cfg = cfg or GenConfig()
    root = games_root(cache_dir, cfg)
    rec_path = _record_path(root, split, seed, index)
    if os.path.exists(rec_path):
        with open(rec_path) as f:
            d = json.load(f)
        d["game_file"] = os.path.join(root, d["game_file"])
        d["expert_plan"] = tuple(d["expert_plan"])
        return GameRecord(**d)

    t0 = time.perf_counter()
    task_type = TASK_TYPES[index % len(TASK_TYPES)]
    for attempt in range(max_attempts):
        rng = random.Random(f"gaca-alfworld|{seed}|{split}|{index}|{attempt}")
        spec = sample_task(task_type, split, rng, cfg)
        world = build_world(spec, rng, cfg)
        trial = f"trial_gaca_s{seed}_{split}_{index:06d}_a{attempt}"
        desc = task_text(spec, rng)
        problem = problem_pddl(world, trial)
        rel_dir = os.path.join(DATA_VERSION_DIR, SPLIT_DIRS[split], task_dirname(spec), trial)
        meta = {"seed": seed, "split": split, "index": index, "attempt": attempt,
                "gen_config": dataclasses.asdict(cfg), "generator_version": GENERATOR_VERSION}
        try:  # the game's directory appears only once its game is checked (another process may win the race)
            with atomic_directory(os.path.join(root, rel_dir)) as tmp:
                plan = _write_checked_game(tmp, desc, problem, traj_data(spec, trial, desc, meta), cfg)
        except _Rejected as rejected:
            logger.debug("game %s attempt %d rejected (%s)", trial, attempt, rejected)
            continue
        rec = GameRecord(
            game_file=os.path.join(rel_dir, "game.tw-pddl"),
            task_id=trial,
            task_type=task_type,
            task=desc + ".",
            scene=spec.scene,
            object_target=spec.obj,
            parent_target=spec.recep or spec.toggle,
            expert_plan=tuple(plan),
        )
        write_json(rec_path, rec.to_json())
        logger.debug("generated %s in %.2fs", trial, time.perf_counter() - t0)
        return dataclasses.replace(rec, game_file=os.path.join(root, rec.game_file))
    raise RuntimeError(f"could not generate a solvable {task_type} game (split={split}, seed={seed}, index={index})")


def generate_games(
    split: Split = "train",
    num_games: int = 60,
    seed: int = 0,
    cfg: GenConfig | None = None,
    cache_dir: str | None = None,
) -> list[GameRecord]:
    """Games ``0 .. num_games - 1`` of ``split`` (families round-robin), generating missing ones."""
    return [generate_game(i, split, seed, cfg, cache_dir) for i in range(num_games)]


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


#: Seconds the planner may take on one candidate game before it is rejected (the search in
#: fast-downward's library cannot be interrupted, so it runs in a child process that is killed).
SOLVE_TIMEOUT_S = 60.0


def _solver_main(conn: Any) -> None:
    env = make_tw_env(expert=True)
    while True:
        try:
            game_file = conn.recv()
        except (EOFError, KeyboardInterrupt):
            return
        try:
            conn.send(solve(game_file, env))
        except Exception as exc:  # an engine error: the candidate is rejected
            conn.send(f"error: {type(exc).__name__}: {exc}")


class _SolverProcess:
    """A child process that checks games with the planner expert, killed and restarted on timeout."""

    def __init__(self) -> None:
        import multiprocessing as mp

        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_solver_main, args=(child,), daemon=True, name="gaca-alf-solver")
        self.proc.start()
        child.close()

    def solve(self, game_file: str, timeout: float) -> list[str] | None:
        self.conn.send(game_file)
        if not self.conn.poll(timeout):
            logger.warning("planner timed out after %.0fs on %s; candidate rejected", timeout, game_file)
            self.proc.kill()
            self.proc.join()
            _SOLVER.clear()
            return None
        try:
            out = self.conn.recv()
        except (EOFError, ConnectionResetError, OSError) as exc:
            logger.warning("planner process died on %s (%s); candidate rejected", game_file, exc)
            self.proc.join(timeout=5)
            _SOLVER.clear()
            return None
        if isinstance(out, str):
            logger.warning("planner failed on %s: %s", game_file, out)
            return None
        return out


_SOLVER: list[_SolverProcess] = []


_INPROCESS_ENV: list[Any] = []


def _solve_with_timeout(game_file: str, timeout: float) -> list[str] | None:
    import multiprocessing as mp

    if mp.current_process().daemon:
        # A daemonic process (e.g. an EnvPool worker) may not start children: plan in this process,
        # without the timeout guard.
        if not _INPROCESS_ENV:
            logger.warning("generating ALFWorld games inside a daemonic process: the planner runs without a timeout")
            _INPROCESS_ENV.append(make_tw_env(expert=True))
        try:
            return solve(game_file, _INPROCESS_ENV[0])
        except Exception as exc:  # an engine error: the candidate is rejected
            logger.warning("planner failed on %s: %s: %s", game_file, type(exc).__name__, exc)
            return None
    if not _SOLVER or not _SOLVER[0].proc.is_alive():
        _SOLVER[:] = [_SolverProcess()]
    return _SOLVER[0].solve(game_file, timeout)


def _check_with_planner(game_file: str, gamedata: dict[str, Any]) -> list[str] | None:
    return _solve_with_timeout(game_file, SOLVE_TIMEOUT_S)


def solve_native(gamedata: dict[str, Any]) -> list[str] | None:
    """The native task expert's plan for a game (the JSON of its ``game.tw-pddl``) if replaying it on
    the native engine wins, else None."""
    from gaca.envs.alfworld.native import FastState, UnsupportedGame, build_game, expert_plan

    try:
        game = build_game(gamedata)
    except UnsupportedGame as exc:
        logger.warning("native checker cannot read a candidate: %s", exc)
        return None
    plan = expert_plan(FastState(game))
    state = FastState(game)  # replayed from the start: the plan must be admissible step by step
    for command in plan:
        if command not in state.admissible():
            return None
        state.step(command)
    return plan if plan and state.won else None


def _check_natively(game_file: str, gamedata: dict[str, Any]) -> list[str] | None:
    return solve_native(gamedata)


#: ``GenConfig.checker`` -> ``(game_file, gamedata) -> winning plan or None``.
CHECKERS: dict[str, Callable[[str, dict[str, Any]], list[str] | None]] = {
    "planner": _check_with_planner,
    "native": _check_natively,
}


__all__ = [
    "CHECKERS",
    "GeneratedGames",
    "TaskSpec",
    "World",
    "build_world",
    "close_tw_env",
    "combo_split",
    "default_cache_dir",
    "game_logic",
    "games_root",
    "generate_game",
    "generate_games",
    "goal_pddl",
    "load_game",
    "make_tw_env",
    "mangle",
    "problem_pddl",
    "sample_task",
    "solve",
    "solve_native",
    "task_text",
]
