"""What the rest of gaca needs from a policy: two small protocols instead of ``Any``.

``SamplingPolicy`` is what an episode needs (build a prompt, sample responses with their
log-probs); ``Policy`` adds what an update needs (score responses, expose parameters, save and
load). ``CausalLMPolicy`` implements both over a ``transformers`` model; test doubles implement
just what they are used for.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol, runtime_checkable

import torch


@runtime_checkable
class SampledResponses(Protocol):
    """The result of ``SamplingPolicy.sample`` for B prompts (``gaca.policy.SampleOutput``)."""

    prompt_ids: list[torch.Tensor]
    """Per row, int64 [P_i], the encoded prompt."""
    response_ids: torch.Tensor
    """int64 [B, L], right-padded."""
    response_mask: torch.Tensor
    """bool [B, L], True on generated tokens."""
    logprobs: torch.Tensor
    """float32 [B, L], each sampled token's log-prob under the sampling distribution, 0 on padding."""
    texts: list[str]
    forward_passes: int


@runtime_checkable
class SamplingPolicy(Protocol):
    """A policy that can act: turn a user message into a prompt and sample responses."""

    def build_prompt(self, text: str) -> str: ...

    def sample(self, prompts: list[str], *, max_new_tokens: int, temperature: float = 1.0, top_p: float = 1.0,
               stop: str | None = None, generator: torch.Generator | None = None) -> SampledResponses: ...


@runtime_checkable
class Policy(SamplingPolicy, Protocol):
    """A policy that can also learn: teacher-forced scoring, parameters, state."""

    forward_calls: int
    """Model forward calls so far (sampling and scoring)."""

    def score(self, prompt_ids: list[torch.Tensor], response_ids: torch.Tensor, response_mask: torch.Tensor, *,
              temperature: float = 1.0, reference: bool = False, with_entropy: bool = False) -> Any:
        """Log-probs [B, L] (and entropy) of given responses; ``gaca.policy.ScoreOutput``."""
        ...

    def trainable_parameters(self) -> Iterable[torch.nn.Parameter]: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


__all__ = ["Policy", "SampledResponses", "SamplingPolicy"]
