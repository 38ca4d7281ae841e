"""Reference agents for tests and baselines: the planner expert and a uniform random agent.

    agent = ExpertAgent()                 # needs an env made with expert=True (info["expert_plan"])
    stats = play_episode(env, agent, seed=3)
    stats["won"], stats["steps"], stats["return"]

Agents see only what a policy sees (observation text and ``info``), through ``act(obs, info)``.
"""

from __future__ import annotations

import random
from typing import Any, Protocol

from gaca.envs.base import TextEnv


class Agent(Protocol):
    """Anything with ``act(obs, info) -> action``; ``reset(seed)`` is optional."""

    def act(self, obs: str, info: dict[str, Any]) -> str: ...


class ExpertAgent:
    """Follows the environment's expert: the first action of ``info["expert_plan"]``.

    Falls back to ``fallback`` (``"look"``) when the plan is empty (e.g. the planner found none).
    """

    def __init__(self, fallback: str = "look") -> None:
        self.fallback = fallback

    def act(self, obs: str, info: dict[str, Any]) -> str:
        if "expert_plan" not in info:
            raise KeyError("info has no 'expert_plan': make the env with expert=True")
        plan = info["expert_plan"]
        return plan[0] if plan else self.fallback


class RandomAgent:
    """Uniform over ``info["admissible_actions"]``; reproducible from ``seed``.

    ``reset(episode_seed)`` re-seeds from (seed, episode_seed), so an episode's actions do not
    depend on what the agent played before (``play_episode`` calls it).
    """

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self.rng = random.Random(seed)

    def reset(self, episode_seed: int) -> None:
        self.rng = random.Random(f"{self.seed}|{episode_seed}")

    def act(self, obs: str, info: dict[str, Any]) -> str:
        actions = info["admissible_actions"]
        if not actions:
            return "look"
        return self.rng.choice(actions)


def play_episode(env: TextEnv, agent: Agent, seed: int, max_steps: int | None = None) -> dict[str, Any]:
    """Play one episode of ``env`` (reset with ``seed``) with ``agent``.

    Returns:
      dict with ``won`` (bool), ``steps`` (int), ``return`` (sum of rewards), ``terminated``,
      ``truncated``, ``invalid`` (inadmissible actions taken), ``task_id``, ``task_type``, ``task``,
      ``actions`` (list[str]) and ``observations`` (list[str], the reset text first).
    """
    if hasattr(agent, "reset"):
        agent.reset(seed)  # type: ignore[attr-defined]
    obs, info = env.reset(seed=seed)
    first = info
    limit = max_steps if max_steps is not None else env.max_steps
    actions, observations = [], [obs]
    total, invalid, terminated, truncated = 0.0, 0, False, False
    while not (terminated or truncated) and len(actions) < limit:
        action = agent.act(obs, info)
        obs, reward, terminated, truncated, info = env.step(action)
        actions.append(action)
        observations.append(obs)
        total += reward
        invalid += 0 if info.get("valid", True) else 1
    return {
        "won": bool(info.get("won", False)),
        "steps": len(actions),
        "return": total,
        "terminated": terminated,
        "truncated": truncated,
        "invalid": invalid,
        "task_id": first.get("task_id", ""),
        "task_type": first.get("task_type", ""),
        "task": first.get("task", ""),
        "actions": actions,
        "observations": observations,
    }


__all__ = ["Agent", "ExpertAgent", "RandomAgent", "play_episode"]
