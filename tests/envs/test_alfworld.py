"""ALFWorld offline: generated games on alfworld's real TextWorld engine."""

from __future__ import annotations

import json
import os
import shutil

import pytest

pytest.importorskip("alfworld")
pytest.importorskip("textworld")

from gaca.envs import make_env
from gaca.envs.alfworld import (
    NOTHING_HAPPENS,
    TASK_TYPES,
    AlfworldEnv,
    GenConfig,
    GeneratedGames,
    OfficialGames,
    TextWorldEngine,
    combo_split,
    games_root,
    generate_game,
    speedups,
    unseen_rooms,
)
from gaca.envs.alfworld.generator import _family_scenes
from gaca.envs.alfworld.scenes import load_scene, scene_numbers
from gaca.envs.base import INFO_KEYS, TextEnv
from gaca.envs.episodes import Turn
from gaca.testing.agents import ExpertAgent, RandomAgent, play_episode

N_FAST = 6  # games per split in the session cache (conftest.N_FAST)
GEN_KNOBS = ("max_receptacles", "num_distractors", "closed_prob")


def make(split="train", **kwargs):
    """ALFWorld on the real TextWorld engine (what these tests are about); generator knobs by keyword."""
    gen = {k: kwargs.pop(k) for k in GEN_KNOBS if k in kwargs}
    if gen:
        kwargs["generator"] = GenConfig(**gen)
    return make_env("alfworld", split=split, **{"engine": "textworld", **kwargs})



def test_bundled_floor_plans_parse():
    nums = scene_numbers()
    assert len(nums) == 120
    kitchen = load_scene(1)
    assert kitchen.room == "Kitchen"
    assert {"Fridge", "Microwave", "SinkBasin", "CounterTop"} <= set(kitchen.receptacle_types)
    sink = next(r for r in kitchen.receptacles if r.rtype == "SinkBasin")
    assert sink.id.startswith("Sink|") and sink.id.endswith("|SinkBasin")
    assert "Apple" in kitchen.object_types and "Fridge" not in kitchen.object_types
    assert load_scene(301).lamps == ("DeskLamp",)


def test_protocol_and_info_keys(alf_kwargs):
    env = make_env("alfworld", **alf_kwargs)
    assert isinstance(env, TextEnv)
    obs, info = env.reset(seed=0)
    assert set(INFO_KEYS) <= set(info)
    assert obs.startswith("-= Welcome to TextWorld, ALFRED! =-")
    assert "Your task is to: " + info["task"] in obs
    assert info["valid"] is True and info["won"] is False
    assert info["task_type"] == TASK_TYPES[0]
    assert "help" not in info["admissible_actions"]
    assert all(a.startswith(("go to", "inventory", "look")) for a in info["admissible_actions"])
    assert info["expert_plan"] and info["expert_plan"][0].startswith("go to")
    env.close()


@pytest.mark.parametrize("split", ["train", "eval"])
def test_expert_wins_every_family(alf_cache, split):
    env = make(split, num_games=N_FAST, cache_dir=alf_cache, expert=True)
    families = set()
    for s in range(N_FAST):
        rec = env.game(s)
        ep = play_episode(env, ExpertAgent(), seed=s)
        assert ep["won"] and ep["terminated"] and not ep["truncated"], ep["task_id"]
        assert ep["return"] == 10.0
        assert ep["invalid"] == 0
        assert ep["steps"] == len(rec.expert_plan) <= 30
        families.add(ep["task_type"])
    assert families == set(TASK_TYPES)
    env.close()


def test_splits_share_no_combination_and_unseen_rooms_no_floor_plan(alf_cache):
    combos = {}
    for split in ("train", "eval", "unseen_rooms"):
        env = make(split, num_games=N_FAST, cache_dir=alf_cache)
        combos[split] = {(env.game(s).scene, env.game(s).object_target, env.game(s).parent_target)
                         for s in range(N_FAST)}
        for c in combos[split]:
            assert split == "unseen_rooms" or combo_split(*c) == split
    assert not combos["train"] & combos["eval"]
    held = unseen_rooms(GenConfig().unseen_rooms_per_type)
    assert {c[0] for c in combos["unseen_rooms"]} <= held
    assert not {c[0] for c in combos["train"] | combos["eval"]} & held


