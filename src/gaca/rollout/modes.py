"""Action modes by name: how a policy turns a turn into an action, and what the update rescores.

``rollout.action_mode`` names one of ``ACTION_MODES``; each gives the episode agent and collates
its decisions' payloads into the rows the PPO update rescores:

- ``generate`` (``gaca.rollout.generate``): the policy writes a response; its tokens are the rows.
- ``choose`` (``gaca.rollout.choose``): the policy chooses among the admissible actions; one
  action-level log-prob per row.

A new mode registers an object with these two methods under a new name.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import torch

from gaca.envs.episodes import Agent
from gaca.rollout.choose import ChooseAgent, ChosenAction, ChosenActions
from gaca.rollout.config import ACTION_MODES, RolloutConfig
from gaca.rollout.generate import GenerateAgent, GeneratedResponses, SampledResponse


class ResponseRows(Protocol):
    """What the PPO update needs of a rollout's actions: old log-probs, a loss mask, and rescoring."""

    old_logprobs: torch.Tensor
    """float32 [N, L]: the sampling log-probs the ratio divides by."""

    @property
    def mask(self) -> torch.Tensor:
        """bool [N, L]: the terms that enter the loss."""
        ...

    @property
    def prompt_lengths(self) -> torch.Tensor:
        """int64 [N]: rows of similar length share micro-batches."""
        ...

    def select(self, rows: torch.Tensor) -> ResponseRows: ...

    def score(self, policy: Any, *, temperature: float, reference: bool = False,
              with_entropy: bool = False) -> Any:
        """``gaca.policy.ScoreOutput`` with log-probs [B, L] aligned with ``old_logprobs``."""
        ...


class ActionMode(Protocol):
    def agent(self, policy: Any, cfg: RolloutConfig, *, intro: str, temperature: float, top_p: float,
              generator: torch.Generator | None) -> Agent:
        """The episode agent of this mode."""
        ...

    def rows(self, payloads: Sequence[Any], cfg: RolloutConfig) -> ResponseRows:
        """The update's rows of the decisions' payloads (one per step, in order)."""
        ...


class Generate:
    """The policy writes ``<think>…</think><action>…</action>``; the action is parsed from it."""

    def agent(self, policy: Any, cfg: RolloutConfig, *, intro: str, temperature: float, top_p: float,
              generator: torch.Generator | None) -> Agent:
        return GenerateAgent(policy, prompt=cfg.prompt_format(intro),
                             max_new_tokens=cfg.max_new_tokens, temperature=temperature, top_p=top_p,
                             stop=cfg.stop, generator=generator)

    def rows(self, payloads: Sequence[Any], cfg: RolloutConfig) -> ResponseRows:
        if any(not isinstance(p, SampledResponse) for p in payloads):
            raise TypeError("generate mode needs steps decided by a GenerateAgent (SampledResponse payloads)")
        return GeneratedResponses.of(payloads)


class Choose:
    """The policy chooses among the admissible actions (``top_p`` does not apply)."""

    def agent(self, policy: Any, cfg: RolloutConfig, *, intro: str, temperature: float, top_p: float,
              generator: torch.Generator | None) -> Agent:
        return ChooseAgent(policy, prompt=cfg.prompt_format(intro), thought=cfg.thought,
                           temperature=temperature, choice_score=cfg.choice_score, step_nll=cfg.step_nll,
                           max_candidates=cfg.max_candidates, generator=generator)

    def rows(self, payloads: Sequence[Any], cfg: RolloutConfig) -> ResponseRows:
        if any(not isinstance(p, ChosenAction) for p in payloads):
            raise TypeError("choose mode needs steps decided by a ChooseAgent (ChosenAction payloads)")
        return ChosenActions.of(payloads, cfg.choice_score)


ACTION_MODES.register("generate", Generate())
ACTION_MODES.register("choose", Choose())

__all__ = ["ActionMode", "Choose", "Generate", "ResponseRows"]
