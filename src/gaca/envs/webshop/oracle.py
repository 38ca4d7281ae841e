"""The shop's oracle: the best next action(s) from any state, for demonstrations and ``OracleAgent``.

The oracle knows the goal and reads every page it could open, but it sees what an agent sees: the
title, features, description, options and price, not the hidden attribute list the reward also
checks (``catalog.SHOW_ATTRIBUTE_PROB``). It can buy only what search shows it, within the top-50
results. Its plan:

1. search the goal's key words (its attributes, then its product type), once (where the search page
   accepts only queries built from the instruction, the one of them whose results look best);
2. page to the first result that visibly satisfies the goal (else the one with the best visible
   score: it may or may not have the missing attributes hidden), open it;
3. select each goal option the item offers, then ``Buy Now``.

From a state off that path (another query, another item, a sub page) it first returns to it
(``< Prev`` or ``Back to Search``). It fails when no top-50 result visibly satisfies the goal
and its best guess lacks a hidden attribute, or an option, or the price.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from gaca.envs.webshop.catalog import Catalogue, Goal, Product
from gaca.envs.webshop.reward import fuzzy_match, normalize_color, webshop_reward

RESULTS_PER_PAGE = 10


def choose_options(product_options: dict[str, tuple[str, ...]], goal_options: dict[str, str]) -> dict[str, str]:
    """For each goal option, the item's value that matches it (same group first; exact before fuzzy)."""
    chosen: dict[str, str] = {}
    for group, want in goal_options.items():
        groups = [group] + [g for g in product_options if g != group]
        pick = None
        for g in groups:
            if g not in product_options or g in chosen:
                continue
            vals = product_options[g]
            exact = [v for v in vals if v == want]
            fuzzy = [v for v in vals if fuzzy_match(normalize_color(v), normalize_color(want))]
            if exact or fuzzy:
                pick = (g, (exact or fuzzy)[0])
                break
        if pick is not None:
            chosen[pick[0]] = pick[1]
    return chosen


@dataclass(frozen=True)
class OraclePlan:
    """What the oracle will search, buy and select for one goal."""

    query: str
    asin: str | None  # None: the query returned nothing
    rank: int  # position of ``asin`` in the query's results (0-based)
    options: dict[str, str]
    visible_reward: float  # the reward as judged from the pages (hidden attributes count as missing)
    reward: float  # the reward the plan really earns


def oracle_query(goal: Goal) -> str:
    """The oracle's search: the goal's attributes followed by its product type."""
    return " ".join((*goal.attributes, goal.type_name))


def make_plan(catalogue: Catalogue, goal: Goal, queries: Sequence[str] | None = None) -> OraclePlan:
    """The oracle's plan for ``goal``: the first perfect result of its one query, else the best one.

    ``queries``: the search page accepts only these (``search_queries="instruction"``); the oracle
    plans with each and keeps the plan whose result looks best (the first such query on a tie).
    """
    if queries is None:
        return _plan_for_query(catalogue, goal, oracle_query(goal))
    plans = [_plan_for_query(catalogue, goal, q) for q in queries]
    return max(plans, key=lambda p: p.visible_reward)


def visible_reward(product: Product, goal: Goal, options: dict[str, str]) -> float:
    """The reward as an agent reading the pages can judge it: hidden attributes count as missing."""
    return webshop_reward(replace(product, attributes=()), goal, options).reward


def _plan_for_query(catalogue: Catalogue, goal: Goal, query: str) -> OraclePlan:
    results = catalogue.search(query)
    best = OraclePlan(query=query, asin=None, rank=-1, options={}, visible_reward=-1.0, reward=0.0)
    for rank, asin in enumerate(results):
        p = catalogue.by_asin[asin]
        options = choose_options(p.options, goal.options)
        r = visible_reward(p, goal, options)
        if r > best.visible_reward:
            true = webshop_reward(p, goal, options).reward
            best = OraclePlan(query=query, asin=asin, rank=rank, options=options, visible_reward=r, reward=true)
            if r == 1.0:
                break
    return best


def next_actions(plan: OraclePlan, page: str, keywords: str | None, page_no: int, asin: str | None,
                 selected: dict[str, str], catalogue: Catalogue, goal: Goal) -> list[str]:
    """The oracle's next action(s) from the given page state; all listed are equally good, first is canonical.

    Args:
      plan: ``make_plan(catalogue, goal)``.
      page: "search" | "results" | "item" | "sub" | "done".
      keywords: the normalized query of the current results (None before any search).
      page_no: current results page (1-based).
      asin: the open item, if any.
      selected: the options selected on the open item.
    """
    if page == "done":
        return []
    if page == "search":
        return [f"search[{plan.query}]"]
    if page == "sub":
        return ["click[< prev]"]
    if page == "item":
        target = asin == plan.asin
        options = plan.options
        if not target and asin is not None:  # another item that visibly satisfies the goal is fine
            p = catalogue.by_asin[asin]
            own = choose_options(p.options, goal.options)
            if visible_reward(p, goal, own) == 1.0:
                target, options = True, own
        if not target:
            return ["click[< prev]"]
        missing = [v for g, v in options.items() if selected.get(g) != v]
        return [f"click[{v}]" for v in missing] if missing else ["click[buy now]"]
    # results page
    if keywords != " ".join(plan.query.lower().split()) or plan.asin is None:
        return ["click[back to search]"]
    target_page = plan.rank // RESULTS_PER_PAGE + 1
    if target_page == page_no:
        return [f"click[{plan.asin.lower()}]"]
    return ["click[next >]"] if target_page > page_no else ["click[< prev]"]


__all__ = ["OraclePlan", "choose_options", "make_plan", "next_actions", "oracle_query", "visible_reward"]
