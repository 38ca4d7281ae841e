"""What each iteration plays and when: its random streams, its tasks, the evaluation and checkpoint cadence.

Reproducibility: iteration ``it`` draws its tasks and samples with generators seeded by (seed, it),
independent of history, so a run resumed from the checkpoint of iteration k repeats iterations
k+1… exactly; every evaluation draws from one fixed stream (common random numbers).
"""

from __future__ import annotations

import torch

from gaca.train.config import TrainConfig

TRAIN_STREAM, EVAL_STREAM, TASK_STREAM, SHUFFLE_STREAM = 0, 1, 2, 3


def iteration_generator(seed: int, iteration: int, stream: int = TRAIN_STREAM) -> torch.Generator:
    """The RNG of iteration ``iteration`` on ``stream``: the training samples; the evaluation stream
    (always used at iteration 0); the task draw; the update's minibatch order. Streams are independent,
    so changing how many samples a rollout draws does not change the update's minibatches."""
    return torch.Generator().manual_seed((seed * 1_000_003 + iteration) * 4 + stream)


def train_task_seeds(cfg: TrainConfig, iteration: int) -> list[int]:
    """The environment seeds (tasks) of one iteration: distinct games of the train split."""
    gen = iteration_generator(cfg.seed, iteration, TASK_STREAM)
    n_games = cfg.env.num_train_games
    k = cfg.rollout.tasks_per_iter
    if k <= n_games:
        return torch.randperm(n_games, generator=gen)[:k].tolist()
    return torch.randint(n_games, (k,), generator=gen).tolist()


def eval_task_seeds(cfg: TrainConfig) -> list[int]:
    """The held-out environment seeds: every game of the eval split once."""
    return list(range(cfg.env.num_eval_games))


def eval_due(cfg: TrainConfig, done: int) -> bool:
    """Evaluate after ``done`` completed iterations? (every ``eval.every`` and after the last)."""
    return done == cfg.iterations or (cfg.eval.every > 0 and done % cfg.eval.every == 0)


def checkpoint_due(cfg: TrainConfig, done: int) -> bool:
    """Checkpoint after ``done`` completed iterations? (every ``checkpoint_every`` and after the last)."""
    return done == cfg.iterations or (cfg.checkpoint_every > 0 and done % cfg.checkpoint_every == 0)


__all__ = ["EVAL_STREAM", "SHUFFLE_STREAM", "TASK_STREAM", "TRAIN_STREAM", "checkpoint_due", "eval_due",
           "eval_task_seeds", "iteration_generator", "train_task_seeds"]
