"""Supervised examples from expert play: the SFT warm start's data.

The environments must be built with ``expert=True`` so that ``info["expert_plan"]`` holds the
remaining plan from the current state; its first action is the target at every step. Prompts are
rendered exactly as the rollout renders them (``turn_prompt``), so the SFT targets match
what the policy sees during RL.

ALFWorld's expert plans with the whole game state in view: it walks straight to the receptacle that
hides the object, so its episodes never show a step taken from a wrong place. With ``detour_prob``
> 0 each step is, with that probability, replaced by a uniformly drawn admissible action (a detour,
recorded in the episode's history but not as an example); the expert then re-plans from where the
detour led, and those recovery steps become examples (noise injection into the demonstrator, as in
DART: Laskey et al. 2017, arXiv:1703.09327). With ``repeat_prob`` > 0 a step is, with that
probability, the previous action again when the environment no longer accepts it (ALFWorld: "go
to X" on arriving at X): the commonest mistake of a weak policy. The environment answers with its
failure text ("Nothing happens."), which expert play never shows otherwise, and the expert's next
step from there becomes an example: what to do after a failed action.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from dataclasses import dataclass

from gaca.envs.episodes import Decision, Turn, play_episodes
from gaca.envs.pool import EnvPool
from gaca.rollout.prompt import PromptFormat, format_response

logger = logging.getLogger(__name__)

DETOUR = "detour"
"""Payload of a detour decision (not an example)."""


class DetouringExpert:
    """Follows ``info["expert_plan"]``; with probability ``detour_prob`` takes a random admissible
    action, and with probability ``repeat_prob`` repeats its previous action when that is no longer
    admissible (see module docstring).

    One generator for all decisions, drawn in turn order (same seed, same detours).
    """

    def __init__(self, detour_prob: float = 0.0, seed: int = 0, repeat_prob: float = 0.0) -> None:
        if not 0.0 <= detour_prob < 1.0:
            raise ValueError(f"detour_prob must be in [0, 1), got {detour_prob}")
        if not 0.0 <= repeat_prob < 1.0:
            raise ValueError(f"repeat_prob must be in [0, 1), got {repeat_prob}")
        self.detour_prob = detour_prob
        self.repeat_prob = repeat_prob
        self.rng = random.Random(seed)

    def act(self, turns: Sequence[Turn]) -> list[Decision]:
        out = []
        for turn in turns:
            plan = turn.info.get("expert_plan")
            if not plan:
                raise RuntimeError(
                    "expert data needs envs built with expert=True (info['expert_plan'] is missing or empty"
                    f" for task {turn.info.get('task_id')!r})"
                )
            admissible = turn.admissible_actions
            previous = turn.history[-1][1] if turn.history else None
            if (self.repeat_prob > 0 and previous is not None and previous not in admissible
                    and self.rng.random() < self.repeat_prob):
                out.append(Decision(previous, payload=DETOUR))
            elif self.detour_prob > 0 and admissible and self.rng.random() < self.detour_prob:
                out.append(Decision(self.rng.choice(admissible), payload=DETOUR))
            else:
                out.append(Decision(str(plan[0])))
        return out


@dataclass
class ExpertData:
    """Supervised examples from expert play."""

    examples: list[tuple[str, str]]
    """(prompt text before the chat template, canonical response) per expert step."""
    episodes: int
    success_rate: float


def collect_expert_examples(
    pool: EnvPool,
    seeds: list[int],
    *,
    prompt: PromptFormat,
    thought: str = "",
    detour_prob: float = 0.0,
    seed: int = 0,
    repeat_prob: float = 0.0,
) -> ExpertData:
    """Play each seed's episode with the (detouring) expert and record (prompt, response) pairs.

    Args:
      pool: environments built with ``expert=True``.
      seeds: one episode per seed.
      prompt: how the turns become prompts (``RolloutConfig.prompt_format(pool.intro)``).
      thought: the text inside ``<think></think>`` of every target.
      detour_prob: probability of a detour at each step, in [0, 1).
      seed: seed of the detour draws (same seed, same examples).
      repeat_prob: probability of repeating a previous action that is no longer admissible, in [0, 1).
    """
    played = play_episodes(pool, seeds, DetouringExpert(detour_prob, seed, repeat_prob))
    examples = [
        (prompt.render(s.turn),
         format_response(s.decision.action, thought))
        for s in played.steps() if s.decision.payload != DETOUR
    ]
    rate = sum(e.won for e in played.episodes) / max(1, len(seeds))
    logger.info("expert play: %d episodes, success %.2f, %d examples", len(seeds), rate, len(examples))
    return ExpertData(examples=examples, episodes=len(seeds), success_rate=rate)


__all__ = ["DETOUR", "DetouringExpert", "ExpertData", "collect_expert_examples"]
