"""Unit tests of the fast ALFWorld engine that need no real engine: names, lists, goals, rules.

The expected texts below are written from alfworld's alfred.twl2 grammar by hand (the rule each
one comes from is named); the differential tests (test_alfworld_fast.py) check the same rules
against the real engine on generated games.
"""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gaca.envs.alfworld import AlfworldEnv, NativeEngine
from gaca.envs.alfworld.native import FastState, build_game, demangle_names, display_list
from gaca.envs.alfworld.native.expert import plan as expert_plan
from gaca.envs.alfworld.native.expert import read_goal
from gaca.envs.alfworld.native.pddl import Goal, parse_problem, parse_sexp, typed_list

# A small kitchen in ALFRED's mangled-id style. Locations: l1 countertop, l2 fridge, l3 microwave,
# l4 sink basin, l0 the start (no receptacle).
PROBLEM = """
(define (problem plan_unit)
(:domain alfred)
(:objects
    agent1 - agent
    AppleType - otype
    KnifeType - otype
    MugType - otype
    DeskLampType - otype
    CounterTopType - rtype
    FridgeType - rtype
    MicrowaveType - rtype
    SinkBasinType - rtype
    Apple_bar__plus_00_dot_10 - object
    Apple_bar__minus_00_dot_30 - object
    Knife_bar__plus_00_dot_50 - object
    Mug_bar__plus_01_dot_00 - object
    DeskLamp_bar__plus_00_dot_70 - object
    CounterTop_bar__plus_00_dot_00 - receptacle
    Fridge_bar__plus_01_dot_00 - receptacle
    Microwave_bar__plus_02_dot_00 - receptacle
    Sink_bar__plus_03_dot_00_bar_SinkBasin - receptacle
    loc_bar_0_bar_0_bar_0_bar_30 - location
    loc_bar_1_bar_0_bar_0_bar_30 - location
    loc_bar_2_bar_0_bar_0_bar_30 - location
    loc_bar_3_bar_0_bar_0_bar_30 - location
    loc_bar_4_bar_0_bar_0_bar_30 - location
    )
(:init
    (receptacleType CounterTop_bar__plus_00_dot_00 CounterTopType)
    (receptacleType Fridge_bar__plus_01_dot_00 FridgeType)
    (receptacleType Microwave_bar__plus_02_dot_00 MicrowaveType)
    (receptacleType Sink_bar__plus_03_dot_00_bar_SinkBasin SinkBasinType)
    (objectType Apple_bar__plus_00_dot_10 AppleType)
    (objectType Apple_bar__minus_00_dot_30 AppleType)
    (objectType Knife_bar__plus_00_dot_50 KnifeType)
    (objectType Mug_bar__plus_01_dot_00 MugType)
    (objectType DeskLamp_bar__plus_00_dot_70 DeskLampType)
    (canContain CounterTopType AppleType)
    (canContain CounterTopType KnifeType)
    (canContain CounterTopType MugType)
    (canContain FridgeType AppleType)
    (canContain FridgeType MugType)
    (canContain MicrowaveType AppleType)
    (canContain MicrowaveType MugType)
    (canContain SinkBasinType AppleType)
    (pickupable Apple_bar__plus_00_dot_10)
    (pickupable Apple_bar__minus_00_dot_30)
    (pickupable Knife_bar__plus_00_dot_50)
    (pickupable Mug_bar__plus_01_dot_00)
    (heatable Apple_bar__plus_00_dot_10)
    (coolable Apple_bar__plus_00_dot_10)
    (cleanable Apple_bar__plus_00_dot_10)
    (sliceable Apple_bar__plus_00_dot_10)
    (heatable Apple_bar__minus_00_dot_30)
    (sliceable Apple_bar__minus_00_dot_30)
    (isReceptacleObject Mug_bar__plus_01_dot_00)
    (toggleable DeskLamp_bar__plus_00_dot_70)
    (openable Fridge_bar__plus_01_dot_00)
    (atLocation agent1 loc_bar_0_bar_0_bar_0_bar_30)
    (inReceptacle Apple_bar__plus_00_dot_10 CounterTop_bar__plus_00_dot_00)
    (inReceptacle Apple_bar__minus_00_dot_30 Fridge_bar__plus_01_dot_00)
    (inReceptacle Knife_bar__plus_00_dot_50 CounterTop_bar__plus_00_dot_00)
    (inReceptacle Mug_bar__plus_01_dot_00 Fridge_bar__plus_01_dot_00)
    (inReceptacle DeskLamp_bar__plus_00_dot_70 CounterTop_bar__plus_00_dot_00)
    (receptacleAtLocation CounterTop_bar__plus_00_dot_00 loc_bar_1_bar_0_bar_0_bar_30)
    (receptacleAtLocation Fridge_bar__plus_01_dot_00 loc_bar_2_bar_0_bar_0_bar_30)
    (receptacleAtLocation Microwave_bar__plus_02_dot_00 loc_bar_3_bar_0_bar_0_bar_30)
    (receptacleAtLocation Sink_bar__plus_03_dot_00_bar_SinkBasin loc_bar_4_bar_0_bar_0_bar_30)
    (objectAtLocation Apple_bar__plus_00_dot_10 loc_bar_1_bar_0_bar_0_bar_30)
    (objectAtLocation Apple_bar__minus_00_dot_30 loc_bar_2_bar_0_bar_0_bar_30)
    (objectAtLocation Knife_bar__plus_00_dot_50 loc_bar_1_bar_0_bar_0_bar_30)
    (objectAtLocation Mug_bar__plus_01_dot_00 loc_bar_2_bar_0_bar_0_bar_30)
    (objectAtLocation DeskLamp_bar__plus_00_dot_70 loc_bar_1_bar_0_bar_0_bar_30)
    )
(:goal
    (and
        (exists (?r - receptacle)
            (exists (?o - object)
                (and
                    (heatable ?o)
                    (objectType ?o AppleType)
                    (receptacleType ?r CounterTopType)
                    (isHot ?o)
                    (inReceptacle ?o ?r)
                )
            )
        )
    )
)
)
"""

