"""WebShop's settings (the ``[env]`` table with ``name = "webshop"``); importable without ``rank_bm25``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gaca.envs.config import EnvConfig


@dataclass(frozen=True)
class WebShopConfig(EnvConfig):
    """WebShop (Yao et al. 2022, arXiv:2207.01206): instructions to shop for, over a product catalogue.

    ``reset(seed=s)`` plays instruction ``s % (instructions of the split)``; the game counts
    (``num_train_games``, ``num_eval_games``) set how many distinct instructions the trainer uses.
    """

    name: str = "webshop"
    intro: str = ("You are an expert agent shopping on a web store (WebShop). On the search page you write "
                  "your own query, search[a few words of what you want]; on every other page you click one of "
                  "the listed elements, click[element].")
    max_steps: int = 15
    backend: Literal["generated", "real"] = "generated"
    """``generated``: WebShop's pages, actions, search and reward over a generated catalogue (offline);
    ``real``: the original ``web_agent_site`` text environment, which you must install and set up."""
    catalogue_seed: int = 0
    """Generated backend: seed of the catalogue (products, instructions and their split)."""
    num_products: int | None = 2400
    """Catalogue size (generated: >= 30, about 80 products per type at 2,400; real: None = all)."""
    show_instruction: bool = False
    """Generated backend: keep the instruction in every page's observation, as WebShop's text does;
    false: drop it, as verl-agent's prompt does (the prompt's task line states it once)."""
    lowercase: bool = False
    """Generated backend: lowercase every page, so product ids, titles and options read exactly as the
    instruction and the click actions write them (``B0XJ84B7M6`` on the page is ``click[b0xj84b7m6]``).
    WebShop's text keeps the catalogue's case (a pretrained model maps it); a model trained from
    scratch must otherwise learn the case mapping before it can copy an id."""
    search_queries: Literal["free", "instruction"] = "free"
    """Generated backend: what the search page accepts. ``free``: any query, listed as the placeholder
    ``search[<your query>]`` (the agent writes its own, as in WebShop). ``instruction``: the few queries
    built from the instruction's text (``gaca.envs.webshop.queries``), each listed; the oracle searches
    the best of them. Choosing among admissible actions (``rollout.action_mode="choose"``) needs it."""
    human_goals: bool | None = None
    """Real backend: WebShop's human-written instructions (true, WebShop's default when unset) or its
    synthetic ones (false)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.backend == "generated" and self.human_goals is not None:
            raise ValueError("env.human_goals is a setting of the real WebShop (env.backend='real')")
        if self.backend == "real" and self.lowercase:
            raise ValueError("env.lowercase is a setting of the generated WebShop (env.backend='generated')")
        if self.backend == "real" and self.search_queries != "free":
            raise ValueError("env.search_queries='instruction' is a setting of the generated WebShop "
                             "(env.backend='generated')")
        if self.backend == "generated" and (self.num_products is None or self.num_products < 30):
            raise ValueError(f"env.num_products must be >= 30 for the generated catalogue, got {self.num_products}")

    def unlisted_actions(self) -> str | None:
        if self.search_queries == "free":
            return ("WebShop's search page takes any query (search[<your query>]): set "
                    "env.search_queries='instruction' to list queries built from the instruction")
        return None


__all__ = ["WebShopConfig"]
