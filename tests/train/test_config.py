"""Config files, presets, overrides and their errors."""

from __future__ import annotations

import json

import pytest

from gaca.advantage import ESTIMATORS, register_estimator
from gaca.advantage.estimators import grpo
from gaca.config import ConfigError, from_dict, parse_override, to_dict
from gaca.envs import AlfworldConfig, WebShopConfig
from gaca.train.config import TrainConfig, load_config, preset_names, save_config
from gaca.train.losses import POLICY_LOSSES, ppo_clip_loss


def test_presets_load_and_validate():
    names = preset_names()
    assert {"tiny-alfworld", "smollm2-alfworld", "qwen2.5-1.5b-alfworld"} <= set(names)
    for name in names:
        cfg = load_config(preset=name)
        assert cfg.estimator == "gaca" and cfg.iterations > 0
    tiny = load_config(preset="tiny-alfworld")
    assert tiny.policy.model == "tiny" and tiny.sft.episodes > 0
    long = load_config(preset="tiny-alfworld-long")  # the comparison's long horizon
    assert long.env.max_steps >= 30 and len(long.env.task_types) == 6


def test_overrides_dotted_typed_and_bare_strings():
    cfg = load_config(preset="tiny-alfworld", overrides=[
        "advantage.kappa=0.5", "iterations=3", "estimator=grpo", "policy.cache_dir=/tmp/x",
        "ppo.betas=[0.8, 0.9]", "advantage.similarity=0.9", "progress=false", "trackers=[]", "env.max_steps=7",
    ])
    assert cfg.advantage.kappa == 0.5 and cfg.iterations == 3 and cfg.estimator == "grpo"
    assert cfg.policy.cache_dir == "/tmp/x" and cfg.ppo.betas == (0.8, 0.9)
    assert cfg.advantage.similarity == 0.9 and cfg.progress is False and cfg.trackers == []
    assert cfg.env.max_steps == 7 and isinstance(cfg.env, AlfworldConfig)
    # an int where a float is expected is accepted and converted
    assert load_config(overrides=["ppo.lr=1"]).ppo.lr == 1.0
    assert load_config(overrides=["advantage.similarity=none"]).advantage.similarity is None


def test_peer_estimators_and_their_options_load_by_name():
    cfg = load_config(overrides=["estimator=empg", "advantage.empg_k=2", "advantage.uncertainty=nll",
                                 "advantage.empg_scope=group"])
    assert cfg.estimator == "empg" and cfg.advantage.empg_k == 2.0 and cfg.advantage.uncertainty == "nll"
    assert cfg.advantage.empg_scope == "group"
    cfg = load_config(overrides=["estimator=hgpo", "advantage.hgpo_history=4", "advantage.hgpo_base=true"])
    assert cfg.advantage.hgpo_history == 4 and cfg.advantage.hgpo_base is True
    with pytest.raises(ConfigError, match=r"advantage\.hgpo_history must be an integer"):
        load_config(overrides=["advantage.hgpo_history=2.5"])
    with pytest.raises(ConfigError, match="hgpo_history must be in"):
        load_config(overrides=["advantage.hgpo_history=40"])
    with pytest.raises(ConfigError, match=r"advantage\.uncertainty"):
        load_config(overrides=["advantage.uncertainty=variance"])
    with pytest.raises(ConfigError, match=r"advantage\.hgpo_base"):
        load_config(overrides=["advantage.hgpo_base=2"])


def test_unknown_keys_list_the_valid_ones():
    with pytest.raises(ConfigError, match=r"advantage\.kapa.*valid keys: .*advantage\.kappa"):
        load_config(overrides=["advantage.kapa=0.5"])
    with pytest.raises(ConfigError, match=r"\['iters'\].*valid keys: estimator, iterations"):
        load_config(overrides=["iters=3"])
    with pytest.raises(ConfigError, match=r"unknown config key\(s\) \['nope'\]"):
        load_config(overrides=["nope.x=1"])


