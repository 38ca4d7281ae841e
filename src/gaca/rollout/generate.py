"""Generate mode: the policy writes a response and the action is parsed out of it (the paper's agent).

Each turn becomes the agent prompt (``PromptFormat``: the task, the last K observations and
actions, the current observation, the admissible actions); one batched ``policy.sample`` call
answers every running turn of a step, and the response's ``<action>`` is what the environment
receives (an unparsable or inadmissible one is an invalid step). The decision's payload keeps the
sampled tokens and their log-probs; ``GeneratedResponses`` is what the PPO update rescores.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from gaca.envs.episodes import Decision, Turn
from gaca.policy.protocol import Policy, SamplingPolicy
from gaca.rollout.prompt import PromptFormat, parse_response


@dataclass(frozen=True)
class SampledResponse:
    """One sampled response (a generate-mode decision's payload)."""

    prompt_ids: torch.Tensor
    """int64 [P], the encoded prompt it was sampled after."""
    response_ids: torch.Tensor
    """int64 [L], the generated tokens."""
    logprobs: torch.Tensor
    """float32 [L], each token's log-prob under the sampling distribution (the step table's row)."""
    text: str
    entropy: float | None = None
    """Mean over the response's tokens of the sampling distribution's entropy (None: the policy did not
    report it)."""


class GenerateAgent:
    """Answers every running turn of a step with one ``policy.sample`` call.

    Args:
      policy: builds prompts and samples (``SamplingPolicy``).
      prompt: how a turn becomes the prompt text.
      max_new_tokens, temperature, top_p, stop: sampling options (``RolloutConfig``).
      generator: the sampling RNG (same state, same policy -> same responses on CPU).
    """

    def __init__(self, policy: SamplingPolicy, *, prompt: PromptFormat, max_new_tokens: int,
                 temperature: float, top_p: float, stop: str | None,
                 generator: torch.Generator | None = None) -> None:
        self.policy, self.prompt = policy, prompt
        self.sampling = {"max_new_tokens": max_new_tokens, "temperature": temperature, "top_p": top_p,
                         "stop": stop, "generator": generator}
        self.forward_passes = 0
        """Model forward calls spent so far (prefill + decode steps)."""
        self.generate_s = 0.0
        """Seconds spent in ``policy.sample``."""

    def act(self, turns: Sequence[Turn]) -> list[Decision]:
        prompts = [self.policy.build_prompt(self.prompt.render(t)) for t in turns]
        t0 = time.perf_counter()
        out = self.policy.sample(prompts, **self.sampling)
        self.generate_s += time.perf_counter() - t0
        self.forward_passes += int(out.forward_passes)
        decisions = []
        for j, text in enumerate(out.texts):
            parsed = parse_response(text)
            length = int(out.response_mask[j].sum())
            token_entropy = getattr(out, "entropy", None)
            entropy = None if token_entropy is None else float(token_entropy[j, :length].mean())
            sampled = SampledResponse(out.prompt_ids[j], out.response_ids[j, :length],
                                      out.logprobs[j, :length].detach().float(), text, entropy)
            decisions.append(Decision(parsed.action, parsed.well_formed, sampled))
        return decisions


def pad_stack(rows: Sequence[torch.Tensor], width: int, value: float | bool | int) -> torch.Tensor:
    """Stack 1-D tensors right-padded with ``value`` to ``width``: [len(rows), width]."""
    out = torch.full((len(rows), width), value, dtype=rows[0].dtype)
    for i, r in enumerate(rows):
        out[i, : r.shape[0]] = r
    return out


@dataclass
class GeneratedResponses:
    """The sampled responses of N step rows, as the PPO update rescores them (token level)."""

    prompt_ids: list[torch.Tensor]
    """Per row, int64 [P_i]: the prompt tokens the response was sampled after."""
    response_ids: torch.Tensor
    """int64 [N, L], right-padded."""
    mask: torch.Tensor
    """bool [N, L], True on generated tokens (the loss mask)."""
    old_logprobs: torch.Tensor
    """float32 [N, L], the sampling log-prob of each generated token (0 on padding)."""

    @classmethod
    def of(cls, payloads: Sequence[SampledResponse]) -> GeneratedResponses:
        """The batch of generate-mode payloads, one row each, in order."""
        if any(r.response_ids.numel() == 0 for r in payloads):
            raise RuntimeError("the policy returned an empty response (no generated token) for some step")
        width = max(1, max(r.response_ids.shape[0] for r in payloads))
        return cls(
            prompt_ids=[r.prompt_ids for r in payloads],
            response_ids=pad_stack([r.response_ids for r in payloads], width, 0),
            mask=pad_stack([torch.ones(r.response_ids.shape[0], dtype=torch.bool) for r in payloads], width, False),
            old_logprobs=pad_stack([r.logprobs for r in payloads], width, 0.0),
        )

    @property
    def prompt_lengths(self) -> torch.Tensor:
        """int64 [N]."""
        return torch.tensor([len(p) for p in self.prompt_ids], dtype=torch.int64)

    def select(self, rows: torch.Tensor) -> GeneratedResponses:
        """Rows ``rows`` (int64 [B]), trimmed to their longest response."""
        width = max(1, int(self.mask[rows].sum(1).max()))
        return GeneratedResponses([self.prompt_ids[int(i)] for i in rows], self.response_ids[rows, :width],
                                  self.mask[rows, :width], self.old_logprobs[rows, :width])

    def score(self, policy: Policy, *, temperature: float, reference: bool = False, with_entropy: bool = False):
        """Teacher-forced log-probs [B, L] (and entropy) of the responses under ``policy`` (``Policy.score``)."""
        return policy.score(self.prompt_ids, self.response_ids, self.mask, temperature=temperature,
                            reference=reference, with_entropy=with_entropy)


__all__ = ["GenerateAgent", "GeneratedResponses", "SampledResponse", "pad_stack"]
