"""The text-environment protocol every gaca environment implements.

Gymnasium conventions, with text observations and text actions:

    obs, info = env.reset(seed=s)
    obs, reward, terminated, truncated, info = env.step(action)

``info`` always carries the keys in ``INFO_KEYS``; environments know nothing of models.
The same seed selects the same task and the same initial state, which is what lets a group of N
copies of one environment start from one state (the episode group of GRPO/GiGPO/GACA).
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

INFO_KEYS = (
    "task",                # str: the goal text shown to the agent ("put a clean mug in coffeemachine.")
    "task_id",             # str: stable id of the game/task (used in logs and error messages)
    "task_type",           # str: family of the task (e.g. ALFWorld's "pick_clean_then_place")
    "admissible_actions",  # list[str]: the actions the environment accepts now, in its own order
    "won",                 # bool: the goal is achieved
    "valid",               # bool: the last action was admissible (True after reset)
)


@runtime_checkable
class TextEnv(Protocol):
    """A multi-turn text environment (see module docstring for the contract)."""

    max_steps: int

    def reset(self, *, seed: int, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Start the episode chosen by ``seed``; return (observation, info)."""
        ...

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Apply ``action``; return (observation, reward, terminated, truncated, info).

        ``terminated``: the episode ended by itself (won, or lost for good); no bootstrap.
        ``truncated``: the step limit ``max_steps`` was reached.
        """
        ...

    def close(self) -> None: ...
