"""An environment family that fails on purpose: fault-tolerance tests and drills of ``EnvPool``.

    spec = env_spec(FaultyConfig(inner=AlfworldConfig(), crash_at_step=2), "train", 6)

``crash_at_step=k`` makes the wrapped environment raise ``RuntimeError`` on the k-th step of every
episode (``k = 0``: in ``reset``); ``mode="exit"`` kills the whole process instead (``os._exit(3)``),
as a segfault of an engine would. Importing this module registers the family ``faulty``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Literal

from gaca.envs import AlfworldConfig, EnvConfig, EnvSpec, register_env
from gaca.envs.base import TextEnv


@dataclass(frozen=True)
class FaultyConfig(EnvConfig):
    """Another environment, with a planted failure."""

    name: str = "faulty"
    inner: EnvConfig = field(default_factory=AlfworldConfig)
    """The environment that is wrapped."""
    crash_at_step: int | None = None
    """Fail on this step of every episode (0: in ``reset``; None: never)."""
    mode: Literal["raise", "exit"] = "raise"
    """``raise``: a ``RuntimeError``; ``exit``: ``os._exit(3)``, the whole process dies."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.mode not in ("raise", "exit"):
            raise ValueError(f"mode must be 'raise' or 'exit', got {self.mode!r}")


class FaultyEnv:
    """Wraps ``inner`` and fails as ``FaultyConfig`` says."""

    def __init__(self, inner: TextEnv, crash_at_step: int | None, mode: str) -> None:
        self.env, self.crash_at_step, self.mode = inner, crash_at_step, mode
        self.max_steps = inner.max_steps
        self._t = 0

    def _maybe_crash(self) -> None:
        if self.crash_at_step is not None and self._t == self.crash_at_step:
            if self.mode == "exit":
                os._exit(3)
            raise RuntimeError(f"planted crash at step {self._t}")

    def reset(self, *, seed: int, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        self._t = 0
        self._maybe_crash()
        return self.env.reset(seed=seed, options=options)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self._t += 1
        self._maybe_crash()
        return self.env.step(action)

    def close(self) -> None:
        self.env.close()


def make_faulty(config: FaultyConfig, *, split: str, num_games: int, expert: bool = False) -> FaultyEnv:
    """The registered factory of ``faulty``."""
    inner = EnvSpec(config.inner, split, num_games, expert).build()
    return FaultyEnv(inner, config.crash_at_step, config.mode)


register_env("faulty", FaultyConfig, make_faulty, replace=True)

__all__ = ["FaultyConfig", "FaultyEnv", "make_faulty"]
