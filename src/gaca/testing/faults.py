"""An environment family that fails on purpose: fault-tolerance tests and drills of ``EnvPool``.

    spec = env_spec(FaultyConfig(inner=AlfworldConfig(), crash_at_step=2), "train", 6)

``crash_at_step=k`` makes the wrapped environment fail on the k-th step of every episode (``k = 0``:
in ``reset``), as ``mode`` says: ``raise`` a ``RuntimeError``; ``exit`` kills the whole process
(``os._exit(3)``), as a segfault of an engine would; ``system_exit`` raises ``SystemExit``; ``hang``
never returns (a Python loop, which a timer signal can interrupt); ``hang_blocked`` never returns
with the timer signal blocked (as a stuck C call); ``unpicklable`` returns an info that cannot be
sent between processes. Importing this module registers the family ``faulty``.
"""

from __future__ import annotations

import os
import signal
import threading
import time
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
    mode: Literal["raise", "exit", "system_exit", "hang", "hang_blocked", "unpicklable"] = "raise"
    """How it fails (see the module docstring)."""



class FaultyEnv:
    """Wraps ``inner`` and fails as ``FaultyConfig`` says."""

    def __init__(self, inner: TextEnv, crash_at_step: int | None, mode: str) -> None:
        self.env, self.crash_at_step, self.mode = inner, crash_at_step, mode
        self.max_steps = inner.max_steps
        self._t = 0

    def _due(self) -> bool:
        return self.crash_at_step is not None and self._t == self.crash_at_step

    def _maybe_crash(self) -> None:
        if not self._due() or self.mode == "unpicklable":
            return
        if self.mode == "exit":
            os._exit(3)
        if self.mode == "system_exit":
            raise SystemExit(4)
        if self.mode == "hang_blocked":
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
        while self.mode.startswith("hang"):
            time.sleep(0.01)
        raise RuntimeError(f"planted crash at step {self._t}")

    def _poison(self, info: dict[str, Any]) -> dict[str, Any]:
        if self._due() and self.mode == "unpicklable":
            return {**info, "handle": threading.Lock()}
        return info

    def reset(self, *, seed: int, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        self._t = 0
        self._maybe_crash()
        obs, info = self.env.reset(seed=seed, options=options)
        return obs, self._poison(info)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self._t += 1
        self._maybe_crash()
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward, terminated, truncated, self._poison(info)

    def close(self) -> None:
        self.env.close()


def make_faulty(config: FaultyConfig, *, split: str, num_games: int, expert: bool = False) -> FaultyEnv:
    """The registered factory of ``faulty``."""
    inner = EnvSpec(config.inner, split, num_games, expert).build()
    return FaultyEnv(inner, config.crash_at_step, config.mode)


register_env("faulty", FaultyConfig, make_faulty, replace=True)

__all__ = ["FaultyConfig", "FaultyEnv", "make_faulty"]