GRAMMAR = '''grammar :: """
    {
        "task": [
            {
                "rhs": "Your task is to: put a hot apple in countertop."
            }
        ]
    }
""";
'''


@pytest.fixture()
def game():
    return build_game({"pddl_domain": "", "grammar": GRAMMAR, "pddl_problem": PROBLEM}, check=False)


@pytest.fixture()
def state(game):
    return FastState(game)


# ---------------------------------------------------------------------------------------------
# names and lists
# ---------------------------------------------------------------------------------------------


def test_demangle_numbers_from_the_top_of_sorted_ids():
    ids = ["apple_bar__plus_00_dot_10", "apple_bar__minus_00_dot_30", "sink_bar__plus_03_bar_sinkbasin",
           "agent1", "appletype"]
    names = demangle_names(ids)
    # sorted: apple_bar__minus... < apple_bar__plus...; the first gets the highest number (pop()).
    assert names["apple_bar__minus_00_dot_30"] == "apple 2"
    assert names["apple_bar__plus_00_dot_10"] == "apple 1"
    assert names["sink_bar__plus_03_bar_sinkbasin"] == "sinkbasin 1"
    assert names["agent1"] == "agent1 "  # unnumbered ids keep alfworld's trailing space


def test_display_list():
    assert display_list([]) == "nothing"
    assert display_list(["a x"]) == "a x"
    assert display_list(["a x", "a y"]) == "a x, and a y"
    assert display_list(["a x", "a y", "a z"]) == "a x, a y, and a z"


# ---------------------------------------------------------------------------------------------
# PDDL reading and goals
# ---------------------------------------------------------------------------------------------


def test_parse_problem_lowercases_and_types(game):
    prob = parse_problem(PROBLEM)
    assert prob.objects["agent1"] == "agent"
    assert prob.objects["loc_bar_0_bar_0_bar_0_bar_30"] == "location"
    assert ("openable", ("fridge_bar__plus_01_dot_00",)) in prob.init
    assert typed_list(["a", "b", "-", "t", "c"]) == [("a", "t"), ("b", "t"), ("c", "object")]
    assert parse_sexp("(a (b c) ; comment\n d)") == ["a", ["b", "c"], "d"]
    with pytest.raises(ValueError):
        parse_sexp("(a (b)")


def _brute(formula, objects, facts, env=None):
    """Reference goal semantics: enumerate every typed assignment (no joins, no flattening)."""
    env = env or {}
    head = formula[0] if formula else "and"
    if not formula:
        return True
    if head == "and":
        return all(_brute(f, objects, facts, env) for f in formula[1:])
    if head == "or":
        return any(_brute(f, objects, facts, env) for f in formula[1:])
    if head == "not":
        return not _brute(formula[1], objects, facts, env)
    if head == "=":
        return env.get(formula[1], formula[1]) == env.get(formula[2], formula[2])
    if head in ("exists", "forall"):
        vs = typed_list(formula[1])
        doms = [[o for o, t in objects.items() if t == typ] for _, typ in vs]
        results = (_brute(formula[2], objects, facts, {**env, **dict(zip([v for v, _ in vs], combo, strict=True))})
                   for combo in itertools.product(*doms))
        return any(results) if head == "exists" else all(results)
    return tuple(env.get(a, a) for a in formula[1:]) in facts.get(head, set())


