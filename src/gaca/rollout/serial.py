"""An in-process environment pool (no worker processes): the rollout's fallback and test pool.

Same interface as ``gaca.envs.pool.EnvPool``: ``reset(seeds)`` and ``step(actions)`` with None for
environments that sit out the step.
"""

from __future__ import annotations

from typing import Any


class SerialEnvPool:
    """``num_envs`` environments built with ``gaca.envs.make_env(env_name, **env_kwargs)``, stepped in turn."""

    def __init__(self, env_name: str, env_kwargs: dict[str, Any], num_envs: int) -> None:
        from gaca.envs import make_env

        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        self.num_envs = num_envs
        self.envs = [make_env(env_name, **env_kwargs) for _ in range(num_envs)]

    def reset(self, seeds: list[int]) -> list[tuple[str, dict[str, Any]]]:
        """Reset environment i with seeds[i]."""
        if len(seeds) != self.num_envs:
            raise ValueError(f"reset needs {self.num_envs} seeds, got {len(seeds)}")
        return [env.reset(seed=int(s)) for env, s in zip(self.envs, seeds, strict=True)]

    def step(self, actions: list[str | None]) -> list[tuple[str, float, bool, bool, dict[str, Any]] | None]:
        """Step environment i with actions[i]; None leaves it alone (and gives None)."""
        if len(actions) != self.num_envs:
            raise ValueError(f"step needs {self.num_envs} actions, got {len(actions)}")
        return [None if a is None else env.step(a) for env, a in zip(self.envs, actions, strict=True)]

    def close(self) -> None:
        for env in self.envs:
            env.close()


__all__ = ["SerialEnvPool"]
