"""WebShop (Yao et al. 2022, arXiv:2207.01206) for gaca: the text protocol over a generated catalogue.

``make_env("webshop", split=...)`` builds the offline shop (``WebShopEnv``): WebShop's pages, actions,
BM25 search and reward over a seeded catalogue of generated products; ``backend="real"`` wraps the
original ``web_agent_site`` text environment instead, for users who have it installed. Settings:
``WebShopConfig``. Reference agents (the oracle, a random shopper): ``gaca.testing.agents``.
"""

from __future__ import annotations

from gaca.envs.base import TextEnv
from gaca.envs.webshop.catalog import Catalogue, Goal, Product, get_catalogue
from gaca.envs.webshop.config import WebShopConfig
from gaca.envs.webshop.env import SEARCH_ACTION, WebShopEnv, parse_action, strip_instruction
from gaca.envs.webshop.real import RealWebShopEnv
from gaca.envs.webshop.reward import RewardBreakdown, webshop_reward


def make(config: WebShopConfig, *, split: str, num_games: int | None = None, expert: bool = False) -> TextEnv:
    """The registered factory: a WebShop ``TextEnv`` on ``split`` ("train" or "eval", held-out instructions).

    ``expert``: add ``info["expert_plan"]`` (generated backend only). ``num_games`` is not needed:
    ``reset(seed=s)`` plays instruction ``s`` modulo the split's instructions.
    """
    if config.backend == "generated":
        return WebShopEnv(split=split, seed=config.catalogue_seed, num_products=int(config.num_products or 0),
                          max_steps=config.max_steps, expert=expert, show_instruction=config.show_instruction,
                          lowercase=config.lowercase, search_queries=config.search_queries)
    if expert:
        raise ValueError("expert=True needs the generated backend (the real WebShop has no oracle here)")
    return RealWebShopEnv(split=split, num_products=config.num_products, max_steps=config.max_steps,
                          human_goals=True if config.human_goals is None else config.human_goals)


def product_ids(config: WebShopConfig) -> list[str]:
    """The generated catalogue's product ids as pages and actions write them: ``click[b0xj84b7m6]``
    always, ``B0XJ84B7M6`` on results pages unless ``config.lowercase`` (the registry's ``names``)."""
    if config.backend != "generated":
        raise ValueError("env.backend='real': the real WebShop's product ids are not known before it is set up")
    ids = get_catalogue(int(config.num_products or 0), config.catalogue_seed).by_asin
    return sorted({form for asin in ids for form in ((asin.lower(),) if config.lowercase else (asin, asin.lower()))})


__all__ = [
    "SEARCH_ACTION",
    "Catalogue",
    "Goal",
    "Product",
    "RealWebShopEnv",
    "RewardBreakdown",
    "WebShopConfig",
    "WebShopEnv",
    "get_catalogue",
    "make",
    "parse_action",
    "product_ids",
    "strip_instruction",
    "webshop_reward",
]
