"""WebShop (Yao et al. 2022, arXiv:2207.01206) for gaca: the text protocol over a generated catalogue.

``make(**kwargs)`` builds the offline shop (``WebShopEnv``): WebShop's pages, actions, BM25 search
and reward over a seeded catalogue of generated products. ``make(backend="real", ...)`` wraps the
original ``web_agent_site`` text environment instead, for users who have it installed.
"""

from __future__ import annotations

from typing import Any, Literal

from gaca.envs.base import TextEnv
from gaca.envs.webshop.agents import OracleAgent, RandomAgent
from gaca.envs.webshop.catalog import Catalogue, Goal, Product, get_catalogue
from gaca.envs.webshop.env import SEARCH_ACTION, WebShopEnv, parse_action, strip_instruction
from gaca.envs.webshop.real import RealWebShopEnv
from gaca.envs.webshop.reward import RewardBreakdown, webshop_reward


def make(
    split: Literal["train", "eval"] = "train",
    seed: int = 0,
    num_products: int = 2400,
    max_steps: int = 15,
    expert: bool = False,
    backend: Literal["generated", "real"] = "generated",
    **real_kwargs: Any,
) -> TextEnv:
    """Build a WebShop environment.

    Args:
      split: "train" or "eval" (held-out instruction templates and target products).
      seed: catalogue seed (generated backend); episodes are chosen by ``reset(seed=...)``.
      num_products: catalogue size (generated) or WebShop's ``num_products`` (real; None = all).
      max_steps: step limit (verl-agent uses 15).
      expert: add ``info["expert_plan"]`` (generated backend only).
      backend: "generated" (offline catalogue) or "real" (``web_agent_site``, see ``RealWebShopEnv``).
      real_kwargs: passed to ``RealWebShopEnv`` (e.g. ``human_goals``, ``env_kwargs``).
    """
    if backend == "generated":
        if real_kwargs:
            raise TypeError(f"unexpected options for the generated shop: {sorted(real_kwargs)}")
        return WebShopEnv(split=split, seed=seed, num_products=num_products, max_steps=max_steps, expert=expert)
    if backend == "real":
        if expert:
            raise ValueError("expert=True needs the generated backend (the real WebShop has no oracle here)")
        return RealWebShopEnv(split=split, num_products=num_products, max_steps=max_steps, **real_kwargs)
    raise ValueError(f"backend must be 'generated' or 'real', got {backend!r}")


__all__ = [
    "SEARCH_ACTION",
    "Catalogue",
    "Goal",
    "OracleAgent",
    "Product",
    "RandomAgent",
    "RealWebShopEnv",
    "RewardBreakdown",
    "WebShopEnv",
    "get_catalogue",
    "make",
    "parse_action",
    "strip_instruction",
    "webshop_reward",
]
