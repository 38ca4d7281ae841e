"""ALFRED floor plans as bundled with the ``alfworld`` wheel: receptacles, object types, poses.

The wheel ships, for each of the 120 AI2-THOR floor plans ALFRED uses, three files under
``alfworld/gen/layouts/``: ``FloorPlanN-objects.json`` (the object classes present in the scene),
``FloorPlanN-openable.json`` (ALFRED receptacle ids such as ``Cabinet|+00.02|+02.01|+01.31`` with
the agent pose ``[x, z, rotation, horizon]`` from which each is used) and ``FloorPlanN-layout.npy``
(the navigable floor points, metres). A :class:`Scene` collects what the game generator needs.

Receptacle classes listed in ``objects.json`` but missing from ``openable.json`` (coffee machines,
stove burners, toasters, ...) get synthesized ALFRED-style ids and a pose on a navigable point,
drawn from a seeded generator (so the same scene seed gives the same receptacles).
"""

from __future__ import annotations

import functools
import json
import os
import random
from dataclasses import dataclass
from typing import Literal

import alfworld.gen.constants as alfred
import numpy as np

RoomType = Literal["Kitchen", "LivingRoom", "Bedroom", "Bathroom"]

#: Receptacle classes that stay put (ALFWorld's TextWorld games do not support movable receptacles;
#: bowls, mugs, pans, ... are ordinary objects there).
STATIC_RECEPTACLES: frozenset[str] = frozenset(
    r for r in alfred.RECEPTACLES if r not in alfred.MOVABLE_RECEPTACLES_SET and r in alfred.VAL_RECEPTACLE_OBJECTS
)
#: Object classes that may lie in some receptacle (and can be picked up), ALFRED's own table.
PICKUPABLE: frozenset[str] = frozenset(
    o
    for contents in alfred.VAL_RECEPTACLE_OBJECTS.values()
    for o in contents
    if o in alfred.OBJECTS and not o.endswith("Sliced") and o not in STATIC_RECEPTACLES
)
LAMPS: tuple[str, ...] = ("DeskLamp", "FloorLamp")
#: Receptacle classes a lamp may stand on (ALFRED's scenes place desk lamps on these).
LAMP_HOLDERS: tuple[str, ...] = ("Desk", "SideTable", "Dresser", "DiningTable", "CoffeeTable", "Shelf", "TVStand")
#: Receptacle class ids in ``openable.json`` that ALFRED names by their basin.
_BASINS = {"Sink": "SinkBasin", "Bathtub": "BathtubBasin"}
_STEP = alfred.AGENT_STEP_SIZE  # 0.25 m grid of AI2-THOR poses


@dataclass(frozen=True)
class Receptacle:
    """One static receptacle of a floor plan."""

    id: str
    """ALFRED object id, e.g. ``Cabinet|+00.02|+02.01|+01.31`` or ``Sink|-01.99|+01.14|-00.98|SinkBasin``."""
    rtype: str
    """Receptacle class (``Cabinet``, ``SinkBasin``, ...)."""
    pose: tuple[int, int, int, int]
    """Agent pose in grid units ``(x / 0.25, z / 0.25, rotation, horizon)``: ALFRED's ``loc|x|z|r|h``."""

    @property
    def openable(self) -> bool:
        """Whether the receptacle opens and closes (fridges, cabinets, drawers, ...)."""
        return self.rtype in alfred.OPENABLE_CLASS_SET


@dataclass(frozen=True)
class Scene:
    """What a generated game may use from one ALFRED floor plan."""

    num: int
    """Floor plan number (``FloorPlan<num>``)."""
    room: RoomType
    receptacles: tuple[Receptacle, ...]
    object_types: tuple[str, ...]
    """Pickupable object classes present in the scene (sorted)."""
    lamps: tuple[str, ...]
    """Lamp classes present in the scene (``DeskLamp``/``FloorLamp``)."""
    points: tuple[tuple[float, float], ...]
    """Navigable floor points (x, z) in metres."""

    @property
    def receptacle_types(self) -> tuple[str, ...]:
        """Receptacle classes present (sorted, unique)."""
        return tuple(sorted({r.rtype for r in self.receptacles}))

    @property
    def name(self) -> str:
        """``FloorPlan<num>``."""
        return f"FloorPlan{self.num}"


