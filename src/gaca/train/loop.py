"""The training loop, on one page: rollout -> advantages -> PPO update -> metrics, per iteration.

``TrainingRun`` (``gaca.train.run``) owns everything around the algorithm: set-up and resume,
the warm start, the environment pools, logging, checkpoints and Ctrl-C. What is left here is the
algorithm itself; every line is a call of a tested function.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from gaca.advantage import compute_advantages
from gaca.rollout import collect_rollouts
from gaca.train.config import TrainConfig
from gaca.train.metrics import iteration_metrics
from gaca.train.run import TrainingRun, TrainResult
from gaca.train.schedule import SHUFFLE_STREAM, TRAIN_STREAM, eval_due, iteration_generator, train_task_seeds
from gaca.train.timing import Stopwatch
from gaca.train.update import ppo_update


def iteration(run: TrainingRun, it: int) -> tuple[dict[str, float], dict[str, torch.Tensor]]:
    """Training iteration ``it`` (0-based): its metrics and histograms."""
    cfg, clock = run.cfg, Stopwatch()
    samples = iteration_generator(cfg.seed, it, TRAIN_STREAM)  # this iteration's samples
    shuffle = iteration_generator(cfg.seed, it, SHUFFLE_STREAM)  # and its minibatch order, independent of them
    with clock("rollout"):  # G tasks x N trajectories -> one row per step
        batch = collect_rollouts(run.policy, run.train_pool, train_task_seeds(cfg, it), cfg.rollout,
                                 generator=samples)
    with clock("advantage"):  # one scalar per step row; no model call
        adv = compute_advantages(batch.steps, cfg.estimator, cfg.advantage)
    with clock("update"):  # epochs x minibatches of clipped PPO on the rollout's own log-probs
        update = ppo_update(run.policy, run.optimizer, batch, adv.advantage, cfg.ppo, generator=shuffle,
                            guard=run.guard)
    evaluation = run.evaluate() if eval_due(cfg, it + 1) else None
    return iteration_metrics(batch, adv, update, clock, evaluation)


def train(
    cfg: TrainConfig,
    *,
    resume: bool = False,
    overwrite: bool = False,
    on_iteration: Callable[[int, dict[str, float]], None] | None = None,
) -> TrainResult:
    """Train ``cfg.iterations`` iterations in ``cfg.out_dir`` (``resume``: continue from its checkpoint;
    ``overwrite``: replace the run that is there).

    ``on_iteration(done, metrics)`` is called after each completed iteration (tests use it to
    interrupt a run).
    """
    with TrainingRun(cfg, resume=resume, overwrite=overwrite) as run:
        for it in run.iterations():
            metrics, histograms = iteration(run, it)
            run.end_iteration(metrics, histograms)
            if on_iteration is not None:
                on_iteration(run.state.iteration, metrics)
    return run.result


__all__ = ["iteration", "train"]
