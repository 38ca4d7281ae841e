"""Held-out evaluation: play each held-out task once and report success, length and invalid actions."""

from __future__ import annotations

import math
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch

from gaca.envs.episodes import Episode, play_episodes
from gaca.envs.pool import EnvPool
from gaca.policy.protocol import SamplingPolicy
from gaca.rollout.config import RolloutConfig


@dataclass(frozen=True)
class GameOutcome:
    """How one held-out episode went: what paired comparisons of policies on the same games need."""

    seed: int
    """The environment seed (the game)."""
    task_id: str
    family: str
    """The task family (``info["task_type"]``; "unknown" when the environment gives none)."""
    won: bool
    env_return: float
    """Sum of the environment's rewards (WebShop: its score in [0, 1])."""
    length: int | None
    """Steps taken (None in the 2026-11 comparison's oldest records, which kept only the split's totals)."""
    invalid: int | None
    """Steps with a malformed response or an inadmissible action (None: as ``length``)."""
    crashed: bool
    """The environment failed (raised, hung or died): the episode says nothing about the policy."""

    FIELDS: ClassVar[tuple[str, ...]] = ("seed", "task_id", "family", "won", "env_return", "length", "invalid",
                                         "crashed")

    @classmethod
    def of(cls, episode: Episode) -> GameOutcome:
        return cls(seed=episode.seed, task_id=episode.task_id, family=episode.task_type or "unknown",
                   won=episode.won, env_return=float(episode.env_return), length=episode.length,
                   invalid=episode.invalid, crashed=episode.error is not None)

    @classmethod
    def to_columns(cls, outcomes: list[GameOutcome]) -> dict[str, list[Any]]:
        """Field -> one value per game (the compact form records keep)."""
        return {name: [getattr(o, name) for o in outcomes] for name in cls.FIELDS}

    @classmethod
    def from_columns(cls, columns: dict[str, list[Any]]) -> list[GameOutcome]:
        """Inverse of ``to_columns``."""
        n = len(columns["seed"])
        return [cls(**{name: columns[name][i] for name in cls.FIELDS}) for i in range(n)]


@dataclass
class EvalStats:
    """Results of one evaluation."""

    success: float
    """Share of held-out episodes won."""
    per_family: dict[str, float] = field(default_factory=dict)
    """Success rate per task family (``info["task_type"]``)."""
    episode_length: float = 0.0
    """Mean steps per episode."""
    invalid_ratio: float = 0.0
    """Share of steps with a malformed response or an inadmissible action."""
    env_return: float = 0.0
    """Mean sum of the environment's rewards per episode (WebShop: its score in [0, 1])."""
    terminated: float = 0.0
    """Share of episodes the environment ended itself (won, or WebShop: bought something) rather
    than the step limit."""
    episodes: int = 0
    """Episodes played to their end (the rates above are over these)."""
    crashed: int = 0
    """Episodes whose environment failed (raised, hung or died): left out of every rate above."""
    forward_passes: int = 0
    seconds: float = 0.0
    outcomes: list[GameOutcome] = field(default_factory=list, repr=False)
    """Per episode, in the order of the seeds (what paired comparisons between policies evaluated on
    the same games need)."""
    played: list[Episode] = field(default_factory=list, repr=False)
    """The episodes themselves, in the order of the seeds, when ``evaluate(keep_episodes=True)``
    (``episode_log`` turns them into what an agent did, step by step); empty otherwise."""

    def metrics(self, prefix: str = "eval") -> dict[str, float]:
        """Flat namespaced metrics (``eval/success``, ``eval/success/<family>``, …)."""
        out = {
            f"{prefix}/success": self.success,
            f"{prefix}/episode_length": self.episode_length,
            f"{prefix}/invalid_ratio": self.invalid_ratio,
            f"{prefix}/return": self.env_return,
            f"{prefix}/terminated": self.terminated,
            f"{prefix}/episodes": float(self.episodes),
            f"{prefix}/crashed": float(self.crashed),
        }
        for fam, rate in sorted(self.per_family.items()):
            out[f"{prefix}/success/{fam}"] = rate
        return out


