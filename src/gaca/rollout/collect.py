"""Multi-turn group rollout: N trajectories per task from one initial state -> the step table.

For each task seed s_g (episode group g), N environments are reset with s_g, so they start from
the same state. The episode driver (``gaca.envs.play_episodes``) steps them with the agent of the
configured action mode (``gaca.rollout.modes``): one batched policy call per step for all running
episodes. Each step becomes one row:

    group_id = g, traj_id = the trajectory's index, step = t,
    anchor   = hash_text(anchor_text(observation, admissible actions) before the step)  (GiGPO's anchor state),
    reward   = r_t − invalid_penalty · [response malformed or action not admissible],
    logprobs, mask = the decision's log-probs: the sampled response's per-token log-probs (generate),
               or log π(a_t | s_t) of the chosen action (choose; one per row).

Rows are in the order the steps were taken (step-major). The rollout makes exactly one model call
per step batch and nothing else: GACA reuses these log-probs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from gaca.advantage import StepBatch, hash_text
from gaca.envs.episodes import Episode, Step, play_episodes
from gaca.envs.pool import EnvPool
from gaca.rollout.config import ACTION_MODES, RolloutConfig
from gaca.rollout.generate import pad_stack
from gaca.rollout.modes import ResponseRows


@dataclass
class RolloutBatch:
    """The step table plus what the update rescores of every step row (row i everywhere is the same step)."""

    steps: StepBatch
    """group_id, traj_id, step, anchor, reward, logprobs [N, L] (the decisions' log-probs), mask [N, L]."""
    rows: ResponseRows
    """What the PPO update rescores per row (``gaca.rollout.modes``): the sampled tokens (generate) or the
    chosen action among its candidates (choose), with the sampling log-probs of its ratio."""
    episodes: list[Episode]
    """Trajectory k is ``episodes[k]``; its group is k // group_size. An episode whose environment
    failed (``error``) has no rows in the table."""
    temperature: float
    """The sampling temperature (the update scores at the same one, so that r = 1 before its first step)."""
    actions: list[str] = field(default_factory=list)
    """Per row, the action sent to the environment."""
    invalid: torch.Tensor | None = None
    """bool [N]: the row got the invalid-action penalty."""
    forward_passes: int = 0
    """Model forward calls spent acting (generate: prefill + decode steps; choose: one per step)."""
    generate_s: float = 0.0
    """Seconds in the policy's sampling or candidate scoring."""
    env_s: float = 0.0

    @property
    def num_rows(self) -> int:
        return int(self.steps.reward.shape[0])

    @property
    def generated_tokens(self) -> int:
        """Tokens the policy produced (generate) or action-level terms (choose: one per row)."""
        return int(self.rows.mask.sum())


def anchor_text(observation: str, admissible_actions: list[str], kind: str = "observation+actions",
                state_key: str | None = None) -> str:
    """The text whose hash is a step's anchor (see ``RolloutConfig.anchor``)."""
    if kind == "state":
        if state_key is None:
            raise ValueError("rollout.anchor='state' needs an environment that reports info['state_key'] "
                             "(WebShop does; ALFWorld does not: use 'observation+actions')")
        return state_key
    if kind == "observation":
        return observation
    return observation + "\n\x1f" + "\x1f".join(admissible_actions)


def step_table(steps: list[Step], group_size: int, cfg: RolloutConfig) -> StepBatch:
    """The ``StepBatch`` of a policy's recorded steps (one row per step, in the given order); each
    decision's payload carries its row's ``logprobs`` and the policy's ``entropy`` at the step
    (``SampledResponse``, ``ChosenAction``; the table's ``entropy`` is None unless every row has one)."""
    rows = [s.decision.payload.logprobs for s in steps]
    entropy = [getattr(s.decision.payload, "entropy", None) for s in steps]
    if any(r.numel() == 0 for r in rows):
        raise RuntimeError("the policy returned an empty response (no generated token) for some step")
    texts = [anchor_text(s.turn.observation, s.turn.admissible_actions, cfg.anchor, s.turn.info.get("state_key"))
             for s in steps]
    width = max(r.shape[0] for r in rows)
    return StepBatch(
        group_id=torch.tensor([s.turn.episode // group_size for s in steps], dtype=torch.int64),
        traj_id=torch.tensor([s.turn.episode for s in steps], dtype=torch.int64),
        step=torch.tensor([s.turn.step for s in steps], dtype=torch.int64),
        anchor=torch.tensor([hash_text(a) for a in texts], dtype=torch.int64),
        reward=torch.tensor([cfg.training_reward(s) for s in steps], dtype=torch.float32),
        logprobs=pad_stack([r.float() for r in rows], width, 0.0),
        mask=pad_stack([torch.ones(r.shape[0], dtype=torch.bool) for r in rows], width, False),
        anchor_text=texts,
        entropy=None if None in entropy else torch.tensor(entropy, dtype=torch.float32),
    )


def collect_rollouts(
    policy: Any,
    pool: EnvPool,
    seeds: list[int],
    cfg: RolloutConfig,
    *,
    generator: torch.Generator | None = None,
) -> RolloutBatch:
    """Sample ``cfg.group_size`` trajectories for each task seed and return the step table.

    Args:
      policy: acts in ``cfg.action_mode`` (``SamplingPolicy`` to generate, ``CausalLMPolicy`` to choose).
      pool: the environments (``len(seeds) * group_size`` of them run at once when the pool is that large).
      seeds: one environment seed per task; task g is episode group g.
      cfg: sampling options.
      generator: the sampling RNG (same generator state + same policy -> same rollout).
    Returns:
      A ``RolloutBatch`` with one row per (trajectory, step) in the order the steps were taken.
    """
    n = cfg.group_size
    agent = cfg.agent(policy, pool, generator)
    played = play_episodes(pool, [int(s) for s in seeds for _ in range(n)], agent)
    # an episode whose environment failed says nothing about the policy: its rows stay out of the table
    steps = [s for s in played.steps() if played.episodes[s.turn.episode].error is None]
    if not steps:
        raise RuntimeError(f"every episode of the rollout failed in its environment; the first: "
                           f"{played.episodes[0].error}")
    payloads = [s.decision.payload for s in steps]
    return RolloutBatch(
        steps=step_table(steps, n, cfg),
        rows=ACTION_MODES[cfg.action_mode].rows(payloads, cfg),
        episodes=played.episodes,
        temperature=cfg.temperature,
        actions=[s.decision.action for s in steps],
        invalid=torch.tensor([s.invalid for s in steps], dtype=torch.bool),
        forward_passes=agent.forward_passes,
        generate_s=agent.generate_s,
        env_s=played.env_seconds,
    )


__all__ = ["RolloutBatch", "RolloutConfig", "anchor_text", "collect_rollouts", "step_table"]
