"""How right is each estimator's credit? A trained checkpoint's steps, scored against Monte-Carlo truth.

    data = measure_accuracy("runs/tiny-alfworld", AccuracyConfig())    # rollouts, estimates, truth

1. Sample G episode groups of N trajectories on train games exactly as training does (the run's
   rollout config: action mode, prompt, temperature, step limit, invalid-action penalty) and build
   the step table; every estimator setting of ``gaca.lab.accuracy.grid`` computes its advantages on
   the whole table.
2. Pick K steps stratified over position and criticality (``gaca.lab.accuracy.select``), keep each
   stratum's inverse inclusion probability, and estimate the steps' true advantage with M
   continuations of each kind (``gaca.lab.accuracy.truth``).
3. ``gaca.lab.accuracy.analysis`` scores every setting on those steps.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from pathlib import Path

import numpy as np
import torch

from gaca.advantage import compute_advantages
from gaca.config import to_dict
from gaca.envs import EnvPool
from gaca.lab.accuracy.config import AccuracyConfig
from gaca.lab.accuracy.data import AccuracyData, MeasureCounts, ScoredSteps
from gaca.lab.accuracy.grid import DEFAULT_GACA, EstimatorSetting, estimator_grid
from gaca.lab.accuracy.select import position_bins, quantile_bins, stratified_sample
from gaca.lab.accuracy.truth import RecordedStep, monte_carlo_truth
from gaca.rollout.collect import collect_rollouts
from gaca.train.run import load_checkpoint_policy

logger = logging.getLogger(__name__)


def measure_accuracy(checkpoint: str | Path, cfg: AccuracyConfig) -> AccuracyData:
    """Rollouts, every setting's estimates and the Monte-Carlo truth of K steps (module docstring)."""
    t_start = time.perf_counter()
    policy, run_cfg = load_checkpoint_policy(checkpoint)
    if cfg.threads > 0:
        torch.set_num_threads(cfg.threads)
    rollout = run_cfg.rollout
    if cfg.group_size:
        rollout = dataclasses.replace(rollout, group_size=cfg.group_size)
    env = dataclasses.replace(run_cfg.env, num_workers=cfg.num_workers)
    split = cfg.split or env.train_split
    gen = torch.Generator().manual_seed(cfg.seed)
    num_games = env.num_train_games if split == env.train_split else env.num_eval_games
    seeds = torch.randperm(num_games, generator=gen)[: cfg.groups].tolist()
    t0 = time.perf_counter()
    with torch.no_grad(), EnvPool.for_split(env, split, len(seeds) * rollout.group_size, num_games=num_games) as pool:
        batch = collect_rollouts(policy, pool, seeds, rollout, generator=gen)
    rollout_s = time.perf_counter() - t0
    table = batch.steps
    base = dataclasses.asdict(run_cfg.advantage)
    settings = {s.label: EstimatorSetting(s.label, s.estimator, {**base, **s.options}) for s in estimator_grid()}
    outputs = {s.label: compute_advantages(table, s.estimator, run_cfg.advantage, **s.options)
               for s in estimator_grid()}
    default = outputs[DEFAULT_GACA]

    traj = table.traj_id.numpy()
    length = np.array([batch.episodes[k].length for k in traj])
    step = table.step.numpy()
    criticality = default.criticality.double().numpy()
    crit_bin = quantile_bins(criticality, 5)
    cells = position_bins(step, length) * 5 + crit_bin
    chosen = stratified_sample(cells, cfg.steps, np.random.default_rng(cfg.seed))
    population, sampled = np.bincount(cells, minlength=15), np.bincount(cells[chosen], minlength=15)
    rewards = table.reward.double().numpy()
    recorded = []
    for i in chosen:
        episode = batch.episodes[int(traj[i])]
        t = int(step[i])
        actions = [s.decision.action for s in episode.steps]
        turn = episode.steps[t].turn
        recorded.append(RecordedStep(episode.seed, tuple(actions[:t]), actions[t], float(rewards[i]),
                                     turn.observation, tuple(turn.admissible_actions)))
    with torch.no_grad(), EnvPool.for_split(env, split, cfg.num_envs, num_games=num_games) as pool:
        agent = rollout.agent(policy, pool, torch.Generator().manual_seed(cfg.seed + 1))
        truth = monte_carlo_truth(pool, recorded, agent, continuations=cfg.continuations,
                                  gamma=float(base["gamma"]), step_reward=rollout.training_reward,
                                  progress=cfg.progress)
    entropy = table.entropy.double().numpy() if table.entropy is not None else np.full(len(step), np.nan)
    steps = ScoredSteps(
        row=chosen, group=table.group_id.numpy()[chosen], traj=traj[chosen], step=step[chosen],
        length=length[chosen], family=[batch.episodes[int(traj[i])].task_type or "unknown" for i in chosen],
        criticality=criticality[chosen], criticality_bin=crit_bin[chosen], nll=default.nll.double().numpy()[chosen],
        first_nll=truth.first_nll, entropy=entropy[chosen], has_peer=default.has_peer.numpy()[chosen].astype(bool),
        episode=default.episode.double().numpy()[chosen], step_level=default.step_level.double().numpy()[chosen],
        truth=truth.advantage, truth_se=truth.advantage_se, truth_discounted=truth.advantage_discounted,
        truth_discounted_se=truth.advantage_discounted_se, q=truth.q, v=truth.v, usable_q=truth.usable[:, 0],
        usable_v=truth.usable[:, 1], inclusion=(population / np.maximum(sampled, 1))[cells[chosen]].astype(float),
    )
    counts = MeasureCounts(
        rollout_episodes=len(batch.episodes), rollout_steps=len(table),
        rollout_success=float(np.mean([e.won for e in batch.episodes])), rollout_s=rollout_s,
        peer_share=float(default.has_peer.float().mean()), continuations=truth.continuations,
        mismatches=truth.mismatches, env_steps=truth.env_steps, policy_calls=truth.agent_calls,
        forward_passes=int(agent.forward_passes), continuation_s=truth.seconds,
        seconds=time.perf_counter() - t_start, mismatch_examples=list(truth.examples),
    )
    return AccuracyData(checkpoint=str(checkpoint), run_config=to_dict(run_cfg), lab=cfg, steps=steps,
                        estimates={label: out.advantage.double().numpy()[chosen] for label, out in outputs.items()},
                        settings=settings, counts=counts)


__all__ = ["measure_accuracy"]