def test_every_family_has_unseen_rooms():
    held = unseen_rooms(3)
    assert len(held) >= 12
    for task_type in TASK_TYPES:
        assert held & {s.num for s in _family_scenes(task_type)}, task_type


def test_valid_seen_holds_out_games_not_combinations(tmp_path):
    # valid_seen: the train split's combinations, but games of their own (ALFWorld's valid_seen).
    cache = str(tmp_path)
    for index in (0, 1):
        seen = generate_game(index, "valid_seen", seed=0, cache_dir=cache)
        train = generate_game(index, "train", seed=0, cache_dir=cache)
        assert combo_split(seen.scene, seen.object_target, seen.parent_target) == "train"
        assert "/valid_seen/" in seen.game_file
        assert json.load(open(seen.game_file))["pddl_problem"] != json.load(open(train.game_file))["pddl_problem"]
        assert seen.task_type == train.task_type == TASK_TYPES[index]


def test_generation_is_deterministic(tmp_path):
    a = generate_game(1, "train", seed=5, cache_dir=str(tmp_path / "a"))
    b = generate_game(1, "train", seed=5, cache_dir=str(tmp_path / "b"))
    c = generate_game(1, "train", seed=6, cache_dir=str(tmp_path / "a"))
    ga, gb, gc = (json.load(open(r.game_file)) for r in (a, b, c))
    assert ga == gb
    assert a.expert_plan == b.expert_plan and a.task == b.task
    assert ga["pddl_problem"] != gc["pddl_problem"]
    # Cached: a second call reads the record instead of regenerating.
    again = generate_game(1, "train", seed=5, cache_dir=str(tmp_path / "a"))
    assert again == a


def test_same_seed_same_game_and_observations(alf_kwargs):
    e1, e2 = make(**alf_kwargs), make(**alf_kwargs)
    o1, i1 = e1.reset(seed=2)
    o2, i2 = e2.reset(seed=2 + N_FAST)  # seed s and s + num_games: the same game
    assert o1 == o2 and i1["task_id"] == i2["task_id"]
    agent_a, agent_b = RandomAgent(7), RandomAgent(7)
    for t in range(10):
        a = agent_a.choose(Turn(0, 2, t, o1, i1, ()))
        assert a == agent_b.choose(Turn(0, 2, t, o2, i2, ()))
        o1, r1, t1, u1, i1 = e1.step(a)
        o2, r2, t2, u2, i2 = e2.step(a)
        assert (o1, r1, t1, u1, i1["admissible_actions"]) == (o2, r2, t2, u2, i2["admissible_actions"])
        if t1 or u1:
            break
    o3, _ = e1.reset(seed=3)
    assert o3 != e2.reset(seed=2)[0]
    e1.close(), e2.close()


def test_inadmissible_action_nothing_happens(alf_kwargs):
    env = make(**alf_kwargs)
    obs, info = env.reset(seed=0)
    before = info["admissible_actions"]
    obs, reward, term, trunc, info = env.step("fly to the moon")
    assert obs == NOTHING_HAPPENS
    assert info["valid"] is False and reward == 0.0 and not term and not trunc
    assert info["admissible_actions"] == before
    obs, _, _, _, info = env.step(before[0])
    assert info["valid"] is True and obs.startswith("You arrive at")
    env.close()


def test_truncation_at_max_steps(alf_cache):
    env = make("train", num_games=N_FAST, cache_dir=alf_cache, max_steps=3)
    env.reset(seed=0)
    outs = [env.step("look") for _ in range(3)]
    assert [o[3] for o in outs] == [False, False, True]
    assert not any(o[2] for o in outs)
    with pytest.raises(RuntimeError):
        env.step("look")
    env.close()


