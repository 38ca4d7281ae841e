"""How right is each estimator's credit? A trained checkpoint's steps, scored against Monte-Carlo truth.

    result = measure_accuracy("runs/tiny-alfworld", AccuracyConfig())   # rollouts, estimates, truth
    analysis = analyze_accuracy(result, AccuracyConfig())                # statistics with intervals
    write_accuracy_report(result, analysis, out_dir)                      # gaca.lab.report

1. Sample G episode groups of N trajectories on train games exactly as training does (the run's
   rollout config: prompt, temperature, step limit, invalid-action penalty) and build the step
   table; every estimator setting of ``gaca.lab.grid`` computes its advantages on the whole table.
2. Pick K steps stratified over position and criticality (``gaca.lab.select``) and estimate their
   true advantage with M continuations of each kind (``gaca.lab.truth``).
3. Score each setting on those steps, overall and by subset (step-level peer or not, criticality
   quintile, position, task family), and fit the optimal mixture per criticality quintile
   (``gaca.lab.score``).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from gaca import validate
from gaca.advantage import compute_advantages
from gaca.envs import EnvPool
from gaca.lab.grid import DEFAULT_GACA, estimator_grid
from gaca.lab.score import optimal_mixture, per_step_optimal_weight, score_settings
from gaca.lab.select import POSITIONS, position_bins, quantile_bins, stratified_sample
from gaca.lab.stats import noise_ceiling, spearman
from gaca.lab.truth import RecordedStep, monte_carlo_truth

logger = logging.getLogger(__name__)


@dataclass
class AccuracyConfig:
    """What ``gaca lab accuracy`` measures, and how much it spends."""

    groups: int = 16
    """G: episode groups sampled from the checkpoint's policy (distinct train games)."""
    group_size: int = 0
    """N: trajectories per group (0: the run's ``rollout.group_size``)."""
    steps: int = 480
    """K: recorded steps that get a Monte-Carlo truth (stratified; every step when the batch has fewer)."""
    continuations: int = 16
    """M: continuations per step for Q and again for V (>= 2)."""
    seed: int = 0
    """Seeds the game draw, the rollout, the step sample, the continuations and the bootstrap."""
    bootstrap: int = 1000
    """Bootstrap replicates (over episode groups) of every interval."""
    num_envs: int = 256
    """Environments stepped at once by the continuations (one policy call per step for all of them)."""
    num_workers: int = 0
    """Environment worker processes (0: in this process; the native engine is fast enough)."""
    split: str = ""
    """Split the games come from ('': the run's ``env.train_split``, as in training)."""
    threads: int = 0
    """torch threads (0: the run's ``threads``)."""
    progress: bool = True
    """Show progress bars."""

    def __post_init__(self) -> None:
        validate.integer("groups", self.groups, 1)
        validate.integer("group_size", self.group_size, 0)
        validate.integer("steps", self.steps, 1)
        validate.integer("continuations", self.continuations, 2)
        validate.integer("bootstrap", self.bootstrap, 10)
        validate.integer("num_envs", self.num_envs, 1)
        validate.integer("num_workers", self.num_workers, 0)
        validate.integer("threads", self.threads, 0)

    @classmethod
    def quick(cls, **overrides: Any) -> AccuracyConfig:
        """A run of about two minutes on a tiny checkpoint (the test suite's)."""
        return cls(**{"groups": 4, "steps": 48, "continuations": 4, "bootstrap": 200, "num_envs": 96, **overrides})


@dataclass
class AccuracyData:
    """What ``measure_accuracy`` records: per scored step (arrays [K]) and about the run."""

    checkpoint: str
    config: dict[str, Any]
    """The run's training config (as saved in the checkpoint)."""
    lab: dict[str, Any]
    """The ``AccuracyConfig`` used."""
    steps: dict[str, list[Any]]
    """Per scored step: group, traj, step, length, family, criticality, nll, first_nll, has_peer,
    episode (A^E), step_level (A^S) of the default GACA, and the truth with its SEs."""
    estimates: dict[str, list[float]]
    """Setting label -> [K] its advantage of each scored step."""
    settings: dict[str, dict[str, Any]]
    """Setting label -> {"estimator", "options"}."""
    counts: dict[str, float] = field(default_factory=dict)
    """Rollout and continuation counts and times."""

    def array(self, key: str) -> np.ndarray:
        return np.asarray(self.steps[key])


