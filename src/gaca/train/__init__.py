"""The trainer: config, PPO losses and update, evaluation, checkpoints, metrics, the run and its loop.

Read ``loop`` first: one iteration on one page. ``run`` holds everything around it.
"""

from gaca.train.checkpoint import CHECKPOINT_NAME, load_checkpoint, save_checkpoint
from gaca.train.config import (
    ConfigError,
    EvalConfig,
    PPOConfig,
    SFTConfig,
    TrainConfig,
    load_config,
    preset_names,
)
from gaca.train.evaluate import EvalStats, evaluate
from gaca.train.loop import iteration, train
from gaca.train.losses import AGGREGATIONS, KL_ESTIMATORS, POLICY_LOSSES
from gaca.train.run import TrainingRun, TrainResult, evaluate_checkpoint
from gaca.train.update import NonFiniteGuard, NonFiniteLossError, UpdateStats, make_optimizer, ppo_update

__all__ = [
    "AGGREGATIONS",
    "CHECKPOINT_NAME",
    "KL_ESTIMATORS",
    "POLICY_LOSSES",
    "ConfigError",
    "EvalConfig",
    "EvalStats",
    "NonFiniteGuard",
    "NonFiniteLossError",
    "PPOConfig",
    "SFTConfig",
    "TrainConfig",
    "TrainResult",
    "TrainingRun",
    "UpdateStats",
    "evaluate",
    "evaluate_checkpoint",
    "iteration",
    "load_checkpoint",
    "load_config",
    "make_optimizer",
    "ppo_update",
    "preset_names",
    "save_checkpoint",
    "train",
]
