"""The fast ALFWorld engine: alfred.pddl's operators and alfred.twl2's text, in plain Python.

What TextWorld's ``PddlEnv`` does on every step, and what this module does instead:

* **Admissible commands.** TextWorld asks fast-downward for the applicable ground operators,
  derives each one's command template through the grammar and returns ``sorted(set(commands))``.
  Here each operator's precondition is a direct test on the state (below), the command strings
  are built from precomputed names, and the list is sorted the same way.
* **Effects.** fast-downward applies the operator; TextWorld mirrors its effect atoms in a fact
  set (a negative effect adds a ``not_`` fact that the grammar can query). Here the same facts are
  kept as sets; the one ``not_`` fact the grammar reads (``not_inreceptacle``) is kept too.
* **Feedback.** TextWorld derives the operator's feedback rule in the context-sensitive grammar,
  taking the first rule whose condition holds and listing query results in sorted-fact order.
  Here each rule of alfred.twl2 is a Python branch in the same order.

Operator preconditions, as fast-downward grounds alfred.pddl (``a`` agent, ``l`` its location):

=========================  ====================================================================
``go to R``                R at a location other than ``l`` (the self-move has no effect and is
                           pruned by the translator)
``open R`` / ``close R``   R at ``l``, openable, closed / open
``examine R``              R at ``l``
``take O from R``          R at ``l``, O in R, O pickupable, hands empty, R open or not openable
``move O to R``            O held, R at ``l``, R open or not openable, canContain(type R, type O)
``examine O``              O held (the other branch of examineObject declares ``?l - location,``
                           with a stray comma, a type with no objects, so it never grounds)
``clean/heat/cool O with   O held and cleanable/heatable/coolable, R at ``l`` of type
R``                        SinkBasin/Microwave/Fridge (no need to open it)
``use O``                  O toggleable, in some receptacle at ``l``
``slice O with K``         O sliceable, objectAtLocation(O, l), K held, K a (butter)knife
``look``, ``inventory``,   always
``help``
=========================  ====================================================================
"""

from __future__ import annotations

from typing import Any

from gaca.envs.alfworld.native.game import FastGame

NOTHING_HAPPENS = "Nothing happens."

#: The help rule's text; its leading newline is eaten by the grammar parser (an end-of-line comment
#: pattern ``^\s*\n``), so TextWorld shows it without.
HELP_TEXT = (
    "Available commands:\n"
    "  look:                             look around your current location\n"
    "  inventory:                        check your current inventory\n"
    "  go to (receptacle):               move to a receptacle\n"
    "  open (receptacle):                open a receptacle\n"
    "  close (receptacle):               close a receptacle\n"
    "  take (object) from (receptacle):  take an object from a receptacle\n"
    "  move (object) to (receptacle):  place an object in or on a receptacle\n"
    "  examine (something):              examine a receptacle or an object\n"
    "  use (object):                     use an object\n"
    "  heat (object) with (receptacle):  heat an object using a receptacle\n"
    "  clean (object) with (receptacle): clean an object using a receptacle\n"
    "  cool (object) with (receptacle):  cool an object using a receptacle\n"
    "  slice (object) with (object):     slice an object using a sharp object\n"
)

# Action kinds (first element of an action tuple).
GOTO, OPEN, CLOSE, TAKE, PUT, EXAMINE_R, EXAMINE_O, CLEAN, HEAT, COOL, USE, SLICE, LOOK, INVENTORY, HELP = range(15)
#: Kinds whose effects can change a goal's truth (the others only add ``checked`` facts).
_CHANGES = {
    GOTO: ("atlocation",), OPEN: ("opened", "checked"), CLOSE: ("opened",),
    TAKE: ("inreceptacle", "holds", "holdsany", "objectatlocation"),
    PUT: ("inreceptacle", "holds", "holdsany", "objectatlocation"),
    CLEAN: ("isclean",), HEAT: ("ishot", "iscool"), COOL: ("iscool", "ishot"), USE: ("ison", "istoggled"),
    SLICE: ("issliced",), EXAMINE_R: ("checked",), EXAMINE_O: ("checked",), LOOK: ("checked",),
    INVENTORY: ("checked",), HELP: ("checked",),
}
_APPLIANCE_TYPE = {CLEAN: "sinkbasintype", HEAT: "microwavetype", COOL: "fridgetype"}
_APPLIANCE_FLAG = {CLEAN: "cleanable", HEAT: "heatable", COOL: "coolable"}
_VERB = {CLEAN: "clean", HEAT: "heat", COOL: "cool"}


