"""A native task expert for the six ALFWorld families (no planner process).

``plan(state)`` reads the family from the goal formula (target object type, receptacle type,
required property ``isClean``/``isHot``/``isCool``, a lamp to switch on, one or two objects) and
writes a plan by simulating a greedy strategy on a copy of the state: put down a held object the
task does not need, fetch a target object (open
its receptacle if needed), treat it at the appliance, carry it to the goal receptacle; for
look-at-in-light, carry it to the lamp and use the lamp. Every command of the plan was admissible
when simulated and the simulated episode wins; the plan is correct but need not be the shortest
(alfworld's planner expert is optimal; the fast env hands out the game's stored planner
walkthrough while the episode follows it, see ``FastAlfworldEnv.expert_plan``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from gaca.envs.alfworld.native.engine import FastState
from gaca.envs.alfworld.native.pddl import Sexp

logger = logging.getLogger(__name__)

_PROPS = {"isclean": ("clean", "sinkbasintype"), "ishot": ("heat", "microwavetype"), "iscool": ("cool", "fridgetype")}


@dataclass(frozen=True)
class TaskGoal:
    """What the goal formula asks for."""

    obj_type: str
    recep_type: str | None
    prop: str | None
    lamp_type: str | None
    count: int


def read_goal(formula: Sexp) -> TaskGoal:
    """Recognize an ALFWorld goal (goal_library's formulas, any family)."""
    atoms: list[list[str]] = []

    def walk(f: Sexp) -> None:
        if isinstance(f, str) or not f:
            return
        if f[0] in ("and", "or", "not"):
            for sub in f[1:]:
                walk(sub)
        elif f[0] in ("exists", "forall"):
            walk(f[2])
        else:
            atoms.append([str(x) for x in f])

    walk(formula)
    obj_vars: dict[str, str] = {}
    recep_type = lamp_type = prop = None
    toggled = {a[1] for a in atoms if a[0] == "istoggled"}
    for a in atoms:
        if a[0] == "objecttype":
            if a[1] in toggled:
                lamp_type = a[2]
            else:
                obj_vars[a[1]] = a[2]
        elif a[0] == "receptacletype":
            recep_type = a[2]
        elif a[0] in _PROPS:
            prop = a[0]
    if not obj_vars:
        raise ValueError("goal has no target object type")
    types = set(obj_vars.values())
    if len(types) != 1:
        raise ValueError(f"goal with several object types {types}")
    return TaskGoal(types.pop(), None if lamp_type else recep_type, prop, lamp_type, len(obj_vars))


class _Sim:
    def __init__(self, state: FastState) -> None:
        self.s = state.copy()
        self.plan: list[str] = []

    def do(self, cmd: str) -> None:
        _, valid = self.s.step(cmd)
        if not valid:
            raise _Stuck(cmd)
        self.plan.append(cmd)

    def goto(self, r: str) -> None:
        if r not in self.s.game.loc_recs.get(self.s.loc, ()):
            self.do("go to " + self.s.game.names[r])

    def open_if_closed(self, r: str) -> None:
        if r in self.s.game.openable and r not in self.s.opened:
            self.do("open " + self.s.game.names[r])


class _Stuck(Exception):
    pass


def plan(state: FastState, max_len: int = 60) -> list[str]:
    """A winning plan from ``state`` (empty if already won or if no plan was found)."""
    if state.won:
        return []
    try:
        goal = read_goal(state.game.goal.formula)
    except ValueError as e:
        logger.debug("no native expert for this goal: %s", e)
        return []
    sim = _Sim(state)
    try:
        for _ in range(4 * max_len):
            if sim.s.won or len(sim.plan) > max_len:
                break
            _advance(sim, goal)
    except _Stuck as e:
        logger.debug("native expert stuck at %r", e.args[0])
        return []
    return sim.plan if sim.s.won else []


def _has_type(state: FastState, o: str, t: str) -> bool:
    return t in state.game.obj_type.get(o, ())


def _receptacles_of(state: FastState, rtype: str) -> list[str]:
    return [r for r in state.game.receptacles if rtype in state.game.rec_type.get(r, ())]


def _where(state: FastState, o: str) -> list[str]:
    return sorted(r for (x, r) in state.inrec_pairs if x == o)


def _advance(sim: _Sim, goal: TaskGoal) -> None:
    """One greedy move toward the goal (a few commands)."""
    s, g = sim.s, sim.s.game
    names = g.names
    other = [o for o in s.held if not _has_type(s, o, goal.obj_type)]
    if other:
        _drop(sim, other[0])
        return
    if goal.lamp_type is not None:
        held = [o for o in s.held if _has_type(s, o, goal.obj_type)]
        if not held:
            _fetch(sim, goal, exclude=set())
            return
        lamps = [o for o in g.flags["toggleable"] if _has_type(s, o, goal.lamp_type)]
        for lamp in sorted(lamps):
            recs = _where(s, lamp)
            if recs:
                sim.goto(recs[0])
                sim.do("use " + names[lamp])
                return
        raise _Stuck("no lamp")
    assert goal.recep_type is not None
    targets = _receptacles_of(s, goal.recep_type)
    if not targets:
        raise _Stuck("no goal receptacle")

    def good(o: str) -> bool:
        return _has_type(s, o, goal.obj_type) and (goal.prop is None or o in getattr(s, goal.prop))

    # Prefer the goal receptacle that already holds the most finished objects.
    target = max(targets, key=lambda r: sum(good(o) for o in s.inrec.get(r, ())))
    placed = {o for o in s.inrec.get(target, ()) if good(o)}
    if s.held:
        o = s.held[0]
        if goal.prop is not None and o not in getattr(s, goal.prop):
            verb, atype = _PROPS[goal.prop]
            appliance = _receptacles_of(s, atype)
            if not appliance:
                raise _Stuck("no appliance")
            sim.goto(appliance[0])
            sim.do(f"{verb} {names[o]} with {names[appliance[0]]}")
            return
        sim.goto(target)
        sim.open_if_closed(target)
        sim.do(f"move {names[o]} to {names[target]}")
        return
    _fetch(sim, goal, exclude=placed)


def _drop(sim: _Sim, o: str) -> None:
    """Put a held object that the task does not need into a receptacle that takes it (here if possible)."""
    s, g = sim.s, sim.s.game
    otypes = g.obj_type.get(o, frozenset())

    def fits(r: str) -> bool:
        return any((rt, ot) in g.can_contain for rt in g.rec_type.get(r, ()) for ot in otypes)

    here = set(g.loc_recs.get(s.loc, ()))
    options = sorted((r not in here, r in g.openable, r) for r in g.receptacles if fits(r) and g.rec_locs.get(r))
    if not options:
        raise _Stuck(f"nowhere to put {o}")
    r = options[0][2]
    sim.goto(r)
    sim.open_if_closed(r)
    sim.do(f"move {g.names[o]} to {g.names[r]}")


def _fetch(sim: _Sim, goal: TaskGoal, exclude: set[str]) -> None:
    s, names = sim.s, sim.s.game.names
    cands = [(r, o) for (o, r) in sorted(s.inrec_pairs)
             if o not in exclude and _has_type(s, o, goal.obj_type) and o in s.game.flags["pickupable"]]
    if not cands:
        raise _Stuck("no target object left")
    # Objects in receptacles that need no opening first.
    cands.sort(key=lambda ro: (ro[0] in s.game.openable and ro[0] not in s.opened, ro[0], ro[1]))
    r, o = cands[0]
    sim.goto(r)
    sim.open_if_closed(r)
    sim.do(f"take {names[o]} from {names[r]}")


__all__ = ["TaskGoal", "plan", "read_goal"]