GOALS = [
    "(exists (?r - rec ?o - obj) (and (in ?o ?r) (type ?o t1)))",
    "(exists (?r - rec) (exists (?o1 - obj) (and (in ?o1 ?r) (type ?o1 t1)"
    " (exists (?o2 - obj) (and (not (= ?o1 ?o2)) (type ?o2 t1) (in ?o2 ?r))))))",
    "(and (exists (?o - obj) (hot ?o)) (exists (?o - obj) (and (type ?o t2) (not (hot ?o)))))",
    "(forall (?o - obj) (or (not (type ?o t1)) (exists (?r - rec) (in ?o ?r))))",
    "(exists (?o - obj) (and (type ?o t1) (exists (?o - obj) (and (hot ?o) (type ?o t2)))))",
]


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**31 - 1))
def test_goal_matches_brute_force(seed):
    rng = random.Random(seed)
    objs = {f"o{i}": "obj" for i in range(rng.randint(1, 5))}
    objs.update({f"r{i}": "rec" for i in range(rng.randint(1, 3))})
    objs.update({"t1": "otype", "t2": "otype"})
    o_names = [o for o, t in objs.items() if t == "obj"]
    r_names = [r for r, t in objs.items() if t == "rec"]
    facts = {
        "type": {(o, rng.choice(["t1", "t2"])) for o in o_names},
        "in": {(o, r) for o in o_names for r in r_names if rng.random() < 0.4},
        "hot": {(o,) for o in o_names if rng.random() < 0.4},
    }
    for text in GOALS:
        f = parse_sexp(text)
        goal = Goal(f, objs, static=frozenset({"type"}))
        assert goal(lambda p: facts.get(p, set())) == _brute(f, objs, facts), text


# ---------------------------------------------------------------------------------------------
# The rules, on the hand-written kitchen
# ---------------------------------------------------------------------------------------------


def test_intro_and_initial_commands(state):
    # intro = banner, look.feedback (middle of the room: every receptacle, sorted by id), task.
    assert state.intro() == (
        "-= Welcome to TextWorld, ALFRED! =-\n\n"
        "You are in the middle of a room. Looking quickly around you, you see a countertop 1, a fridge 1, "
        "a microwave 1, and a sinkbasin 1.\n\nYour task is to: put a hot apple in countertop.")
    assert state.admissible() == ["go to countertop 1", "go to fridge 1", "go to microwave 1", "go to sinkbasin 1",
                                  "help", "inventory", "look"]
    # look (bound to the agent's receptacle-less location) lists nothing.
    assert state.step("look") == (
        "You are in the middle of a room. Looking quickly around you, you see nothing.", True)


def test_scripted_episode_texts(state):
    s = state
    # apple 2 = apple_bar__minus... (first in sort order), apple 1 = apple_bar__plus...
    assert s.step("go to countertop 1")[0] == (
        "You arrive at countertop 1. On the countertop 1, you see a apple 1, a desklamp 1, and a knife 1.")
    assert "go to countertop 1" not in s.admissible()  # the self-move is pruned
    assert s.admissible() == [
        "examine countertop 1", "go to fridge 1", "go to microwave 1", "go to sinkbasin 1", "help", "inventory",
        "look", "take apple 1 from countertop 1", "take knife 1 from countertop 1", "use desklamp 1"]
    assert s.step("look")[0] == (
        "You are facing the countertop 1. Next to it, you see nothing.")
    assert s.step("use desklamp 1")[0] == "You turn on the desklamp 1."
    assert s.step("use desklamp 1")[0] == "You turn on the desklamp 1."  # isToggled is never undone
    assert s.step("take knife 1 from countertop 1")[0] == "You pick up the knife 1 from the countertop 1."
    assert "take apple 1 from countertop 1" not in s.admissible()  # hands full
    assert "slice apple 1 with knife 1" in s.admissible()
    assert s.step("inventory")[0] == "You are carrying: a knife 1."
    assert s.step("examine knife 1")[0] == "There's nothing special about knife 1."
    assert s.step("slice apple 1 with knife 1")[0] == "You sliced the apple 1 with the knife 1."
    assert s.step("move knife 1 to countertop 1")[0] == "You move the knife 1 to the countertop 1."
    assert s.step("take apple 1 from countertop 1")[0] == "You pick up the apple 1 from the countertop 1."
    assert s.step("examine apple 1")[0] == "This is a sliced apple 1."
    assert s.step("go to fridge 1")[0] == "You arrive at fridge 1. The fridge 1 is closed."
    assert "move apple 1 to fridge 1" not in s.admissible()  # closed
    assert "cool apple 1 with fridge 1" in s.admissible()  # cooling needs no open door
    assert s.step("cool apple 1 with fridge 1")[0] == "You cool the apple 1 using the fridge 1."
    assert s.step("examine apple 1")[0] == "This is a cool sliced apple 1."
    assert s.step("open fridge 1")[0] == (
        "You open the fridge 1. The fridge 1 is open. In it, you see a apple 2, and a mug 1.")
    assert s.step("examine fridge 1")[0] == "The fridge 1 is open. In it, you see a apple 2, and a mug 1."
    assert s.step("go to sinkbasin 1")[0] == "You arrive at sinkbasin 1. On the sinkbasin 1, you see nothing."
    assert s.step("clean apple 1 with sinkbasin 1")[0] == "You clean the apple 1 using the sinkbasin 1."
    assert s.step("examine apple 1")[0] == "This is a cool and clean sliced apple 1."
    assert s.step("go to microwave 1")[0] == "You arrive at microwave 1. On the microwave 1, you see nothing."
    assert s.step("heat apple 1 with microwave 1")[0] == "You heat the apple 1 using the microwave 1."
    assert s.step("examine apple 1")[0] == "This is a hot and clean sliced apple 1."  # heating undoes cool
    assert not s.won
    s.step("go to countertop 1")
    assert s.step("move apple 1 to countertop 1")[0] == "You move the apple 1 to the countertop 1."
    assert s.won


