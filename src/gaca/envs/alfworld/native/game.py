"""Per-game precomputation for the fast engine: names, receptacles, objects, static facts, goal.

A :class:`FastGame` is built once from a ``game.tw-pddl`` file (the JSON that TextWorld's
``PddlEnv.load`` reads) and shared by every episode and every environment that plays it
(:func:`load_game` caches by path). What it reproduces of the real engine:

* **Names.** TextWorld names entities after every argument of the initial facts; alfworld's
  ``Demangler`` (``shuffle=False``) numbers the instances of each class over the *sorted* ids and
  hands out the numbers from the top (the first id in sort order gets the highest number).
* **Static facts** (never changed by any operator of ``alfred.pddl``): receptacle locations and
  types, object types, ``canContain``, ``openable``, ``pickupable``, ``cleanable``/``heatable``/
  ``coolable``/``sliceable``/``toggleable``, ``isReceptacleObject``.
* **Text.** The goal line comes from the game's own grammar (its ``task`` rule). The game's domain
  and the rest of its grammar must be alfworld's bundled ``alfred.pddl``/``alfred.twl2``: the
  engine hard-codes that grammar's rules (``engine``), and refuses other games.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from gaca.envs.alfworld.native.pddl import Goal, parse_problem

logger = logging.getLogger(__name__)

#: Predicates that operators of alfred.pddl change (everything else in a problem is static).
DYNAMIC_PREDICATES = frozenset({
    "atlocation", "objectatlocation", "inreceptacle", "opened", "holds", "holdsany", "checked",
    "isclean", "ishot", "iscool", "ison", "istoggled", "issliced",
})
#: Object properties kept as per-object flags.
_FLAGS = ("pickupable", "cleanable", "heatable", "coolable", "sliceable", "toggleable", "isreceptacleobject")
_KNIFE_TYPES = ("knifetype", "butterknifetype")


class UnsupportedGame(ValueError):
    """The game uses a domain or grammar the fast engine does not implement (play it on the real one)."""


def demangle_names(ids: list[str]) -> dict[str, str]:
    """alfworld's ``Demangler(shuffle=False)`` names: ``{id: "apple 2"}`` (``"agent1 "`` for unnumbered ids)."""
    ids = sorted(ids)
    count: Counter[str] = Counter()
    for i in ids:
        parts = i.split("_bar_", 1)
        if len(parts) > 1:
            name = parts[0] + ("basin" if "basin" in i else "")
            count[name] += 1
    numbers = {name: list(range(1, c + 1)) for name, c in count.items()}
    out: dict[str, str] = {}
    for i in ids:
        text = (i.replace("_bar_", "|").replace("_minus_", "-").replace("_plus_", "+")
                .replace("_dot_", ".").replace("_comma_", ","))
        parts = text.split("|", 1)
        if len(parts) == 1:
            out[i] = f"{text} "
        else:
            name = parts[0] + ("basin" if "basin" in i else "")
            out[i] = f"{name} {numbers[name].pop()}"
    return out


@dataclass
class FastGame:
    """Everything about one game that does not change while it is played."""

    path: str | None
    task_line: str
    """``Your task is to: ...`` as the grammar's ``task`` rule writes it."""
    names: dict[str, str]
    """entity id -> display name (``"countertop 1"``)."""
    objects: dict[str, str]
    """PDDL object -> PDDL type (``agent``, ``object``, ``receptacle``, ``location``, ...)."""
    agent: str
    receptacles: tuple[str, ...]
    """Receptacle ids, sorted (TextWorld lists them in sorted-fact order)."""
    rec_locs: dict[str, tuple[str, ...]]
    """receptacle -> its locations (sorted)."""
    loc_recs: dict[str, tuple[str, ...]]
    """location -> receptacles there (sorted)."""
    rec_type: dict[str, frozenset[str]]
    obj_type: dict[str, frozenset[str]]
    can_contain: frozenset[tuple[str, str]]
    """(rtype, otype) pairs."""
    openable: frozenset[str]
    flags: dict[str, frozenset[str]]
    """flag predicate -> objects that have it (see ``_FLAGS``)."""
    knives: frozenset[str]
    """Objects of a knife type (SliceObject's tool)."""
    static_facts: dict[str, frozenset[tuple[str, ...]]]
    """Every static predicate -> its argument tuples (for the goal)."""
    init_dynamic: list[tuple[str, tuple[str, ...]]]
    """Initial atoms of the dynamic predicates."""
    inrecobj: dict[str, tuple[str, ...]]
    """object -> objects inside it (``inReceptacleObject``, static in alfred.pddl), sorted."""
    goal: Goal
    walkthrough: tuple[str, ...] = ()
    goto_cmds: dict[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)
    """location -> ("go to X", receptacle) for every receptacle not at that location."""

    @property
    def intro_prefix(self) -> str:
        """The banner the ``intro`` rule starts with."""
        return "-= Welcome to TextWorld, ALFRED! =-\n\n"


def _bundled(path_attr: str) -> str | None:
    try:
        import alfworld.info as info
    except ImportError:  # pragma: no cover - alfworld is installed wherever games are generated
        return None
    with open(getattr(info, path_attr)) as f:
        return f.read()


