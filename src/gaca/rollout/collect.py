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
from typing import Any, Literal

import torch

from gaca import validate
from gaca.advantage import StepBatch, hash_text
from gaca.envs.episodes import Agent, Episode, Step, play_episodes
from gaca.envs.pool import EnvPool
from gaca.rollout.generate import pad_stack
from gaca.rollout.modes import ACTION_MODES, ResponseRows
from gaca.rollout.prompt import PromptFormat


@dataclass
class RolloutConfig:
    """How trajectories are sampled (the step limit is the environment's: ``env.max_steps``)."""

    group_size: int = 8
    """N: trajectories per task, all reset with the task's seed (the episode group)."""
    tasks_per_iter: int = 4
    """Tasks (episode groups) per training iteration; the env pool holds tasks_per_iter * group_size envs."""
    history_length: int = 2
    """K: how many recent (observation, action) pairs the prompt shows."""
    action_memory: int = 0
    """M: how many actions before those K pairs the prompt lists by name only ("Your actions at steps
    3-7: go to shelf 3; go to shelf 4; …"): a cheap memory of where the agent has been, which the
    last K observations do not give in a long episode."""
    max_new_tokens: int = 48
    """Token limit of one response (generate mode)."""
    temperature: float = 1.0
    """Sampling temperature of training rollouts (> 0; the PPO ratio and the NLL use the same one). In
    choose mode, the temperature of the softmax over the admissible actions."""
    top_p: float = 1.0
    """Nucleus sampling threshold (1.0: off; generate mode only)."""
    action_mode: str = "generate"
    """How the policy acts (``gaca.rollout.modes.ACTION_MODES``). ``generate``: it writes
    ``<think>…</think><action>…</action>`` and the action is parsed from it (an unparsable or
    inadmissible action is an invalid step). ``choose``: it scores the response it would write for
    each admissible action and samples from π(a|s) = softmax over them (nothing is invalid); the PPO
    ratio, the KL and the entropy are then action-level, and the step table holds one log-prob per row."""
    choice_score: Literal["sum", "mean"] = "sum"
    """Choose mode: a candidate's score is the sum of its tokens' log-probs (the likelihood of the whole
    response) or their mean (does not favour short actions). Tokens shared by every candidate of a step
    are left out of both (their log-prob is the same for every candidate)."""
    step_nll: Literal["decision", "tokens"] = "decision"
    """Choose mode: what the step table's log-probs hold, i.e. what GACA's criticality reads.
    ``decision``: log π(a_t|s_t), so the step's NLL is the decision surprisal −log π(a_t|s_t), whose
    expectation is the policy's entropy at s_t. ``tokens``: the chosen response's own token log-probs
    (the mean per-token NLL of generate mode, on the chosen action)."""
    max_candidates: int = 256
    """Choose mode: the most admissible actions a step may offer; a step with more stops the rollout
    with an error naming this key (the forward pass's cost grows with the candidates)."""
    thought: str = ""
    """The text inside ``<think></think>`` of the responses the policy is taught (SFT on expert play)
    and, in choose mode, of every candidate response it scores."""
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
        validate.integer("rollout.action_memory", self.action_memory, 0)
        validate.integer("rollout.max_new_tokens", self.max_new_tokens, 1)
        validate.number("rollout.temperature (> 0 for training; greedy decoding, 0, is for eval.temperature)",
                        self.temperature, 0.0, None, lo_open=True)
        validate.number("rollout.top_p", self.top_p, 0.0, 1.0, lo_open=True)
        validate.number("rollout.invalid_penalty", self.invalid_penalty, 0.0)
        validate.literal_fields(self, "rollout.")
        ACTION_MODES.check(self.action_mode, "rollout.action_mode")
        validate.integer("rollout.max_candidates", self.max_candidates, 1)

    def training_reward(self, step: Step) -> float:
        """r_t of a recorded step as training counts it: the environment's reward, minus ``invalid_penalty``
        when the step was invalid (the step table's ``reward``; the lab's Monte-Carlo returns)."""
        return float(step.outcome.reward) - (self.invalid_penalty if step.invalid else 0.0)

    def prompt_format(self, intro: str) -> PromptFormat:
        """How these options render a turn, after the environment's ``intro`` line."""
        return PromptFormat(intro=intro, history_length=self.history_length, action_memory=self.action_memory)

    def agent(self, policy: Any, pool: EnvPool, generator: torch.Generator | None = None, *,
              temperature: float | None = None, top_p: float | None = None) -> Agent:
        """The agent of ``action_mode`` these options describe, on ``pool``'s environments (their prompt intro)."""
        return ACTION_MODES[self.action_mode].agent(
            policy, self, intro=pool.intro, temperature=self.temperature if temperature is None else temperature,
            top_p=self.top_p if top_p is None else top_p, generator=generator)


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
