"""Choose mode: the policy picks one of the admissible actions, π(a | s) = softmax over the admissible set.

At every step each admissible action a becomes the response the policy was taught to write for it
(``format_response(a, thought)``, tags included: the closing tag tells "countertop 1" from
"countertop 10"), every candidate of every running turn is scored in one forward pass
(``CausalLMPolicy.score_choices``: the prompt encoded once, candidates against it), and

    π(a | s) = softmax_a(score_a / T),   score_a = Σ_k log p(a_k | s, a_<k)  (``choice_score="sum"``)
                                               or its mean over a's tokens (``"mean"``),

from which one action is sampled (T = 0: the argmax). Nothing is invalid by construction. The PPO
update rescores log π(a | s) over the same candidate set (``ChosenActions``), so the ratio, the KL
and the entropy are action-level. The step table's row (what GACA's criticality reads) is the
decision surprisal −log π(a_t | s_t) (``step_nll="decision"``: one log-prob per row; its
expectation over a is the policy's entropy at s_t) or the chosen action's own token log-probs
(``"tokens"``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from gaca.envs.episodes import Decision, Turn
from gaca.policy.choice import ChoiceSet, choice_entropy, choice_logits, choice_logprobs
from gaca.policy.policy import ScoreOutput
from gaca.policy.sampling import draw
from gaca.rollout.prompt import PromptFormat, format_response

if TYPE_CHECKING:
    from gaca.policy.policy import CausalLMPolicy


class NoCandidatesError(ValueError):
    """A turn offers no admissible action to choose from, or more than the configured cap."""


@dataclass(frozen=True)
class ChosenAction:
    """One choose-mode decision (its payload)."""

    choices: ChoiceSet
    """The encoded prompt and candidates it was chosen from (the update rescores these)."""
    actions: tuple[str, ...]
    """The candidate actions, in the order of ``choices.candidates``."""
    chosen: int
    """Index of the chosen action."""
    decision_logprob: float
    """log π(a | s) at the sampling temperature (0 for the argmax of T = 0)."""
    entropy: float
    """H(π(· | s)) at the sampling temperature, nats (0 for T = 0)."""
    logprobs: torch.Tensor
    """float32 [L]: the step table's row, [log π(a | s)] or the chosen action's token log-probs."""


def admissible_candidates(turn: Turn, max_candidates: int) -> tuple[str, ...]:
    """The turn's admissible actions, duplicates removed (first kept), checked against the cap.

    Raises:
      NoCandidatesError: none, or more than ``max_candidates``.
    """
    actions = tuple(dict.fromkeys(a for a in turn.admissible_actions))
    if not actions:
        raise NoCandidatesError(f"choose mode: episode {turn.episode} (seed {turn.seed}) offers no admissible "
                                f"action at step {turn.step}; this environment needs rollout.action_mode='generate'")
    if len(actions) > max_candidates:
        raise NoCandidatesError(f"choose mode: episode {turn.episode} (seed {turn.seed}) offers {len(actions)} "
                                f"admissible actions at step {turn.step}, more than rollout.max_candidates="
                                f"{max_candidates}; raise it")
    return actions


class ChooseAgent:
    """Answers every running turn of a step by choosing among its admissible actions (module docstring).

    Args:
      policy: a ``CausalLMPolicy`` (``encode_choices``, ``score_choices``, ``build_prompt``).
      prompt: how a turn becomes the prompt text.
      thought: the text inside ``<think></think>`` of each candidate response.
      temperature: T of the softmax over candidates (0: argmax).
      choice_score: ``"sum"`` or ``"mean"`` of the candidate's token log-probs.
      step_nll: ``"decision"`` or ``"tokens"``: what the step table's row holds.
      max_candidates: the most admissible actions a turn may offer.
      generator: the sampling RNG (same state, same policy -> same choices on CPU).
    """

    def __init__(self, policy: CausalLMPolicy, *, prompt: PromptFormat, thought: str, temperature: float,
                 choice_score: str, step_nll: str, max_candidates: int,
                 generator: torch.Generator | None = None) -> None:
        self.policy, self.prompt, self.thought = policy, prompt, thought
        self.temperature, self.choice_score, self.step_nll = temperature, choice_score, step_nll
        self.max_candidates, self.generator = max_candidates, generator
        self.forward_passes = 0
        """Model forward calls spent so far."""
        self.generate_s = 0.0
        """Seconds spent scoring candidates."""

    def act(self, turns: Sequence[Turn]) -> list[Decision]:
        prompts = [self.policy.build_prompt(self.prompt.render(t)) for t in turns]
        actions = [admissible_candidates(t, self.max_candidates) for t in turns]
        t0 = time.perf_counter()
        sets = self.policy.encode_choices(prompts, [[format_response(a, self.thought) for a in acts]
                                                    for acts in actions])
        before = self.policy.forward_calls
        with torch.no_grad():
            scores = self.policy.score_choices(sets)
        self.forward_passes += self.policy.forward_calls - before
        logits = choice_logits(scores, self.choice_score)
        if self.temperature == 0:
            chosen = logits.masked_fill(~scores.mask, float("-inf")).argmax(-1)
            logp = torch.zeros_like(logits)
            entropy = torch.zeros(len(turns))
        else:
            all_logp = choice_logprobs(logits, scores.mask, self.temperature)
            chosen = draw(all_logp, self.generator)
            logp = all_logp
            entropy = choice_entropy(all_logp, scores.mask)
        chosen, logp, entropy = chosen.cpu(), logp.detach().cpu(), entropy.detach().cpu()
        self.generate_s += time.perf_counter() - t0
        decisions = []
        for b, (s, acts) in enumerate(zip(sets, actions, strict=True)):
            c = int(chosen[b])
            decision_logprob = float(logp[b, c])
            row = (torch.tensor([decision_logprob]) if self.step_nll == "decision"
                   else scores.candidate_tokens(b, c).detach().cpu().float())
            payload = ChosenAction(s, acts, c, decision_logprob, float(entropy[b]), row)
            decisions.append(Decision(acts[c], True, payload))
        return decisions


@dataclass
class ChosenActions:
    """The choices of N step rows, as the PPO update rescores them (one action-level log-prob per row)."""

    choices: list[ChoiceSet]
    """Per row, the encoded prompt and candidates."""
    chosen: torch.Tensor
    """int64 [N], the chosen candidate of each row."""
    old_logprobs: torch.Tensor
    """float32 [N, 1]: log π_old(a | s) at the sampling temperature."""
    choice_score: str
    """``"sum"`` or ``"mean"``: how candidates were scored (the update scores them the same way)."""

    @classmethod
    def of(cls, payloads: Sequence[ChosenAction], choice_score: str) -> ChosenActions:
        """The batch of choose-mode payloads, one row each, in order."""
        return cls(choices=[p.choices for p in payloads],
                   chosen=torch.tensor([p.chosen for p in payloads], dtype=torch.int64),
                   old_logprobs=torch.tensor([[p.decision_logprob] for p in payloads], dtype=torch.float32),
                   choice_score=choice_score)

    @property
    def mask(self) -> torch.Tensor:
        """bool [N, 1]: every row's one action-level term is in the loss."""
        return torch.ones(self.old_logprobs.shape, dtype=torch.bool)

    @property
    def prompt_lengths(self) -> torch.Tensor:
        """int64 [N], the packed length of each row (prompt and every candidate)."""
        return torch.tensor([len(s.prompt_ids) + sum(len(c) for c in s.candidates) for s in self.choices],
                            dtype=torch.int64)

    def select(self, rows: torch.Tensor) -> ChosenActions:
        """Rows ``rows`` (int64 [B])."""
        return ChosenActions([self.choices[int(i)] for i in rows], self.chosen[rows], self.old_logprobs[rows],
                             self.choice_score)

    def score(self, policy: CausalLMPolicy, *, temperature: float, reference: bool = False,
              with_entropy: bool = False) -> ScoreOutput:
        """log π(a | s) [B, 1] of the chosen actions over their candidate sets (and H(π(· | s)) [B, 1])."""
        scores = policy.score_choices(self.choices, reference=reference)
        all_logp = choice_logprobs(choice_logits(scores, self.choice_score), scores.mask, temperature)
        chosen = self.chosen.to(all_logp.device)
        logp = all_logp.gather(-1, chosen[:, None])
        entropy = choice_entropy(all_logp, scores.mask)[:, None] if with_entropy else None
        return ScoreOutput(logprobs=logp, entropy=entropy)


__all__ = ["ChooseAgent", "ChosenAction", "ChosenActions", "NoCandidatesError", "admissible_candidates"]
