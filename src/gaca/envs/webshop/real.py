"""Adapter from the original WebShop text environment (``web_agent_site``) to gaca's ``TextEnv``.

For users who have WebShop installed with its product data and search index (the princeton-nlp/WebShop
repository; not on PyPI, whose ``webshop`` package is an empty stub). What the adapter translates:

- ``reset(seed=s)`` plays goal ``goal_ids[s % len(goal_ids)]`` of the split, as verl-agent does:
  eval = WebShop goals 0-499 (its test set), train = goals 500 onward;
- ``admissible_actions`` from ``get_available_actions()``: ``search[<your query>]`` when the page has
  the search bar, ``click[x]`` for every clickable x except the search button itself;
- an action that is not admissible is *not* sent to WebShop (which would silently ignore it, or
  accept a search from any page): the page stays, reward 0, ``valid`` False, one step used;
- ``won`` is reward == 1; the step limit truncates.

This module imports ``web_agent_site`` only when an environment is built, and raises a
``RuntimeError`` naming what is missing otherwise.
"""

from __future__ import annotations

import importlib
import logging
from typing import Any

from gaca.envs.webshop.env import SEARCH_ACTION, parse_action

logger = logging.getLogger(__name__)

REAL_MODULE = "web_agent_site.envs.web_agent_text_env"
EVAL_GOALS = 500
"""The first 500 WebShop goals are the eval split (verl-agent's and WebShop's test set)."""

MISSING_HELP = (
    "backend='real' needs WebShop's `web_agent_site` package, which is not installed or failed to import "
    "({err}). It is not on PyPI (the `webshop` package there is an empty stub): clone the "
    "princeton-nlp/WebShop repository, run its setup.sh (Flask, gym==0.24, pyserini with Java 11, spaCy "
    "with en_core_web_sm, thefuzz, beautifulsoup4), download its product data and build its search index "
    "(`setup.sh -d all` or `-d small`), then put the repository root on PYTHONPATH. "
    "Offline, use the generated shop: make_env('webshop') with the default backend."
)


def _load_text_env_class() -> type:
    try:
        module = importlib.import_module(REAL_MODULE)
    except (ImportError, OSError) as err:  # OSError: e.g. spaCy's model or the index files missing
        raise RuntimeError(MISSING_HELP.format(err=f"{type(err).__name__}: {err}")) from err
    cls = getattr(module, "WebAgentTextEnv", None)
    if cls is None:
        raise RuntimeError(MISSING_HELP.format(err=f"{REAL_MODULE} has no WebAgentTextEnv"))
    return cls


class RealWebShopEnv:
    """The original WebShop text environment behind gaca's ``TextEnv`` protocol.

    Args:
      split: "train" (goals 500+) or "eval" (goals 0-499).
      num_products: WebShop's ``num_products`` (None: the whole catalogue it was set up with).
      max_steps: step limit.
      human_goals: use WebShop's human-written instructions (its default) rather than synthetic ones.
      env_kwargs: further keyword arguments of ``WebAgentTextEnv``.
    """

    def __init__(self, split: str = "train", num_products: int | None = None, max_steps: int = 15,
                 human_goals: bool = True, env_kwargs: dict[str, Any] | None = None) -> None:
        if split not in ("train", "eval"):
            raise ValueError(f"split must be 'train' or 'eval', got {split!r}")
        cls = _load_text_env_class()
        self.split = split
        self.max_steps = max_steps
        self.env = cls(observation_mode="text", num_products=num_products, human_goals=human_goals,
                       **(env_kwargs or {}))
        n_goals = len(self.env.server.goals)
        self.goal_ids = range(0, min(EVAL_GOALS, n_goals)) if split == "eval" else range(EVAL_GOALS, n_goals)
        if len(self.goal_ids) == 0:
            raise RuntimeError(f"WebShop has {n_goals} goals: none left for the {split} split")
        self._goal_id = -1
        self._obs = ""
        self._steps = 0
        self._over = True

    def reset(self, *, seed: int, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Start WebShop goal ``goal_ids[seed % len(goal_ids)]`` (``options={"goal_index": i}`` overrides seed)."""
        index = int((options or {}).get("goal_index", seed))
        if index < 0:
            raise ValueError(f"seed/goal_index must be >= 0, got {index}")
        self._goal_id = self.goal_ids[index % len(self.goal_ids)]
        obs, _ = self.env.reset(session=self._goal_id)
        self._obs, self._steps, self._over = obs, 0, False
        return obs, self._info(valid=True, won=False)

    def admissible_actions(self) -> list[str]:
        """WebShop's available actions in gaca's spelling (see the module docstring)."""
        avail = self.env.get_available_actions()
        out = [SEARCH_ACTION] if avail.get("has_search_bar") else []
        return out + [f"click[{c}]" for c in avail.get("clickables", []) if c != "search"]

    def _is_admissible(self, action: str) -> bool:
        parsed = parse_action(action) if isinstance(action, str) else None
        if parsed is None:
            return False
        name, arg = parsed
        avail = self.env.get_available_actions()
        if name == "search":
            return bool(avail.get("has_search_bar")) and bool(arg)
        return arg != "search" and arg in {c.lower() for c in avail.get("clickables", [])}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Forward an admissible action to WebShop; see the module docstring for the rest."""
        if self._over:
            raise RuntimeError("the episode is over (bought or truncated); call reset() first")
        self._steps += 1
        reward, terminated = 0.0, False
        valid = self._is_admissible(action)
        if valid:
            parsed = parse_action(action)
            assert parsed is not None
            obs, reward, done, _ = self.env.step(f"{parsed[0]}[{parsed[1]}]")
            self._obs, reward, terminated = obs, float(reward), bool(done)
        truncated = not terminated and self._steps >= self.max_steps
        self._over = terminated or truncated
        return self._obs, reward, terminated, truncated, self._info(valid=valid, won=terminated and reward == 1.0)

    def _info(self, *, valid: bool, won: bool) -> dict[str, Any]:
        goal = self.env.server.goals[self._goal_id]
        category = goal.get("category", "webshop") if isinstance(goal, dict) else "webshop"
        return {
            "task": self.env.instruction_text,
            "task_id": f"webshop-real/{self.split}/{self._goal_id}",
            "task_type": category,
            "admissible_actions": [] if self._over else self.admissible_actions(),
            "won": won,
            "valid": valid,
        }

    def close(self) -> None:
        """Close WebShop's simulated browser."""
        close = getattr(self.env, "close", None)
        if close is not None:
            close()


__all__ = ["EVAL_GOALS", "MISSING_HELP", "RealWebShopEnv"]
