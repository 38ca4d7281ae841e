"""The policy as an episode agent: one batched ``sample`` call per step for every running episode.

Each turn becomes the agent prompt (``render_prompt``: the task, the last K observations and
actions, the current observation, the admissible actions), the policy samples one response per
prompt, and the response's ``<action>`` is what the environment receives. The decision's payload
keeps the sampled tokens and their log-probs for the step table.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from gaca.envs.episodes import Decision, Turn
from gaca.policy.protocol import SamplingPolicy
from gaca.rollout.prompt import parse_response, turn_prompt


@dataclass(frozen=True)
class SampledResponse:
    """One sampled response (a decision's payload)."""

    prompt_ids: torch.Tensor
    """int64 [P], the encoded prompt it was sampled after."""
    response_ids: torch.Tensor
    """int64 [L], the generated tokens."""
    logprobs: torch.Tensor
    """float32 [L], each token's log-prob under the sampling distribution."""
    text: str


class PolicyAgent:
    """Answers every running turn of a step with one ``policy.sample`` call.

    Args:
      policy: builds prompts and samples (``SamplingPolicy``).
      intro: the prompt's first line (the environment's ``EnvConfig.intro``).
      history_length: K, how many recent (observation, action) pairs the prompt shows.
      max_new_tokens, temperature, top_p, stop: sampling options (``RolloutConfig``).
      generator: the sampling RNG (same state, same policy -> same responses on CPU).
    """

    def __init__(self, policy: SamplingPolicy, *, intro: str, history_length: int, max_new_tokens: int,
                 temperature: float, top_p: float, stop: str | None,
                 generator: torch.Generator | None = None) -> None:
        self.policy, self.intro, self.history_length = policy, intro, history_length
        self.sampling = {"max_new_tokens": max_new_tokens, "temperature": temperature, "top_p": top_p,
                         "stop": stop, "generator": generator}
        self.forward_passes = 0
        """Model forward calls spent so far (prefill + decode steps)."""
        self.generate_s = 0.0
        """Seconds spent in ``policy.sample``."""

    def act(self, turns: Sequence[Turn]) -> list[Decision]:
        prompts = [self.policy.build_prompt(turn_prompt(t, intro=self.intro, history_length=self.history_length))
                   for t in turns]
        t0 = time.perf_counter()
        out = self.policy.sample(prompts, **self.sampling)
        self.generate_s += time.perf_counter() - t0
        self.forward_passes += int(out.forward_passes)
        decisions = []
        for j, text in enumerate(out.texts):
            parsed = parse_response(text)
            length = int(out.response_mask[j].sum())
            sampled = SampledResponse(out.prompt_ids[j], out.response_ids[j, :length],
                                      out.logprobs[j, :length].detach().float(), text)
            decisions.append(Decision(parsed.action, parsed.well_formed, sampled))
        return decisions


__all__ = ["PolicyAgent", "SampledResponse"]
