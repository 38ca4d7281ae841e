"""The few-second real training run the trainer and CLI tests share (real tiny model, real ALFWorld games).

The ``cache`` fixture (``tests/conftest.py``) is the game and tokenizer cache they share.
"""

from __future__ import annotations

import json

from gaca.train.config import TrainConfig, load_config


def small_overrides(out_dir, cache: str, *extra: str) -> list[str]:
    """A few-second run: 1-layer tiny model, 2 train and 2 eval games, groups of 2, 3 steps, generate mode."""
    return [
        f"out_dir={json.dumps(str(out_dir))}", f"policy.cache_dir={json.dumps(cache)}",
        "policy.tiny_hidden=32", "policy.tiny_layers=1", "policy.tiny_heads=2", "policy.tiny_vocab=400",
        "env.num_train_games=2", "env.num_eval_games=2", "env.num_workers=1", "env.max_steps=3",
        f"env.cache_dir={json.dumps(cache)}", "env.generator.max_receptacles=4", "env.generator.num_distractors=2",
        "rollout.group_size=2", "rollout.tasks_per_iter=1", "rollout.max_new_tokens=6",
        # generating at T = 1 (the preset chooses at T = 2): 3-step games are rarely won, and the
        # invalid-action penalty, which only a generating policy can earn, gives the update a signal
        'rollout.action_mode="generate"', "rollout.temperature=1.0", "rollout.invalid_penalty=0.1",
        "sft.episodes=2", "sft.steps=2", "sft.batch_size=4", "eval.batch_size=2", "eval.every=0",
        "ppo.micro_batch_size=4", "ppo.lr=1e-3", "iterations=1", "checkpoint_every=1", "progress=false",
        "threads=0", *extra,
    ]


def small_config(out_dir, cache: str, *extra: str) -> TrainConfig:
    """``small_overrides`` on the tiny-alfworld preset."""
    return load_config(preset="tiny-alfworld", overrides=small_overrides(out_dir, cache, *extra))
