"""Differential tests: the fast engine against alfworld's real TextWorld engine, step for step.

Every step of every episode must agree on the observation text, the admissible actions (same
order, ``help`` included), reward, terminated, truncated, ``won`` and ``valid``. Episodes:

* the game's stored expert plan (alfworld's planner) and the fast engine's native expert plan;
* random admissible-action walks of 30 steps (with ``help`` and invalid commands mixed in);
* "busy" walks that weigh opening, taking, moving, heating, cleaning, cooling, slicing and using up;
* "tours" that carry objects to the appliances, treat them and examine the result;
* the native expert re-planning after random detours;
* mutated games that generated games never produce (two receptacles at one location, a receptacle
  open from the start, the agent starting at a receptacle), which exercise the multi-receptacle
  ``look`` text ("You are facing the a, and b. Next to it, you see ...").

Default suite: the 6 + 6 games of the shared ``alf_cache`` fixture (one per family and split).
Slow suite (``-m slow``): ``GACA_FAST_DIFF_GAMES`` games per split (default 30, i.e. 60 games,
10 per family), the expert plan, the native plan and 5 random walks each, plus 2 busy walks, 2
tours, a detour-then-expert episode and the mutated games.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re

import pytest

pytest.importorskip("alfworld")
pytest.importorskip("textworld")
pytest.importorskip("fast_downward")

from gaca.envs import AlfworldConfig, make_env
from gaca.envs.alfworld import TASK_TYPES, AlfworldEnv, GeneratedGames
from gaca.envs.alfworld.native import FastState, load_game
from gaca.envs.alfworld.native import expert_plan as native_plan
from gaca.testing.alfworld_differential import (
    busy_policy,
    compare_episode,
    engine_pair,
    plan_policy,
    random_policy,
    tour_policy,
)

#: Games per split in the default suite (the ``alf_cache`` fixture generates this many per split).
N_FAST = 6
SLOW_GAMES = int(os.environ.get("GACA_FAST_DIFF_GAMES", "30"))


def _pair(split: str, num_games: int, cache: str) -> tuple[AlfworldEnv, AlfworldEnv]:
    """The TextWorld engine (the reference) and the native one on the same games."""
    return engine_pair(GeneratedGames(split, num_games, 0, None, cache), hide_actions=())


def _check(real, fast, seed, policy, max_steps=30) -> None:
    mismatches = compare_episode(real, fast, seed, policy, max_steps=max_steps)
    assert not mismatches, "\n".join(str(m) for m in mismatches[:3])


def _episodes(real, num_games: int, walks: int, busy: int, native: bool, tours: int = 0):
    for g in range(num_games):
        rec = real.game(g)
        yield g, "expert", plan_policy(rec.expert_plan), 50
        if native:
            yield g, "native", plan_policy(native_plan(FastState(load_game(rec.game_file)))), 50
        for w in range(walks):
            yield g, f"walk{w}", random_policy(1000 * g + w), 30
        for w in range(busy):
            yield g, f"busy{w}", busy_policy(1000 * g + w), 30
        for w in range(tours):
            yield g, f"tour{w}", tour_policy(1000 * g + w), 40


@pytest.mark.parametrize("split", ["train", "eval"])
def test_fast_matches_real(alf_cache, split):
    real, fast = _pair(split, N_FAST, alf_cache)
    try:
        for g, _name, policy, steps in _episodes(real, N_FAST, walks=0, busy=1, native=split == "train",
                                                 tours=int(split == "train")):
            _check(real, fast, g, policy, steps)
    finally:
        real.close()


def test_expert_plans_win_on_both(alf_cache):
    real, fast = _pair("train", N_FAST, alf_cache)
    try:
        for g in range(N_FAST):
            rec = real.game(g)
            assert rec.task_type == TASK_TYPES[g % 6]
            for plan in (list(rec.expert_plan), native_plan(FastState(load_game(rec.game_file)))):
                fast.reset(seed=g)
                for a in plan:
                    _, reward, term, _, info = fast.step(a)
                    assert info["valid"], (g, a)
                assert term and reward == 10.0 and info["won"]
    finally:
        real.close()


def detour_then_expert(fast: AlfworldEnv, seed: int, detour: int):
    """``detour`` random admissible actions, then the fast env's expert (re-planned every step)."""
    walk = random_policy(seed, invalid_prob=0.0, help_prob=0.0)

    def act(t, obs, info):
        if t <= detour:
            return walk(t, obs, info)
        plan = fast.engine.expert_plan()
        return plan[0] if plan else "look"
    return act


def test_native_expert_recovers_from_detours_on_real(alf_cache):
    real, fast = _pair("train", N_FAST, alf_cache)
    try:
        for g in range(N_FAST):
            log: list[dict] = []
            _check_logged(real, fast, g, detour_then_expert(fast, g, detour=6), log)
            assert log[-1]["won"] and log[-1]["reward"] == 10.0, g
    finally:
        real.close()


@pytest.mark.parametrize("split", ["train", "eval"])
def test_native_expert_wins_after_random_detours(alf_cache, split):
    """Fast engine only: from 10 random detours (0-25 steps) per game, the re-planned expert wins."""
    import random

    fast = make_env("alfworld", split=split, num_games=N_FAST, cache_dir=alf_cache, expert=True, max_steps=80)
    for g in range(N_FAST):
        for d in range(10):
            rng = random.Random(f"{split}|{g}|{d}")
            _, info = fast.reset(seed=g)
            detour = rng.randint(0, 25)
            for t in range(80):
                plan = info["expert_plan"]
                a = rng.choice(info["admissible_actions"]) if t < detour else (plan[0] if plan else "look")
                _, reward, term, trunc, info = fast.step(a)
                if term or trunc:
                    break
            assert term and info["won"] and reward == 10.0, (split, g, d, detour)