def layouts_dir() -> str:
    """Directory of the floor-plan files bundled with alfworld."""
    return os.path.join(os.path.dirname(alfred.__file__), "layouts")


def room_of(num: int) -> RoomType:
    """ALFRED's numbering: 1-30 kitchens, 201-230 living rooms, 301-330 bedrooms, 401-430 bathrooms."""
    if num < 100:
        return "Kitchen"
    return {2: "LivingRoom", 3: "Bedroom", 4: "Bathroom"}[num // 100]


@functools.lru_cache(maxsize=1)
def scene_numbers() -> tuple[int, ...]:
    """All floor plans with the three layout files, sorted."""
    names = os.listdir(layouts_dir())
    nums = set()
    for n in names:
        if n.startswith("FloorPlan") and n.endswith("-objects.json"):
            num = int(n[len("FloorPlan") : -len("-objects.json")])
            if all(f"FloorPlan{num}-{kind}" in names for kind in ("openable.json", "layout.npy")):
                nums.add(num)
    return tuple(sorted(nums))


def _fmt(v: float) -> str:
    """ALFRED's coordinate format: sign, two integer digits, two decimals (``+01.25``)."""
    return f"{v:+06.2f}"


@functools.cache
def load_scene(num: int) -> Scene:
    """Read floor plan ``num`` from the bundled layouts (deterministic; cached per process)."""
    base = os.path.join(layouts_dir(), f"FloorPlan{num}")
    with open(f"{base}-objects.json") as f:
        classes = set(json.load(f))
    with open(f"{base}-openable.json") as f:
        openable = json.load(f)
    points = tuple((float(x), float(z)) for x, z in np.load(f"{base}-layout.npy").tolist())

    receptacles: list[Receptacle] = []
    for rid, (x, z, rot, hor) in sorted(openable.items()):
        cls = rid.split("|", 1)[0]
        rtype = _BASINS.get(cls, cls)
        if rtype not in STATIC_RECEPTACLES:
            continue
        full_id = f"{rid}|{rtype}" if cls in _BASINS else rid
        pose = (round(x / _STEP), round(z / _STEP), int(rot) % 360, int(hor))
        receptacles.append(Receptacle(full_id, rtype, pose))

    # Receptacle classes of the scene without a recorded pose: synthesize one instance each
    # (stove burners: four, as in ALFRED's kitchens), on navigable points, from a per-scene seed.
    rng = random.Random(f"gaca-scene-{num}")
    present = {r.rtype for r in receptacles}
    for cls in sorted(classes):
        rtype = _BASINS.get(cls, cls)
        if rtype in present or rtype not in STATIC_RECEPTACLES:
            continue
        if cls in _BASINS and rtype in classes:
            continue  # listed both as "Sink" and "SinkBasin": handled under the basin name
        count = 4 if rtype == "StoveBurner" else 1
        for _ in range(count):
            px, pz = rng.choice(points)
            y = rng.uniform(0.0, 1.5)
            rid = f"{rtype}|{_fmt(px + rng.uniform(-0.5, 0.5))}|{_fmt(y)}|{_fmt(pz + rng.uniform(-0.5, 0.5))}"
            if rtype == "SinkBasin":
                rid = f"Sink|{rid.split('|', 1)[1]}|SinkBasin"
            pose = (round(px / _STEP), round(pz / _STEP), rng.choice((0, 90, 180, 270)), 30)
            receptacles.append(Receptacle(rid, rtype, pose))
        present.add(rtype)

    return Scene(
        num=num,
        room=room_of(num),
        receptacles=tuple(receptacles),
        object_types=tuple(sorted(c for c in classes if c in PICKUPABLE)),
        lamps=tuple(sorted(c for c in classes if c in LAMPS)),
        points=points,
    )


def can_contain(rtype: str, otype: str) -> bool:
    """ALFRED's receptacle compatibility table (``VAL_RECEPTACLE_OBJECTS``)."""
    return otype in alfred.VAL_RECEPTACLE_OBJECTS.get(rtype, ())


__all__ = [
    "LAMPS",
    "LAMP_HOLDERS",
    "PICKUPABLE",
    "STATIC_RECEPTACLES",
    "Receptacle",
    "Scene",
    "can_contain",
    "layouts_dir",
    "load_scene",
    "room_of",
    "scene_numbers",
]