def summarize_episodes(episodes: list[Episode]) -> EvalStats:
    """Success overall and per family, mean length and invalid-step ratio of the episodes played to
    their end; episodes whose environment failed are counted apart (``crashed``), not as failures.

    Raises:
      RuntimeError when every episode's environment failed (with the first failure's message).
    """
    if not episodes:
        raise ValueError("no episodes to summarize")
    played = [e for e in episodes if e.error is None]
    if not played:
        raise RuntimeError(f"every one of {len(episodes)} episodes failed in its environment; the first: "
                           f"{episodes[0].error}")
    fam: dict[str, list[bool]] = defaultdict(list)
    for e in played:
        fam[e.task_type or "unknown"].append(e.won)
    steps = sum(e.length for e in played)
    outcomes = [GameOutcome.of(e) for e in episodes]
    return EvalStats(
        success=sum(e.won for e in played) / len(played),
        per_family={k: sum(v) / len(v) for k, v in fam.items()},
        episode_length=steps / len(played),
        invalid_ratio=sum(e.invalid for e in played) / max(1, steps),
        env_return=sum(e.env_return for e in played) / len(played),
        terminated=sum(e.done and not e.truncated for e in played) / len(played),
        episodes=len(played),
        crashed=len(episodes) - len(played),
        outcomes=outcomes,
    )


def evaluate(
    policy: SamplingPolicy,
    pool: EnvPool,
    seeds: list[int],
    rollout_cfg: RolloutConfig,
    *,
    temperature: float,
    top_p: float,
    generator: torch.Generator | None = None,
    keep_episodes: bool = False,
) -> EvalStats:
    """Play every seed once with the policy (chunks of the pool's size), without gradients;
    ``keep_episodes``: keep the episodes in ``EvalStats.played``."""
    t0 = time.perf_counter()
    agent = rollout_cfg.agent(policy, pool, generator, temperature=temperature, top_p=top_p)
    with torch.no_grad():
        played = play_episodes(pool, seeds, agent)
    stats = summarize_episodes(played.episodes)
    if keep_episodes:
        stats.played = played.episodes
    stats.forward_passes = agent.forward_passes
    stats.seconds = time.perf_counter() - t0
    return stats


def episode_log(episode: Episode) -> dict[str, Any]:
    """What the agent did in one episode, as one JSON-able record (a line of ``gaca eval --episodes``).

    Keys: ``seed``, ``task_id``, ``family``, ``task``, ``won``, ``env_return``, ``length``,
    ``truncated`` (ended by the step limit), ``error`` (the environment's failure, or None), and
    ``steps``: per step the ``observation`` the agent answered, its ``action``, whether the
    environment accepted it (``valid``), the ``reward``, and, for a policy that chose among the
    admissible actions, ``candidates`` (how many) and ``p`` = π(a | s) of the chosen action at the
    sampling temperature (None otherwise).
    """
    steps = []
    for step in episode.steps:
        payload = step.decision.payload
        logprob = getattr(payload, "decision_logprob", None)  # choose mode's ChosenAction
        actions = getattr(payload, "actions", None)
        steps.append({"observation": step.turn.observation, "action": step.decision.action,
                      "valid": not step.invalid, "reward": float(step.outcome.reward),
                      "candidates": None if actions is None else len(actions),
                      "p": None if logprob is None else math.exp(logprob)})
    return {"seed": episode.seed, "task_id": episode.task_id, "family": episode.task_type or "unknown",
            "task": episode.task, "won": episode.won, "env_return": float(episode.env_return),
            "length": episode.length, "truncated": episode.truncated, "error": episode.error, "steps": steps}


__all__ = ["EvalStats", "GameOutcome", "episode_log", "evaluate", "summarize_episodes"]