def test_receptacle_object_and_invalid(state):
    s = state
    s.step("go to fridge 1")
    s.step("open fridge 1")
    s.step("take mug 1 from fridge 1")
    assert s.step("examine mug 1")[0] == "This is a normal mug 1. In it, you see nothing."
    before = s.admissible()
    assert s.step("take apple 2 from fridge 1") == ("Nothing happens.", False)  # hands full
    assert s.step("fly away") == ("Nothing happens.", False)
    assert s.admissible() == before
    assert s.step("close fridge 1")[0] == "You close the fridge 1."
    assert s.step("help")[0].startswith("Available commands:\n  look:")


def test_env_contract_and_truncation(game):
    class Rec:
        game_file = "unit"
        task_id = "unit-0"
        task_type = "pick_heat_then_place_in_recep"
        task = "put a hot apple in countertop."

    from gaca.envs import base
    from gaca.envs.alfworld import native as native_mod

    env = AlfworldEnv([Rec()], NativeEngine(), max_steps=3, expert=True)
    orig = native_mod.load_game
    native_mod.load_game = lambda path, check=True: game  # type: ignore[assignment]
    try:
        assert isinstance(env, base.TextEnv)
        obs, info = env.reset(seed=5)
        assert set(base.INFO_KEYS) <= set(info)
        assert "help" not in info["admissible_actions"] and info["valid"]
        assert info["expert_plan"]
        obs, r, term, trunc, info = env.step("jump")
        assert (obs, r, term, trunc, info["valid"]) == ("Nothing happens.", 0.0, False, False, False)
        env.step("look")
        obs, r, term, trunc, info = env.step("look")
        assert trunc and not term and r == 0.0
        with pytest.raises(RuntimeError):
            env.step("look")
        # The expert wins from the start and from a detour.
        for detour in ([], ["go to sinkbasin 1", "go to fridge 1", "open fridge 1"]):
            env = AlfworldEnv([Rec()], NativeEngine(), max_steps=50, expert=True)
            obs, info = env.reset(seed=0)
            for a in detour:
                obs, r, term, trunc, info = env.step(a)
            for _ in range(30):
                obs, r, term, trunc, info = env.step(info["expert_plan"][0])
                if term:
                    break
            assert term and r == 10.0 and info["won"] and info["expert_plan"] == []
    finally:
        native_mod.load_game = orig  # type: ignore[assignment]


def test_expert_reads_goal_and_plans(state):
    goal = read_goal(state.game.goal.formula)
    assert (goal.obj_type, goal.recep_type, goal.prop, goal.count) == ("appletype", "countertoptype", "ishot", 1)
    p = expert_plan(state)
    assert p[-1] == "move apple 1 to countertop 1"
    for a in p:
        assert state.step(a)[1]
    assert state.won


def test_reset_restores_initial_state(state):
    first = (state.intro(), state.admissible())
    for a in ["go to countertop 1", "take apple 1 from countertop 1", "go to fridge 1", "open fridge 1"]:
        state.step(a)
    state.reset()
    assert (state.intro(), state.admissible()) == first
    assert not state.won


def test_copy_is_independent(state):
    state.step("go to fridge 1")
    twin = state.copy()
    assert (twin.intro(), twin.admissible()) == (state.intro(), state.admissible())
    twin.step("open fridge 1")
    twin.step("take mug 1 from fridge 1")
    assert "open fridge 1" in state.admissible() and not state.held and "fridge_bar__plus_01_dot_00" not in state.opened
    assert twin.held and state.inrec != twin.inrec
