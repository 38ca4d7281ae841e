"""How trajectories are sampled: ``RolloutConfig`` (the ``[rollout]`` table) and the action-mode registry it names.

``ACTION_MODES`` maps ``rollout.action_mode`` to an ``ActionMode`` (``gaca.rollout.modes`` registers
``generate`` and ``choose``); the config validates its name when it is built and builds the mode's
agent (``RolloutConfig.agent``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import torch

from gaca import validate
from gaca.envs.episodes import Agent, Step
from gaca.envs.pool import EnvPool
from gaca.registry import Registry
from gaca.rollout.prompt import PromptFormat

ACTION_MODES: Registry[Any] = Registry("action mode")
"""``rollout.action_mode`` -> ``gaca.rollout.modes.ActionMode`` (the agent, and the rows the update rescores)."""


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
    list_actions: bool = True
    """Show the admissible actions in the prompt. In choose mode the policy scores each admissible action
    anyway, and the list is a third of an ALFWorld prompt's tokens: false drops it (choose mode only)."""
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
        if not self.list_actions and self.action_mode != "choose":
            raise ValueError("rollout.list_actions=false is for choose mode: a generating policy must see the "
                             "admissible actions to write one")
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
        return PromptFormat(intro=intro, history_length=self.history_length, action_memory=self.action_memory,
                            list_actions=self.list_actions)

    def agent(self, policy: Any, pool: EnvPool, generator: torch.Generator | None = None, *,
              temperature: float | None = None, top_p: float | None = None) -> Agent:
        """The agent of ``action_mode`` these options describe, on ``pool``'s environments (their prompt intro)."""
        return ACTION_MODES[self.action_mode].agent(
            policy, self, intro=pool.intro, temperature=self.temperature if temperature is None else temperature,
            top_p=self.top_p if top_p is None else top_p, generator=generator)


__all__ = ["ACTION_MODES", "RolloutConfig"]