_TASK_RE = re.compile(r'"task"\s*:\s*\[\s*\{\s*"rhs"\s*:\s*"((?:[^"\\]|\\.)*)"\s*\}\s*\]')


def _task_line(grammar: str) -> str:
    m = _TASK_RE.search(grammar)
    if not m:
        raise UnsupportedGame("grammar has no simple 'task' rule")
    return json.loads(f'"{m.group(1)}"')


def _check_logic(data: dict[str, Any], task_line: str) -> None:
    domain = _bundled("ALFRED_PDDL_PATH")
    grammar = _bundled("ALFRED_TWL2_PATH")
    if domain is None or grammar is None:
        logger.warning("alfworld not importable: cannot check that the game uses the bundled domain/grammar")
        return
    if data["pddl_domain"] != domain:
        raise UnsupportedGame("the game's PDDL domain is not alfworld's bundled alfred.pddl")
    goal = task_line[len("Your task is to: "):].rstrip(".") if task_line.startswith("Your task is to: ") else None
    if goal is None or data["grammar"] != grammar.replace("UNKNOWN GOAL", goal):
        raise UnsupportedGame("the game's grammar is not alfworld's bundled alfred.twl2 with a goal filled in")


def build_game(data: dict[str, Any], path: str | None = None, check: bool = True) -> FastGame:
    """Precompute a :class:`FastGame` from the JSON of a ``game.tw-pddl`` file."""
    task_line = _task_line(data["grammar"])
    if check:
        _check_logic(data, task_line)
    prob = parse_problem(data["pddl_problem"])
    agents = [o for o, t in prob.objects.items() if t == "agent"]
    if len(agents) != 1:
        raise UnsupportedGame(f"expected one agent, got {agents}")
    agent = agents[0]

    entities: set[str] = set()
    static: dict[str, set[tuple[str, ...]]] = {}
    dynamic: list[tuple[str, tuple[str, ...]]] = []
    for pred, args in prob.init:
        entities.update(args)
        if pred in DYNAMIC_PREDICATES:
            dynamic.append((pred, args))
        else:
            static.setdefault(pred, set()).add(args)
    names = demangle_names(sorted(entities))

    def unary(pred: str) -> frozenset[str]:
        return frozenset(a[0] for a in static.get(pred, ()))

    rec_locs: dict[str, list[str]] = {}
    loc_recs: dict[str, list[str]] = {}
    for r, loc in static.get("receptacleatlocation", ()):
        rec_locs.setdefault(r, []).append(loc)
        loc_recs.setdefault(loc, []).append(r)
    receptacles = tuple(sorted(r for r, t in prob.objects.items() if t == "receptacle"))
    rec_type: dict[str, set[str]] = {}
    for r, t in static.get("receptacletype", ()):
        rec_type.setdefault(r, set()).add(t)
    obj_type: dict[str, set[str]] = {}
    for o, t in static.get("objecttype", ()):
        obj_type.setdefault(o, set()).add(t)
    inrecobj: dict[str, list[str]] = {}
    for inner, outer in static.get("inreceptacleobject", ()):
        inrecobj.setdefault(outer, []).append(inner)
    knives = frozenset(o for o, ts in obj_type.items() if ts & set(_KNIFE_TYPES))

    game = FastGame(
        path=path,
        task_line=task_line,
        names=names,
        objects=dict(prob.objects),
        agent=agent,
        receptacles=receptacles,
        rec_locs={r: tuple(sorted(v)) for r, v in rec_locs.items()},
        loc_recs={loc: tuple(sorted(v)) for loc, v in loc_recs.items()},
        rec_type={r: frozenset(v) for r, v in rec_type.items()},
        obj_type={o: frozenset(v) for o, v in obj_type.items()},
        can_contain=frozenset(static.get("cancontain", ())),  # type: ignore[arg-type]
        openable=unary("openable"),
        flags={f: unary(f) for f in _FLAGS},
        knives=knives,
        static_facts={p: frozenset(v) for p, v in static.items()},
        init_dynamic=dynamic,
        inrecobj={o: tuple(sorted(v)) for o, v in inrecobj.items()},
        goal=Goal(prob.goal, prob.objects, static=frozenset(static)),
        walkthrough=tuple(data.get("walkthrough") or ()),
    )
    # "go to X" from each location the agent can be at: every (receptacle, location) pair whose
    # location differs (GotoLocation to the current location has no effect and is pruned).
    locations = [o for o, t in prob.objects.items() if t == "location"]
    pairs = sorted(static.get("receptacleatlocation", ()))
    for loc in locations:
        game.goto_cmds[loc] = tuple(("go to " + names[r], r) for r, lend in pairs if lend != loc)
    return game


@functools.lru_cache(maxsize=512)
def _load_cached(path: str, mtime: float, check: bool) -> FastGame:
    with open(path) as f:
        data = json.load(f)
    return build_game(data, path=path, check=check)


def load_game(path: str, check: bool = True) -> FastGame:
    """The :class:`FastGame` of a ``game.tw-pddl`` file (cached per path and modification time)."""
    return _load_cached(os.path.abspath(path), os.path.getmtime(path), check)


__all__ = ["DYNAMIC_PREDICATES", "FastGame", "UnsupportedGame", "build_game", "demangle_names", "load_game"]
