"""Config files, presets, overrides and their errors."""

from __future__ import annotations

import json

import pytest

from gaca.train.config import (
    ConfigError,
    TrainConfig,
    from_dict,
    load_config,
    parse_override,
    preset_names,
    save_config,
    to_dict,
)


def test_presets_load_and_validate():
    names = preset_names()
    assert {"tiny-alfworld", "smollm2-alfworld", "qwen2.5-1.5b-alfworld"} <= set(names)
    for name in names:
        cfg = load_config(preset=name)
        assert cfg.estimator == "gaca" and cfg.iterations > 0
    tiny = load_config(preset="tiny-alfworld")
    assert tiny.policy.model == "tiny" and tiny.sft.episodes > 0


def test_overrides_dotted_typed_and_bare_strings():
    cfg = load_config(preset="tiny-alfworld", overrides=[
        "advantage.kappa=0.5", "iterations=3", "estimator=grpo", "policy.cache_dir=/tmp/x",
        "ppo.betas=[0.8, 0.9]", "advantage.similarity=0.9", "tensorboard=false", "env.kwargs.max_steps=7",
    ])
    assert cfg.advantage.kappa == 0.5 and cfg.iterations == 3 and cfg.estimator == "grpo"
    assert cfg.policy.cache_dir == "/tmp/x" and cfg.ppo.betas == (0.8, 0.9)
    assert cfg.advantage.similarity == 0.9 and cfg.tensorboard is False
    assert cfg.env.kwargs["max_steps"] == 7
    # an int where a float is expected is accepted and converted
    assert load_config(overrides=["ppo.lr=1"]).ppo.lr == 1.0
    assert load_config(overrides=["advantage.similarity=none"]).advantage.similarity is None


def test_unknown_keys_list_the_valid_ones():
    with pytest.raises(ConfigError, match=r"advantage\.kapa.*valid keys: .*advantage\.kappa"):
        load_config(overrides=["advantage.kapa=0.5"])
    with pytest.raises(ConfigError, match=r"\['iters'\].*valid keys: estimator, iterations"):
        load_config(overrides=["iters=3"])
    with pytest.raises(ConfigError, match=r"unknown config key\(s\) \['nope'\]"):
        load_config(overrides=["nope.x=1"])


def test_bad_values_are_errors():
    with pytest.raises(ConfigError, match=r"ppo.loss_agg must be one of \['token-mean', 'seq-mean-token-mean'\]"):
        load_config(overrides=["ppo.loss_agg=sum"])
    with pytest.raises(ConfigError, match="iterations must be an integer"):
        load_config(overrides=["iterations=2.5"])
    with pytest.raises(ConfigError, match="clip_ratio"):
        load_config(overrides=["ppo.clip_ratio=1.5"])
    with pytest.raises(ConfigError, match="advantage"):
        load_config(overrides=["advantage.gamma=2"])
    with pytest.raises(ConfigError, match=r"rollout\.temperature must be > 0 for training"):
        load_config(overrides=["rollout.temperature=0"])
    with pytest.raises(ConfigError, match=r"sft\.detour_prob"):
        load_config(overrides=["sft.detour_prob=1.0"])
    with pytest.raises(ConfigError, match=r"ppo\.warmup_steps"):
        load_config(overrides=["ppo.warmup_steps=-1"])
    assert load_config(overrides=["eval.temperature=0"]).eval.temperature == 0.0
    with pytest.raises(ConfigError, match="key=value"):
        parse_override("iterations")
    with pytest.raises(ConfigError, match="unknown preset 'nope'"):
        load_config(preset="nope")


def test_config_files_and_round_trip(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('estimator = "gigpo"\n[rollout]\ngroup_size = 2\n[ppo]\npolicy_loss = "dual_clip"\n')
    cfg = load_config(path, ["rollout.group_size=3"])
    assert cfg.estimator == "gigpo" and cfg.rollout.group_size == 3 and cfg.ppo.policy_loss == "dual_clip"
    save_config(cfg, tmp_path / "c.json")
    again = from_dict(TrainConfig, json.loads((tmp_path / "c.json").read_text()))
    assert to_dict(again) == to_dict(cfg)
    (tmp_path / "bad.toml").write_text("estimator = \n")
    with pytest.raises(ConfigError, match="invalid TOML"):
        load_config(tmp_path / "bad.toml")
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "missing.toml")