def test_bad_values_are_errors():
    with pytest.raises(ConfigError, match=r"ppo.loss_agg: unknown loss aggregation 'sum'; choices: "
                                          r"\['seq-mean-token-mean', 'token-mean'\]"):
        load_config(overrides=["ppo.loss_agg=sum"])
    with pytest.raises(ConfigError, match="iterations must be an integer"):
        load_config(overrides=["iterations=2.5"])
    with pytest.raises(ConfigError, match="clip_ratio"):
        load_config(overrides=["ppo.clip_ratio=1.5"])
    with pytest.raises(ConfigError, match="advantage"):
        load_config(overrides=["advantage.gamma=2"])
    with pytest.raises(ConfigError, match=r"rollout\.temperature \(> 0 for training; greedy decoding, 0, is for "
                                          r"eval.temperature\) must be in \(0, inf\)"):
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


def test_environment_settings_are_typed_per_family():
    cfg = load_config(preset="tiny-alfworld")
    assert isinstance(cfg.env, AlfworldConfig) and cfg.env.generator.max_receptacles == 5
    assert cfg.env.task_types == ("pick_and_place_simple", "look_at_obj_in_light")
    with pytest.raises(ConfigError, match=r"unknown config key\(s\) \['env.max_stepz'\] in env; "
                                          r"valid keys: .*env\.max_steps"):
        load_config(preset="tiny-alfworld", overrides=["env.max_stepz=7"])
    shop = load_config(overrides=["env.name=webshop", "env.num_products=300"])
    assert isinstance(shop.env, WebShopConfig) and shop.env.max_steps == 15 and shop.env.num_products == 300
    assert "WebShop" in shop.env.intro and "ALFWorld" not in shop.env.intro  # each family's own intro
    with pytest.raises(ConfigError, match=r"^env\.name: unknown environment 'nope'; choices: \['alfworld', "):
        load_config(overrides=["env.name=nope"])
    with pytest.raises(ConfigError, match=r"unknown config key\(s\) \['env.task_types', 'env.generator'\]"):
        load_config(preset="tiny-alfworld", overrides=["env.name=webshop"])  # ALFWorld settings are not WebShop's
    with pytest.raises(ConfigError, match=r"env.task_types must be a non-empty subset"):
        load_config(overrides=["env.task_types=['pick_and_fly']"])
    with pytest.raises(ConfigError, match=r"env.eval_split must be one of .* for webshop, got 'valid_seen'"):
        load_config(overrides=["env.name=webshop", "env.eval_split=valid_seen"])
    with pytest.raises(ConfigError, match=r"env\.max_steps must be >= 1"):
        load_config(overrides=["env.max_steps=0"])
    # the config round-trips through JSON with its family
    again = from_dict(TrainConfig, to_dict(shop))
    assert again == shop


def test_bad_configs_fail_at_load_with_one_line_naming_the_key():
    cases = {
        "estimator=gacaa": r"^estimator: unknown advantage estimator 'gacaa'; choices: \[",
        "advantage.mixture=additive advantage.w0=0": r"advantage: option w0=0.0 must be >= 0.001: mixture='additive'",
        "advantage.eps=0": r"option eps must be in \(0, inf\), got 0.0",
        "advantage.kappa=inf": r"option kappa must be finite, got inf",  # κ < 0 is allowed: the anti-GACA control
        "advantage.w0=nan": r"option w0 must be finite, got nan",
        "ppo.lr=nan": r"^ppo.lr must be finite, got nan",
        "advantage.gamma=abc": r"^advantage.gamma must be a number, got 'abc'",
        "eval.batch_size=0": r"^eval.batch_size must be in \[1, inf\), got 0",
        "ppo.policy_loss=vanilla": r"^ppo.policy_loss: unknown policy loss 'vanilla'; choices: \['dual_clip', ",
    }
    for override, message in cases.items():
        with pytest.raises(ConfigError, match=message) as err:
            load_config(preset="tiny-alfworld", overrides=override.split())
        assert "\n" not in str(err.value), override


def test_registered_names_become_selectable_and_duplicates_are_refused():
    POLICY_LOSSES.register("test_plain_clip", ppo_clip_loss)
    register_estimator("test_grpo_again")(grpo)
    try:
        cfg = load_config(overrides=["ppo.policy_loss=test_plain_clip", "estimator=test_grpo_again"])
        assert cfg.ppo.policy_loss == "test_plain_clip" and cfg.estimator == "test_grpo_again"
        with pytest.raises(ValueError, match="already registered"):
            POLICY_LOSSES.register("test_plain_clip", ppo_clip_loss)
    finally:
        POLICY_LOSSES.unregister("test_plain_clip")
        ESTIMATORS.unregister("test_grpo_again")