def display_list(items: list[str]) -> str:
    """The grammar's list rendering: ``nothing`` / ``x`` / ``x, y, and z``."""
    if not items:
        return "nothing"
    if len(items) == 1:
        return items[0]
    return ", ".join(items[:-1]) + ", and " + items[-1]


class FastState:
    """One episode's mutable state of a :class:`FastGame` (reset to the game's initial facts)."""

    __slots__ = (
        "_actions",
        "checked",
        "game",
        "held",
        "holdsany",
        "inrec",
        "inrec_pairs",
        "isclean",
        "iscool",
        "ishot",
        "ison",
        "issliced",
        "istoggled",
        "loc",
        "not_inrec",
        "objloc",
        "opened",
        "won",
    )

    def __init__(self, game: FastGame) -> None:
        self.game = game
        self.reset()

    # -- state -------------------------------------------------------------------------------

    def reset(self) -> None:
        """Back to the game's initial facts."""
        g = self.game
        self.loc = ""
        self.held: list[str] = []
        self.holdsany = False
        self.inrec: dict[str, list[str]] = {}
        self.inrec_pairs: set[tuple[str, str]] = set()
        self.not_inrec: set[tuple[str, str]] = set()
        self.objloc: dict[str, set[str]] = {}
        self.opened: set[str] = set()
        self.isclean: set[str] = set()
        self.ishot: set[str] = set()
        self.iscool: set[str] = set()
        self.ison: set[str] = set()
        self.istoggled: set[str] = set()
        self.issliced: set[str] = set()
        self.checked: set[str] = set()
        unary = {"opened": self.opened, "isclean": self.isclean, "ishot": self.ishot, "iscool": self.iscool,
                 "ison": self.ison, "istoggled": self.istoggled, "issliced": self.issliced,
                 "checked": self.checked}
        for pred, args in g.init_dynamic:
            if pred == "atlocation":
                if args[0] == g.agent:
                    self.loc = args[1]
            elif pred == "inreceptacle":
                self._add_in(args[0], args[1])
            elif pred == "objectatlocation":
                self.objloc.setdefault(args[1], set()).add(args[0])
            elif pred == "holds":
                if args[1] not in self.held:
                    self.held.append(args[1])
                    self.held.sort()
            elif pred == "holdsany":
                self.holdsany = True
            elif pred in unary:
                unary[pred].add(args[0])
        self._actions: dict[str, tuple[Any, ...]] | None = None
        self.won = self._check_goal()

    def copy(self) -> FastState:
        """An independent copy of this state (the game is shared)."""
        new = FastState.__new__(FastState)
        new.game, new.loc, new.holdsany, new.won = self.game, self.loc, self.holdsany, self.won
        new.held = list(self.held)
        new.inrec = {r: list(os) for r, os in self.inrec.items()}
        new.inrec_pairs = set(self.inrec_pairs)
        new.not_inrec = set(self.not_inrec)
        new.objloc = {loc: set(os) for loc, os in self.objloc.items()}
        for name in ("opened", "isclean", "ishot", "iscool", "ison", "istoggled", "issliced", "checked"):
            setattr(new, name, set(getattr(self, name)))
        new._actions = None
        return new

    def _add_in(self, o: str, r: str) -> None:
        if (o, r) in self.inrec_pairs:
            return
        self.inrec_pairs.add((o, r))
        lst = self.inrec.setdefault(r, [])
        lst.append(o)
        lst.sort()

    def _remove_in(self, o: str, r: str) -> None:
        self.inrec_pairs.discard((o, r))
        lst = self.inrec.get(r)
        if lst and o in lst:
            lst.remove(o)

    def facts(self, pred: str) -> Any:
        """Argument tuples of ``pred`` in the current state (static and dynamic; for the goal)."""
        a = self.game.agent
        if pred == "inreceptacle":
            return self.inrec_pairs
        if pred == "holds":
            return {(a, o) for o in self.held}
        if pred == "atlocation":
            return {(a, self.loc)} if self.loc else set()
        if pred == "objectatlocation":
            return {(o, loc) for loc, os in self.objloc.items() for o in os}
        if pred == "holdsany":
            return {(a,)} if self.holdsany else set()
        unary = getattr(self, pred, None) if pred in ("opened", "isclean", "ishot", "iscool", "ison",
                                                      "istoggled", "issliced", "checked") else None
        if unary is not None:
            return {(x,) for x in unary}
        return self.game.static_facts.get(pred, frozenset())

    def _check_goal(self) -> bool:
        return bool(self.game.goal(self.facts))

    # -- commands ----------------------------------------------------------------------------

    def _open_or_not_openable(self, r: str) -> bool:
        return r not in self.game.openable or r in self.opened

    def actions(self) -> dict[str, tuple[Any, ...]]:
        """Admissible command -> action tuple, in TextWorld's order (sorted commands)."""
        if self._actions is not None:
            return self._actions
        g = self.game
        names = g.names
        loc = self.loc
        here = g.loc_recs.get(loc, ())
        acts: dict[str, tuple[Any, ...]] = {}
        for cmd, r in g.goto_cmds.get(loc, ()):
            if cmd not in acts:
                acts[cmd] = (GOTO, r)
        acts["look"] = (LOOK,)
        acts["inventory"] = (INVENTORY,)
        acts["help"] = (HELP,)
        pickupable = g.flags["pickupable"]
        toggleable = g.flags["toggleable"]
        for r in here:
            rn = names[r]
            acts["examine " + rn] = (EXAMINE_R, r)
            if r in g.openable:
                if r in self.opened:
                    acts["close " + rn] = (CLOSE, r)
                else:
                    acts["open " + rn] = (OPEN, r)
            accessible = self._open_or_not_openable(r)
            for o in self.inrec.get(r, ()):
                if accessible and not self.holdsany and o in pickupable:
                    acts.setdefault(f"take {names[o]} from {rn}", (TAKE, o, r))
                if o in toggleable:
                    acts.setdefault("use " + names[o], (USE, o))
        for o in self.held:
            on = names[o]
            acts["examine " + on] = (EXAMINE_O, o)
            otypes = g.obj_type.get(o, frozenset())
            for r in here:
                rtypes = g.rec_type.get(r, frozenset())
                if self._open_or_not_openable(r) and any((rt, ot) in g.can_contain for rt in rtypes for ot in otypes):
                    acts.setdefault(f"move {on} to {names[r]}", (PUT, o, r))
                for kind in (CLEAN, HEAT, COOL):
                    if o in g.flags[_APPLIANCE_FLAG[kind]] and _APPLIANCE_TYPE[kind] in rtypes:
                        acts.setdefault(f"{_VERB[kind]} {on} with {names[r]}", (kind, o, r))
            if o in g.knives:
                sliceable = g.flags["sliceable"]
                for co in sorted(self.objloc.get(loc, ())):
                    if co in sliceable:
                        acts.setdefault(f"slice {names[co]} with {on}", (SLICE, co, o))
        self._actions = {k: acts[k] for k in sorted(acts)}
        return self._actions

    def admissible(self) -> list[str]:
        """``sorted(set(commands))`` of the applicable operators (``help`` included)."""
        return list(self.actions())

    # -- text --------------------------------------------------------------------------------

    def _items(self, objs: Any) -> list[str]:
        names = self.game.names
        return ["a " + names[o] for o in objs]

    def examine_receptacle(self, r: str) -> str:
        """``examineReceptacle.feedback`` for receptacle ``r``."""
        n = self.game.names[r]
        if r in self.game.openable:
            if r in self.opened:
                return f"The {n} is open. In it, you see {display_list(self._items(self.inrec.get(r, ())))}."
            return f"The {n} is closed."
        return f"On the {n}, you see {display_list(self._items(self.inrec.get(r, ())))}."

    def examine_object(self, o: str) -> str:
        """``examineObject.feedback`` for object ``o``."""
        g = self.game
        n = g.names[o]
        if o in g.flags["isreceptacleobject"]:
            return f"This is a normal {n}. In it, you see {display_list(self._items(g.inrecobj.get(o, ())))}."
        clean, hot, cool, sliced = o in self.isclean, o in self.ishot, o in self.iscool, o in self.issliced
        if sliced:
            if clean and hot:
                return f"This is a hot and clean sliced {n}."
            if clean and cool:
                return f"This is a cool and clean sliced {n}."
            if clean:
                return f"This is a clean sliced {n}."
            if hot:
                return f"This is a hot sliced {n}."
            if cool:
                return f"This is a cool sliced {n}."
        if clean and hot:
            return f"This is a hot and clean {n}."
        if clean and cool:
            return f"This is a cool and clean {n}."
        if hot:
            return f"This is a hot {n}."
        if clean:
            return f"This is a clean {n}."
        if cool:
            return f"This is a cold {n}."
        if o in g.flags["toggleable"] and o in self.istoggled:
            return f"This {n} is on."
        # ("toggleable & not_istoggled": no operator ever negates isToggled, so that fact never exists.)
        if o in g.flags["sliceable"] and sliced:
            return f"This is a sliced {n}."
        return f"There's nothing special about {n}."

    def look(self, bound: bool) -> str:
        """``look.feedback``; ``bound``: the look action's context (its location bound) vs the intro's."""
        g = self.game
        names = g.names
        here = g.loc_recs.get(self.loc, ())
        if here:
            floor = []
            for o in sorted(self.objloc.get(self.loc, ())):
                for r in here:
                    if (o, r) in self.not_inrec:
                        floor.append("a " + names[o])
            return (f"You are facing the {display_list([names[r] for r in here])}. "
                    f"Next to it, you see {display_list(floor)}.")
        if bound:
            appliances: list[str] = []  # receptacles at the agent's (receptacle-less) location
        else:
            appliances = ["a " + names[r] for r in g.receptacles for _ in g.rec_locs.get(r, ())]
        return f"You are in the middle of a room. Looking quickly around you, you see {display_list(appliances)}."

    def intro(self) -> str:
        """The reset text (``#intro#``)."""
        return f"{self.game.intro_prefix}{self.look(bound=False)}\n\n{self.game.task_line}"

    def inventory(self) -> str:
        """``inventory.feedback``."""
        if self.holdsany:
            return f"You are carrying: {display_list(self._items(self.held))}."
        return "You are not carrying anything."

    # -- stepping ----------------------------------------------------------------------------

    def step(self, command: str) -> tuple[str, bool]:
        """Apply ``command``; return (feedback, valid). Invalid commands change nothing."""
        act = self.actions().get(command.strip())
        if act is None:
            return NOTHING_HAPPENS, False
        kind = act[0]
        names = self.game.names
        loc = self.loc
        if kind == GOTO:
            r = act[1]
            self.loc = self._goto_target(r)
            text = f"You arrive at {names[r]}. {self.examine_receptacle(r)}"
        elif kind == OPEN:
            r = act[1]
            self.opened.add(r)
            self.checked.add(r)
            text = f"You open the {names[r]}. {self.examine_receptacle(r)}"
        elif kind == CLOSE:
            r = act[1]
            self.opened.discard(r)
            text = f"You close the {names[r]}."
        elif kind == TAKE:
            o, r = act[1], act[2]
            self._remove_in(o, r)
            self.not_inrec.add((o, r))
            self.held.append(o)
            self.held.sort()
            self.holdsany = True
            at = self.objloc.get(loc)
            if at is not None:
                at.discard(o)
            text = f"You pick up the {names[o]} from the {names[r]}."
        elif kind == PUT:
            o, r = act[1], act[2]
            self._add_in(o, r)
            self.not_inrec.discard((o, r))
            self.objloc.setdefault(loc, set()).add(o)
            self.held.remove(o)
            self.holdsany = False
            text = f"You move the {names[o]} to the {names[r]}."
        elif kind in (CLEAN, HEAT, COOL):
            o, r = act[1], act[2]
            if kind == CLEAN:
                self.isclean.add(o)
            elif kind == HEAT:
                self.ishot.add(o)
                self.iscool.discard(o)
            else:
                self.iscool.add(o)
                self.ishot.discard(o)
            text = f"You {_VERB[kind]} the {names[o]} using the {names[r]}."
        elif kind == USE:
            o = act[1]
            if o in self.ison:
                self.ison.discard(o)
            else:
                self.ison.add(o)
            self.istoggled.add(o)
            if o in self.game.flags["toggleable"] and o in self.istoggled:
                text = f"You turn on the {names[o]}."
            else:  # pragma: no cover - USE is only admissible for toggleable objects
                text = f"You turn off the {names[o]}."
        elif kind == SLICE:
            co, ko = act[1], act[2]
            self.issliced.add(co)
            text = f"You sliced the {names[co]} with the {names[ko]}."
        elif kind == EXAMINE_R:
            self.checked.add(act[1])
            text = self.examine_receptacle(act[1])
        elif kind == EXAMINE_O:
            self.checked.add(act[1])
            text = self.examine_object(act[1])
        elif kind == LOOK:
            self.checked.add(loc)
            text = self.look(bound=True)
        elif kind == INVENTORY:
            self.checked.add(self.game.agent)
            text = self.inventory()
        else:
            self.checked.add(self.game.agent)
            text = HELP_TEXT
        self._actions = None
        if not self.game.goal.predicates.isdisjoint(_CHANGES[kind]):
            self.won = self._check_goal()
        return text, True

    def _goto_target(self, r: str) -> str:
        """The location GotoLocation to ``r`` moves to (the first of ``r``'s other locations)."""
        for lend in self.game.rec_locs.get(r, ()):
            if lend != self.loc:
                return lend
        return self.loc  # pragma: no cover - not admissible


__all__ = ["HELP_TEXT", "NOTHING_HAPPENS", "FastState", "display_list"]