def _rollout_rewards(batch) -> np.ndarray:
    return batch.steps.reward.double().numpy()


def measure_accuracy(checkpoint: str | Path, cfg: AccuracyConfig) -> AccuracyData:
    """Rollouts, every setting's estimates and the Monte-Carlo truth of K steps (module docstring)."""
    from gaca.config import to_dict
    from gaca.rollout.collect import collect_rollouts
    from gaca.train.run import load_checkpoint_policy

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
    base = dict(run_cfg.advantage_options)
    settings = estimator_grid()
    outputs = {s.label: compute_advantages(table, s.estimator, **{**base, **s.options}) for s in settings}
    default = outputs[DEFAULT_GACA]

    traj = table.traj_id.numpy()
    length = np.array([batch.episodes[k].length for k in traj])
    step = table.step.numpy()
    criticality = default.criticality.double().numpy()
    cells = position_bins(step, length) * 5 + quantile_bins(criticality, 5)
    chosen = stratified_sample(cells, cfg.steps, np.random.default_rng(cfg.seed))
    rewards = _rollout_rewards(batch)
    recorded = []
    for i in chosen:
        episode = batch.episodes[int(traj[i])]
        t = int(step[i])
        actions = [s.decision.action for s in episode.steps]
        turn = episode.steps[t].turn
        recorded.append(RecordedStep(episode.seed, tuple(actions[:t]), actions[t], float(rewards[i]),
                                     turn.observation, tuple(turn.admissible_actions)))
    penalty = rollout.invalid_penalty

    def step_reward(s) -> float:
        return float(s.outcome.reward) - (penalty if s.invalid else 0.0)

    with torch.no_grad(), EnvPool.for_split(env, split, cfg.num_envs, num_games=num_games) as pool:
        agent = rollout.agent(policy, pool, torch.Generator().manual_seed(cfg.seed + 1))
        truth = monte_carlo_truth(pool, recorded, agent, continuations=cfg.continuations,
                                  gamma=float(base["gamma"]), step_reward=step_reward, progress=cfg.progress)
    families = [batch.episodes[int(traj[i])].task_type or "unknown" for i in chosen]
    steps = {
        "row": chosen.tolist(),
        "group": table.group_id.numpy()[chosen].tolist(),
        "traj": traj[chosen].tolist(),
        "step": step[chosen].tolist(),
        "length": length[chosen].tolist(),
        "family": families,
        "criticality": criticality[chosen].tolist(),
        "criticality_bin": quantile_bins(criticality, 5)[chosen].tolist(),
        "nll": default.nll.double().numpy()[chosen].tolist(),
        "first_nll": truth.first_nll.tolist(),
        "has_peer": default.has_peer.numpy()[chosen].astype(bool).tolist(),
        "episode": default.episode.double().numpy()[chosen].tolist(),
        "step_level": default.step_level.double().numpy()[chosen].tolist(),
        "truth": truth.advantage.tolist(), "truth_se": truth.advantage_se.tolist(),
        "truth_discounted": truth.advantage_discounted.tolist(),
        "truth_discounted_se": truth.advantage_discounted_se.tolist(),
        "q": truth.q.tolist(), "v": truth.v.tolist(),
        "usable_q": truth.usable[:, 0].tolist(), "usable_v": truth.usable[:, 1].tolist(),
    }
    counts = {
        "rollout_episodes": float(len(batch.episodes)), "rollout_steps": float(len(table)),
        "rollout_success": float(np.mean([e.won for e in batch.episodes])), "rollout_s": rollout_s,
        "peer_share_all_rows": float(default.has_peer.float().mean()),
        "continuations": float(truth.continuations), "mismatches": float(truth.mismatches),
        "env_steps": float(truth.env_steps), "policy_calls": float(truth.agent_calls),
        "forward_passes": float(agent.forward_passes), "continuation_s": truth.seconds,
        "seconds": time.perf_counter() - t_start,
    }
    if truth.examples:
        counts["mismatch_examples"] = truth.examples  # type: ignore[assignment]
    return AccuracyData(
        checkpoint=str(checkpoint), config=to_dict(run_cfg), lab=vars(cfg).copy(), steps=steps,
        estimates={label: out.advantage.double().numpy()[chosen].tolist() for label, out in outputs.items()},
        settings={s.label: {"estimator": s.estimator, "options": {**base, **s.options}} for s in settings},
        counts=counts,
    )