def _check_logged(real, fast, seed, policy, log, max_steps=50) -> None:
    mismatches = compare_episode(real, fast, seed, policy, max_steps=max_steps, log=log)
    assert not mismatches, "\n".join(str(m) for m in mismatches[:3])


def test_both_engines_play_the_same_game_set(alf_cache):
    def make(engine):
        return make_env("alfworld", split="eval", num_games=N_FAST, cache_dir=alf_cache, expert=True, engine=engine)

    real, fast = make("textworld"), make("native")
    assert make_env("alfworld", cache_dir=alf_cache).engine.__class__.__name__ == "NativeEngine"  # the default
    try:
        for g in range(N_FAST):
            (o1, i1), (o2, i2) = real.reset(seed=g + N_FAST), fast.reset(seed=g + N_FAST)
            assert o1 == o2
            assert i1["admissible_actions"] == i2["admissible_actions"] and "help" not in i2["admissible_actions"]
            for k in ("task", "task_id", "task_type", "won", "valid", "game_file"):
                assert i1[k] == i2[k], k
            # At the start the fast env hands out the stored planner walkthrough: the real expert's plan.
            assert i2["expert_plan"] == list(real.game(g).expert_plan)
    finally:
        real.close()
    with pytest.raises(ValueError, match="official ALFWorld games play on the TextWorld engine"):
        AlfworldConfig(source="official")


# ---------------------------------------------------------------------------------------------
# Mutated games: what generated games never contain
# ---------------------------------------------------------------------------------------------


def mutate_game(record, out_dir: str):
    """Copy a game with receptacle 2 moved to receptacle 1's location, the agent starting there, and
    the first openable receptacle open."""
    with open(record.game_file) as f:
        data = json.load(f)
    p = data["pddl_problem"]
    (_, loc_a), (_, loc_b) = re.findall(r"\(receptacleAtLocation (\S+) (\S+)\)", p)[:2]
    p = p.replace(f" {loc_b})", f" {loc_a})")
    p = re.sub(r"\(atLocation agent1 \S+\)", f"(atLocation agent1 {loc_a})", p)
    openable = re.findall(r"\(openable (\S+)\)", p)
    if openable:
        p = p.replace("(:init\n", f"(:init\n        (opened {openable[0]})\n", 1)
    data["pddl_problem"] = p
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "game.tw-pddl")
    with open(path, "w") as f:
        json.dump(data, f)
    return dataclasses.replace(record, game_file=path)


def shuffle_policy():
    """Take something, move it to another receptacle of the same spot, look (the floor-list rule)."""
    took: list[str] = [""]

    def act(t, obs, info):
        acts = info["admissible_actions"]
        if t % 3 == 1:
            takes = [a for a in acts if a.startswith("take ")]
            if takes:
                took[0] = takes[0].split(" from ")[1]
                return takes[0]
        if t % 3 == 2:
            moves = [a for a in acts if a.startswith("move ") and not a.endswith(" to " + took[0])]
            if moves:
                return moves[0]
        return "look"
    return act


def _mutated_pair(alf_cache, tmp_path, num_games):
    base = GeneratedGames("train", num_games, 0, None, alf_cache)
    records = [mutate_game(base[g], str(tmp_path / f"g{g}")) for g in range(num_games)]
    return engine_pair(records, hide_actions=())


def _run_mutated(real, fast, num_games, busy):
    floor_seen = 0
    for g in range(num_games):
        seen: list[str] = []
        pol = shuffle_policy()

        def logged(t, obs, info, pol=pol, seen=seen):
            seen.append(obs)
            return pol(t, obs, info)

        _check(real, fast, g, logged, max_steps=12)
        floor_seen += any("Next to it, you see a " in o for o in seen)
        for w in range(busy):
            _check(real, fast, g, busy_policy(77 * g + w))
    return floor_seen


def test_mutated_games_match(alf_cache, tmp_path):
    real, fast = _mutated_pair(alf_cache, tmp_path, 3)
    try:
        obs, _ = fast.reset(seed=0)
        assert "You are facing the " in obs and ", and " in obs.split("\n\n")[1]
        _run_mutated(real, fast, 3, busy=1)
    finally:
        real.close()


# ---------------------------------------------------------------------------------------------
# The full set (slow)
# ---------------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("split", ["train", "eval"])
def test_fast_matches_real_full(alf_cache, split):
    real, fast = _pair(split, SLOW_GAMES, alf_cache)
    try:
        families = {real.game(g).task_type for g in range(SLOW_GAMES)}
        assert families == set(TASK_TYPES[: min(6, SLOW_GAMES)])
        for g, _name, policy, steps in _episodes(real, SLOW_GAMES, walks=5, busy=2, native=True, tours=2):
            _check(real, fast, g, policy, steps)
        for g in range(SLOW_GAMES):
            log: list[dict] = []
            _check_logged(real, fast, g, detour_then_expert(fast, g, detour=10), log)
            assert log[-1]["won"], g
    finally:
        real.close()


@pytest.mark.slow
def test_mutated_games_match_full(alf_cache, tmp_path):
    n = min(12, SLOW_GAMES)
    real, fast = _mutated_pair(alf_cache, tmp_path, n)
    try:
        assert _run_mutated(real, fast, n, busy=3) >= 1
    finally:
        real.close()
