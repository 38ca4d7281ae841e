"""Multi-turn group rollout: N trajectories per task from one initial state -> the step table.

For each task seed s_g (episode group g), N environments are reset with s_g, so they start from
the same state. The episode driver (``gaca.envs.play_episodes``) steps them with a ``PolicyAgent``:
one batched ``policy.sample`` per step for all running episodes. Each step becomes one row:

    group_id = g, traj_id = the trajectory's index, step = t,
    anchor   = hash_text(anchor_text(observation, admissible actions) before the step)  (GiGPO's anchor state),
    reward   = r_t − invalid_penalty · [response malformed or action not admissible],
    logprobs, mask = the sampled response's per-token log-probs and token mask.

Rows are in the order the steps were taken (step-major). The rollout makes exactly one model call
per step batch and nothing else: GACA reuses these log-probs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import torch

from gaca import validate
from gaca.advantage import StepBatch, hash_text
from gaca.envs.episodes import Episode, Step, play_episodes
from gaca.envs.pool import EnvPool
from gaca.policy.protocol import SamplingPolicy
from gaca.rollout.agent import PolicyAgent, SampledResponse


@dataclass
class RolloutConfig:
    """How trajectories are sampled (the step limit is the environment's: ``env.max_steps``)."""

    group_size: int = 8
    """N: trajectories per task, all reset with the task's seed (the episode group)."""
    tasks_per_iter: int = 4
    """Tasks (episode groups) per training iteration; the env pool holds tasks_per_iter * group_size envs."""
    history_length: int = 2
    """K: how many recent (observation, action) pairs the prompt shows."""
    max_new_tokens: int = 48
    """Token limit of one response."""
    temperature: float = 1.0
    """Sampling temperature of training rollouts (> 0; the PPO ratio and the NLL use the same one)."""
    top_p: float = 1.0
    """Nucleus sampling threshold (1.0: off)."""
    invalid_penalty: float = 0.1
    """Subtracted from a step's reward when its response is malformed or its action is not admissible."""
    stop: str = "</action>"
    """Each response stops after this string (or eos, or max_new_tokens)."""
    anchor: Literal["observation", "observation+actions", "state"] = "observation+actions"
    """What identifies a step's starting state for step-level grouping (GiGPO's anchor).
    ``observation``: the observation text alone, as verl-agent does; in ALFWorld every failed
    command yields "Nothing happens.", which then merges unrelated states into one step group.
    ``observation+actions``: the observation together with the admissible actions, which in ALFWorld
    also pin the agent's location, what it holds and which receptacles are open.
    ``state``: the environment's own key of its state (``info["state_key"]``; WebShop gives one,
    including the options selected on an item page, which its text does not show)."""

    def __post_init__(self) -> None:
        validate.integer("rollout.group_size", self.group_size, 1)
        validate.integer("rollout.tasks_per_iter", self.tasks_per_iter, 1)
        validate.integer("rollout.history_length", self.history_length, 0)
        validate.integer("rollout.max_new_tokens", self.max_new_tokens, 1)
        validate.number("rollout.temperature (> 0 for training; greedy decoding, 0, is for eval.temperature)",
                        self.temperature, 0.0, None, lo_open=True)
        validate.number("rollout.top_p", self.top_p, 0.0, 1.0, lo_open=True)
        validate.number("rollout.invalid_penalty", self.invalid_penalty, 0.0)
        if self.anchor not in ("observation", "observation+actions", "state"):
            raise ValueError(f"rollout.anchor must be 'observation', 'observation+actions' or 'state', got "
                             f"{self.anchor!r}")

    def agent(self, policy: SamplingPolicy, pool: EnvPool, generator: torch.Generator | None = None, *,
              temperature: float | None = None, top_p: float | None = None) -> PolicyAgent:
        """The ``PolicyAgent`` these options describe, on ``pool``'s environments (their prompt intro)."""
        return PolicyAgent(policy, intro=pool.intro, history_length=self.history_length,
                           max_new_tokens=self.max_new_tokens,
                           temperature=self.temperature if temperature is None else temperature,
                           top_p=self.top_p if top_p is None else top_p, stop=self.stop, generator=generator)


@dataclass
class RolloutBatch:
    """The step table plus the token tensors of every step row (row i everywhere is the same step)."""

    steps: StepBatch
    """group_id, traj_id, step, anchor, reward, logprobs [N, L] (the sampling log-probs), mask [N, L]."""
    prompt_ids: list[torch.Tensor]
    """Per row, int64 [P_i]: the prompt tokens the response was sampled after."""
    response_ids: torch.Tensor
    """int64 [N, L], right-padded."""
    episodes: list[Episode]
    """Trajectory k is ``episodes[k]``; its group is k // group_size. An episode whose environment
    failed (``error``) has no rows in the table."""
    temperature: float
    """The sampling temperature (the update scores at the same one, so that r = 1 before its first step)."""
    texts: list[str] = field(default_factory=list)
    """Per row, the decoded response."""
    actions: list[str] = field(default_factory=list)
    """Per row, the action sent to the environment."""
    invalid: torch.Tensor | None = None
    """bool [N]: the row got the invalid-action penalty."""
    forward_passes: int = 0
    """Model forward calls spent sampling (prefill + decode steps)."""
    generate_s: float = 0.0
    env_s: float = 0.0

    @property
    def logprobs(self) -> torch.Tensor:
        """float [N, L], the sampling log-prob of each generated token (0 on padding)."""
        return self.steps.logprobs

    @property
    def response_mask(self) -> torch.Tensor:
        """bool [N, L], True on generated tokens."""
        return self.steps.mask

    @property
    def num_rows(self) -> int:
        return int(self.response_ids.shape[0])

    @property
    def generated_tokens(self) -> int:
        return int(self.steps.mask.sum())


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


def _pad_stack(rows: list[torch.Tensor], width: int, value: float | bool | int) -> torch.Tensor:
    out = torch.full((len(rows), width), value, dtype=rows[0].dtype)
    for i, r in enumerate(rows):
        out[i, : r.shape[0]] = r
    return out


def step_table(steps: list[Step], group_size: int, cfg: RolloutConfig) -> tuple[StepBatch, list[SampledResponse]]:
    """The ``StepBatch`` of a policy's recorded steps (one row per step, in the given order)."""
    sampled: list[SampledResponse] = [s.decision.payload for s in steps]
    if any(not isinstance(r, SampledResponse) for r in sampled):
        raise TypeError("step_table needs steps decided by a PolicyAgent (SampledResponse payloads)")
    if any(r.response_ids.numel() == 0 for r in sampled):
        raise RuntimeError("the policy returned an empty response (no generated token) for some step")
    texts = [anchor_text(s.turn.observation, s.turn.admissible_actions, cfg.anchor, s.turn.info.get("state_key"))
             for s in steps]
    width = max(1, max(r.response_ids.shape[0] for r in sampled))
    batch = StepBatch(
        group_id=torch.tensor([s.turn.episode // group_size for s in steps], dtype=torch.int64),
        traj_id=torch.tensor([s.turn.episode for s in steps], dtype=torch.int64),
        step=torch.tensor([s.turn.step for s in steps], dtype=torch.int64),
        anchor=torch.tensor([hash_text(a) for a in texts], dtype=torch.int64),
        reward=torch.tensor([s.outcome.reward - (cfg.invalid_penalty if s.invalid else 0.0) for s in steps],
                            dtype=torch.float32),
        logprobs=_pad_stack([r.logprobs for r in sampled], width, 0.0),
        mask=_pad_stack([torch.ones(r.response_ids.shape[0], dtype=torch.bool) for r in sampled], width, False),
        anchor_text=texts,
    )
    return batch, sampled


def collect_rollouts(
    policy: SamplingPolicy,
    pool: EnvPool,
    seeds: list[int],
    cfg: RolloutConfig,
    *,
    generator: torch.Generator | None = None,
) -> RolloutBatch:
    """Sample ``cfg.group_size`` trajectories for each task seed and return the step table.

    Args:
      policy: builds prompts and samples (``SamplingPolicy``).
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
    table, sampled = step_table(steps, n, cfg)
    return RolloutBatch(
        steps=table,
        prompt_ids=[r.prompt_ids for r in sampled],
        response_ids=_pad_stack([r.response_ids for r in sampled], table.logprobs.shape[1], 0),
        episodes=played.episodes,
        temperature=cfg.temperature,
        texts=[r.text for r in sampled],
        actions=[s.decision.action for s in steps],
        invalid=torch.tensor([s.invalid for s in steps], dtype=torch.bool),
        forward_passes=agent.forward_passes,
        generate_s=agent.generate_s,
        env_s=played.env_seconds,
    )


__all__ = ["RolloutBatch", "RolloutConfig", "anchor_text", "collect_rollouts", "step_table"]
