"""One real WebShop training iteration end to end: tiny model, the generated catalogue, oracle SFT, PPO."""

from __future__ import annotations

import json

import pytest

from gaca.config import ConfigError
from gaca.train import train
from gaca.train.config import load_config
from gaca.train.logger import read_metrics


def small_webshop(tmp_path, cache, *extra):
    return load_config(preset="tiny-webshop", overrides=[
        f"out_dir={json.dumps(str(tmp_path / 'run'))}", f"policy.cache_dir={json.dumps(cache)}",
        "policy.tiny_hidden=32", "policy.tiny_layers=1", "policy.tiny_heads=2", "policy.tiny_vocab=600",
        "env.num_products=60", "env.num_train_games=4", "env.num_eval_games=4", "env.max_steps=4",
        "rollout.group_size=2", "rollout.tasks_per_iter=2", "rollout.max_new_tokens=12",
        "sft.episodes=4", "sft.steps=2", "sft.batch_size=4", "eval.batch_size=4", "eval.every=0",
        "ppo.micro_batch_size=8", "iterations=1", "threads=1", "progress=false", "trackers=[]", *extra,
    ])


def test_one_webshop_iteration(tmp_path, cache):
    result = train(small_webshop(tmp_path, cache))
    assert result.iterations == 1
    first, last = read_metrics(tmp_path / "run")
    assert first["sft/expert_success"] > 0  # the oracle shops successfully: the SFT data is real
    for key in ("eval/success", "eval/return", "eval/terminated", "eval/invalid_ratio"):
        assert key in last and 0.0 <= last[key] <= 1.0
    assert last["env/step_rows"] > 0 and last["env/episodes"] == 4
    prompt = (tmp_path / "run" / "config.json").read_text()
    assert "WebShop" in json.loads(prompt)["env"]["intro"] and "ALFWorld" not in prompt


def test_one_webshop_choose_mode_iteration(tmp_path, cache):
    # the agent chooses among the listed actions: queries built from the instruction, then clicks
    result = train(small_webshop(tmp_path, cache, "rollout.action_mode=choose", "env.search_queries=instruction"))
    assert result.iterations == 1
    first, last = read_metrics(tmp_path / "run")
    assert first["sft/expert_success"] > 0
    assert last["env/invalid_ratio"] == 0.0 and last["eval/invalid_ratio"] == 0.0
    assert last["env/step_rows"] > 0 and last["perf/generated_tokens"] == last["env/step_rows"]


def test_choose_mode_needs_listed_search_queries(tmp_path, cache):
    with pytest.raises(ConfigError, match=r"env\.search_queries='instruction'"):
        small_webshop(tmp_path, cache, "rollout.action_mode=choose")