def test_official_layout_adapter(alf_cache, monkeypatch):
    root = games_root(alf_cache, GenConfig())
    assert os.path.isdir(os.path.join(root, "json_2.1.1", "train"))
    games = OfficialGames("train", data_dir=root)
    assert len(games) >= N_FAST
    # A movable-receptacle trial (unsupported in ALFWorld's TextWorld games) is skipped.
    src = os.path.dirname(games[0].game_file)
    dst = os.path.join(root, "json_2.1.1", "train", "pick_and_place_with_movable_recep-X-Y-Z-1", "trial_x")
    shutil.copytree(src, dst)
    try:
        assert len(OfficialGames("train", data_dir=root)) == len(games)
        monkeypatch.setenv("ALFWORLD_DATA", root)
        env = make("train", source="official", num_games=len(games), expert=True)
        assert env.num_games == len(games)
        ep = play_episode(env, ExpertAgent(), seed=0)
        assert ep["won"] and ep["task_type"] in TASK_TYPES and ep["task"]
        env.close()
    finally:
        shutil.rmtree(os.path.dirname(dst))
    with pytest.raises(FileNotFoundError):
        OfficialGames("valid_seen", data_dir=root)


def test_speedups_do_not_change_transcripts(alf_cache):
    def transcript():
        games = GeneratedGames("train", N_FAST, 0, None, alf_cache)
        env = AlfworldEnv(games, TextWorldEngine(memoize=speedups.installed()))
        agent = RandomAgent(3)
        out = []
        for s in (1, 5):
            ep = play_episode(env, agent, seed=s, max_steps=8)
            out.append((ep["actions"], ep["observations"]))
        env.close()
        return out

    speedups.install()
    fast = transcript()
    speedups.uninstall()
    try:
        slow = transcript()
    finally:
        speedups.install()
    assert fast == slow


def test_difficulty_knobs(tmp_path):
    env = make("train", num_games=6, cache_dir=str(tmp_path), expert=True, max_receptacles=5,
               closed_prob=1.0, num_distractors=0)
    obs, _ = env.reset(seed=0)  # pick_and_place_simple
    seen = obs.split("you see ", 1)[1].split("\n")[0]
    assert seen.count(",") + 1 <= 5
    rec = env.game(0)
    assert any(a.startswith("open ") for a in rec.expert_plan)  # the target starts in a closed receptacle
    env.close()
    with pytest.raises(ValueError):
        GenConfig(closed_prob=2.0)


def test_native_checker_games_are_won_by_their_walkthrough_on_textworld(tmp_path):
    """Games checked by the native engine (no planner) must be winnable on alfworld's own engine."""
    cfg = GenConfig(checker="native")
    env = make("train", num_games=N_FAST, cache_dir=str(tmp_path), generator=cfg)
    for index in range(N_FAST):
        env.reset(seed=index)
        rec = env.game(index)
        assert rec.task_type == TASK_TYPES[index] and rec.expert_plan
        for action in rec.expert_plan:
            _, _, terminated, _, info = env.step(action)
        assert terminated and info["won"], (rec.task_type, rec.expert_plan)
    env.close()
    assert os.path.isdir(games_root(str(tmp_path), cfg))


def test_checker_is_part_of_the_game_set_name():
    # The planner's key is the one game sets had before ``checker`` existed (their caches stay valid).
    assert GenConfig().key() == "ae1b964b7d"
    assert GenConfig(checker="native").key() != GenConfig().key()
    with pytest.raises(ValueError, match="checker"):
        GenConfig(checker="oracle")


@pytest.mark.slow
@pytest.mark.parametrize("split", ["train", "eval"])
def test_expert_wins_98_percent_of_60_games(tmp_path_factory, split):
    """The issue's bar: >= 98% of 60 generated games (10 per family) in each split."""
    cache = os.environ.get("GACA_TEST_CACHE") or str(tmp_path_factory.mktemp("alf60"))
    env = make(split, num_games=60, cache_dir=cache, expert=True)
    wins = [play_episode(env, ExpertAgent(), seed=s)["won"] for s in range(60)]
    assert sum(wins) / 60 >= 0.98
    env.close()