def load_accuracy_data(path: str | Path) -> AccuracyData:
    """The ``AccuracyData`` saved in a report's ``result.json`` (to analyze it again without re-measuring)."""
    import json

    return AccuracyData(**json.loads(Path(path).read_text())["data"])


def subsets(data: AccuracyData) -> dict[str, np.ndarray]:
    """The step subsets every statistic is also reported on (name -> bool mask [K])."""
    peer = data.array("has_peer").astype(bool)
    position = position_bins(data.array("step"), data.array("length"))
    crit_bin = data.array("criticality_bin")
    family = data.array("family")
    out = {"all": np.ones(len(peer), dtype=bool), "peer": peer, "no peer": ~peer}
    out.update({f"criticality q{b + 1}": crit_bin == b for b in range(5)})
    out.update({f"position {name}": position == k for k, name in enumerate(POSITIONS)})
    out.update({f"family {f}": family == f for f in sorted(set(family.tolist()))})
    return out


def analyze_accuracy(data: AccuracyData, *, bootstrap: int | None = None, seed: int | None = None) -> dict[str, Any]:
    """Every statistic of the report from ``data`` (see ``gaca.lab.score``), for both truths."""
    replicates = int(bootstrap or data.lab["bootstrap"])
    base_seed = int(data.lab["seed"] if seed is None else seed)
    usable = np.isfinite(data.array("truth")) & np.isfinite(data.array("truth_se"))
    keep = np.flatnonzero(usable)
    groups = data.array("group")[keep]
    masks = {k: v[keep] for k, v in subsets(data).items()}
    estimates = {label: np.asarray(v)[keep] for label, v in data.estimates.items()}
    result: dict[str, Any] = {"steps_scored": int(keep.size), "steps_dropped": int((~usable).sum())}
    for kind, key in (("undiscounted", "truth"), ("discounted", "truth_discounted")):
        truth, se = data.array(key)[keep], data.array(key + "_se")[keep]
        rng = np.random.default_rng(base_seed)
        result[kind] = {
            "scores": score_settings(estimates, truth, se, groups, masks, replicates=replicates, rng=rng,
                                     reference=DEFAULT_GACA),
            "truth_sd": float(np.std(truth, ddof=1)) if truth.size > 1 else math.nan,
            "truth_se_rms": float(np.sqrt(np.mean(se**2))) if se.size else math.nan,
            "noise_ceiling": noise_ceiling(truth, se),
        }
    truth = data.array("truth")[keep]
    episode, step_level = data.array("episode")[keep], data.array("step_level")[keep]
    criticality, peer = data.array("criticality")[keep], data.array("has_peer")[keep].astype(bool)
    rng = np.random.default_rng(base_seed + 1)
    result["mixture"] = optimal_mixture(truth, episode, step_level, criticality, peer, groups,
                                        replicates=replicates, rng=rng)
    result["mixture_nll"] = _nll_vs_optimal_weight(truth[peer], episode[peer], step_level[peer],
                                                   data.array("nll")[keep][peer], data.array("first_nll")[keep][peer])
    gaca_options = data.settings[DEFAULT_GACA]["options"]
    result["weight_map"] = {k: gaca_options[k] for k in ("w0", "kappa", "w_min", "w_max", "weight_map")}
    return result


def _nll_vs_optimal_weight(truth, episode, step_level, nll, first_nll) -> dict[str, float]:
    """Spearman of the per-step optimal weight with the step's NLL and with E_a[NLL] at its state."""
    if truth.size < 3:
        return {}
    ones = np.ones(truth.size)
    a_b = np.linalg.lstsq(np.stack([episode, step_level], 1), truth, rcond=None)[0]
    scale = float(a_b.sum())
    if not math.isfinite(scale) or abs(scale) < 1e-9:
        return {"scale": scale}
    w = per_step_optimal_weight(truth, episode, step_level, scale)
    ok = np.isfinite(w)
    out = {"scale": scale, "steps": int(ok.sum())}
    if ok.sum() >= 3:
        out["spearman_nll"] = float(spearman(w[ok], nll[ok], ones[ok])[0])
        fin = ok & np.isfinite(first_nll)
        if fin.sum() >= 3:
            out["spearman_expected_nll"] = float(spearman(w[fin], first_nll[fin], ones[fin])[0])
    return out


__all__ = ["AccuracyConfig", "AccuracyData", "analyze_accuracy", "load_accuracy_data", "measure_accuracy", "subsets"]
