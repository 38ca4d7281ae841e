"""WebShop's text-mode interaction over the generated catalogue, page for page.

Pages and their admissible actions (lowercase, as WebShop's clickables; matching ignores case and
repeated spaces):

==========  ==================================================================================
search      ``search[<your query>]`` (any non-empty query)
results     ``click[back to search]``, ``click[< prev]`` (page > 1), ``click[next >]`` (more pages),
            ``click[<asin>]`` for each of the (up to 10) products shown
item        ``click[back to search]``, ``click[< prev]`` (back to the results), ``click[description]``,
            ``click[features]``, ``click[reviews]``, ``click[buy now]``, ``click[<option value>]``
sub         (description / features / reviews) ``click[back to search]``, ``click[< prev]``
done        none: the episode is over
==========  ==================================================================================

Observations are WebShop's ``observation_mode="text"`` strings: the page's visible texts joined by
`` [SEP] ``, the instruction on every page (``strip_instruction`` drops it, as verl-agent does);
as there, selected options are not marked on the item page. Search returns the top 50 BM25 results, 10 per page.
``Buy Now`` ends the episode with the WebShop reward (``reward.webshop_reward``); ``won`` is reward
== 1. An inadmissible or unparsable action changes nothing (same page, same observation, reward 0,
``valid`` False) but does use up one of the ``max_steps`` steps (15 in verl-agent's setting), after
which the episode is truncated with reward 0.

Two deliberate departures from the original server, both removing bugs rather than behaviour:
searching is admissible only on the search page (WebShop's text env silently accepts a search from
any page), and option values match case-insensitively (WebShop lowercases the action argument but
not the option names, so options with capitals could not be clicked).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Any

from gaca.envs.webshop.catalog import Catalogue, Goal, Split, get_catalogue
from gaca.envs.webshop.oracle import RESULTS_PER_PAGE, OraclePlan, make_plan, next_actions
from gaca.envs.webshop.queries import instruction_queries
from gaca.envs.webshop.reward import webshop_reward

logger = logging.getLogger(__name__)

SEARCH_ACTION = "search[<your query>]"
"""How the search action appears in ``admissible_actions`` (verl-agent's spelling)."""
SEP = " [SEP] "
SUB_PAGES = ("description", "features", "reviews")
_ACTION_RE = re.compile(r"^\s*(search|click)\s*\[(.*)\]\s*$", re.IGNORECASE | re.DOTALL)


def parse_action(action: str) -> tuple[str, str] | None:
    """``"click[ Buy  Now ]"`` -> ``("click", "buy now")``; None when not ``search[...]``/``click[...]``."""
    m = _ACTION_RE.match(action)
    if m is None:
        return None
    return m.group(1).lower(), " ".join(m.group(2).lower().split())


def strip_instruction(obs: str, task: str) -> str:
    """The page text after the instruction (verl-agent's prompt form); ``obs`` unchanged if absent.

    ``"WebShop [SEP] Instruction: [SEP] i need … [SEP] Search"`` -> ``"Search"``.
    """
    marker = f"Instruction:{SEP}{task}{SEP}"
    i = obs.find(marker)
    return obs if i < 0 else obs[i + len(marker):]


@dataclass
class PageState:
    """Where the agent is: everything the next observation and the admissible actions depend on."""

    page: str = "search"  # search | results | item | sub | done
    keywords: str | None = None
    results: tuple[str, ...] = ()
    page_no: int = 1
    asin: str | None = None
    options: dict[str, str] = field(default_factory=dict)
    sub: str | None = None


class WebShopEnv:
    """The WebShop protocol over a generated catalogue (a ``gaca.envs.base.TextEnv``).

    Args:
      split: "train" or "eval"; eval goals use held-out instruction templates and target products.
      seed: catalogue seed (products, goals and their split), not the episode seed.
      num_products: catalogue size (>= 30; the default 2,400 gives about 80 products per type).
      max_steps: step limit; reaching it truncates the episode.
      expert: add ``info["expert_plan"]``, the oracle's next action(s) from the current state.
      show_instruction: keep the instruction in every observation (WebShop's text); False: drop it
        (``strip_instruction``; the agent's prompt states the task already).
      lowercase: lowercase every page (ids, titles and options as the click actions write them).
      search_queries: ``"free"`` (any query) or ``"instruction"`` (the queries built from the instruction,
        ``gaca.envs.webshop.queries``, each listed; the oracle searches the best of them).
    """

    def __init__(self, split: Split = "train", seed: int = 0, num_products: int = 2400, max_steps: int = 15,
                 expert: bool = False, show_instruction: bool = True, lowercase: bool = False,
                 search_queries: str = "free") -> None:
        if split not in ("train", "eval"):
            raise ValueError(f"split must be 'train' or 'eval', got {split!r}")
        if max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {max_steps}")
        if search_queries not in ("free", "instruction"):
            raise ValueError(f"search_queries must be 'free' or 'instruction', got {search_queries!r}")
        self.search_queries = search_queries
        self.split = split
        self.seed = seed
        self.max_steps = max_steps
        self.expert = expert
        self.show_instruction = show_instruction
        self.lowercase = lowercase
        self.catalogue: Catalogue = get_catalogue(num_products, seed)
        self.goals: list[Goal] = self.catalogue.goals[split]
        self._plans: dict[int, OraclePlan] = {}
        self.goal: Goal | None = None
        self.state = PageState()
        self._steps = 0
        self._over = True
        self._obs = ""

    # ------------------------------------------------------------------ protocol
    @property
    def num_goals(self) -> int:
        """Number of goals in this split; ``reset(seed=s)`` plays goal ``s % num_goals``."""
        return len(self.goals)

    def reset(self, *, seed: int, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Start goal ``seed % num_goals`` of the split on the search page.

        ``options={"goal_index": i}`` picks goal i explicitly instead.
        """
        index = int((options or {}).get("goal_index", seed))
        if index < 0:
            raise ValueError(f"seed/goal_index must be >= 0, got {index}")
        self.goal = self.goals[index % len(self.goals)]
        self.state = PageState()
        self._steps = 0
        self._over = False
        self._obs = self._observation()
        return self._obs, self._info(valid=True, won=False)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Apply ``action`` (``search[...]`` or ``click[...]``); see the module docstring."""
        if self._over:
            raise RuntimeError("the episode is over (bought or truncated); call reset() first")
        self._steps += 1
        valid, reward, bought = self._apply(action)
        extra: dict[str, Any] = {}
        if bought is not None:
            extra["reward_info"] = bought
        self._obs = self._observation()
        terminated = self.state.page == "done"
        truncated = not terminated and self._steps >= self.max_steps
        self._over = terminated or truncated
        info = self._info(valid=valid, won=terminated and reward == 1.0, **extra)
        return self._obs, reward, terminated, truncated, info

    def close(self) -> None:
        """Nothing to release (the catalogue is shared)."""

    # ------------------------------------------------------------------ actions
    def clickables(self) -> list[str]:
        """The click targets of the current page, lowercase, in page order (empty on search/done)."""
        s = self.state
        if s.page == "results":
            out = ["back to search"]
            if s.page_no > 1:
                out.append("< prev")
            if s.page_no * RESULTS_PER_PAGE < len(s.results):
                out.append("next >")
            return out + [a.lower() for a in self._page_asins()]
        if s.page == "item":
            out = ["back to search", "< prev", *SUB_PAGES, "buy now"]
            p = self.catalogue.by_asin[s.asin]  # type: ignore[index]
            return out + [v.lower() for vals in p.options.values() for v in vals]
        if s.page == "sub":
            return ["back to search", "< prev"]
        return []

    def queries(self) -> tuple[str, ...] | None:
        """The queries the search page accepts (``search_queries="instruction"``); None: any query."""
        if self.search_queries == "free" or self.goal is None:
            return None
        return instruction_queries(self.goal.instruction)

    def admissible_actions(self) -> list[str]:
        """On the search page ``search[<your query>]`` (free queries) or ``search[q]`` for each offered
        query; elsewhere ``click[x]`` for each clickable x."""
        if self.state.page == "search":
            queries = self.queries()
            return [SEARCH_ACTION] if queries is None else [f"search[{q}]" for q in queries]
        return [f"click[{c}]" for c in self.clickables()]

    def _page_asins(self) -> tuple[str, ...]:
        s = self.state
        start = (s.page_no - 1) * RESULTS_PER_PAGE
        return s.results[start:start + RESULTS_PER_PAGE]

    def _apply(self, action: str) -> tuple[bool, float, dict[str, Any] | None]:
        """Change the state for ``action``; return (valid, reward, reward breakdown if bought)."""
        parsed = parse_action(action) if isinstance(action, str) else None
        if parsed is None:
            return False, 0.0, None
        name, arg = parsed
        s = self.state
        if name == "search":
            queries = self.queries()
            offered = queries is None or arg in {" ".join(q.lower().split()) for q in queries}
            if s.page != "search" or not arg or not offered:
                return False, 0.0, None
            self.state = PageState(page="results", keywords=arg, results=self.catalogue.search(arg))
            return True, 0.0, None
        if arg not in self.clickables():
            return False, 0.0, None
        if arg == "back to search":
            self.state = PageState()
        elif s.page == "results":
            if arg == "next >":
                s.page_no += 1
            elif arg == "< prev":
                s.page_no -= 1
            else:
                s.page, s.asin, s.options = "item", arg.upper(), {}
        elif s.page == "item":
            if arg == "< prev":
                s.page, s.asin, s.options = "results", None, {}
            elif arg in SUB_PAGES:
                s.page, s.sub = "sub", arg
            elif arg == "buy now":
                assert self.goal is not None and s.asin is not None
                product = self.catalogue.by_asin[s.asin]
                breakdown = webshop_reward(product, self.goal, s.options)
                s.page = "done"
                return True, breakdown.reward, breakdown.as_dict()
            else:  # an option value: select it in its group
                p = self.catalogue.by_asin[s.asin]  # type: ignore[index]
                for group, vals in p.options.items():
                    for v in vals:
                        if v.lower() == arg:
                            s.options[group] = v
        elif s.page == "sub":  # "< prev" back to the item
            s.page, s.sub = "item", None
        return True, 0.0, None

    # ------------------------------------------------------------------ observations
    def _observation(self) -> str:
        page = self._render()
        if not self.show_instruction and self.goal is not None:
            page = strip_instruction(page, self.goal.instruction)
        return SEP.join(part.lower() for part in page.split(SEP)) if self.lowercase else page

    def _render(self) -> str:
        s, goal = self.state, self.goal
        assert goal is not None
        head = ["Instruction:", goal.instruction]
        if s.page == "search":
            return SEP.join(["WebShop", *head, "Search"])
        if s.page == "results":
            parts = [*head, "Back to Search", f"Page {s.page_no} (Total results: {len(s.results)})"]
            if s.page_no > 1:
                parts.append("< Prev")
            if s.page_no * RESULTS_PER_PAGE < len(s.results):
                parts.append("Next >")
            for asin in self._page_asins():
                p = self.catalogue.by_asin[asin]
                parts += [asin, p.title, f"${p.price:.2f}"]
            return SEP.join(parts)
        p = self.catalogue.by_asin[s.asin]  # type: ignore[index]
        if s.page == "item":
            parts = [*head, "Back to Search", "< Prev"]
            for group, vals in p.options.items():
                parts += [group, *vals]
            parts += [p.title, f"Price: ${p.price:.2f}", "Rating: N.A.", "Description", "Features", "Reviews",
                      "Buy Now"]
            return SEP.join(parts)
        if s.page == "sub":
            if s.sub == "description":
                body = [p.description]
            elif s.sub == "features":
                body = list(p.bullet_points)
            else:
                body = [x for rating, text in p.reviews for x in (f"Rating: {rating:.1f}", text)]
            return SEP.join([*head, "Back to Search", "< Prev", *body])
        opts = ", ".join(f"{g}: {v}" for g, v in s.options.items()) or "none"
        return SEP.join(["Thank you for shopping with us!", "Purchased", "asin", p.asin, "options", opts])

    def state_key(self) -> str:
        """Everything the shop's next pages depend on: page, query, result page, item, the options
        selected so far (which the page text does not show) and the open sub page."""
        s = self.state
        options = ",".join(f"{k}={v}" for k, v in sorted(s.options.items()))
        return f"{s.page}|{s.keywords}|{s.page_no}|{s.asin}|{options}|{s.sub}"

    def _info(self, *, valid: bool, won: bool, **extra: Any) -> dict[str, Any]:
        goal = self.goal
        assert goal is not None
        info: dict[str, Any] = {
            "task": goal.instruction,
            "task_id": f"webshop/{self.split}/s{self.seed}/{goal.index}",
            "task_type": goal.category,
            "admissible_actions": self.admissible_actions(),
            "won": won,
            "valid": valid,
            "page": self.state.page,
            "goal_index": goal.index,
            "state_key": self.state_key(),
            **extra,
        }
        if self.expert:
            info["expert_plan"] = self.expert_plan()
        return info

    def expert_plan(self) -> list[str]:
        """The oracle's next action(s) from the current state (see ``oracle``)."""
        goal = self.goal
        assert goal is not None
        plan = self._plans.get(goal.index)
        if plan is None:
            plan = self._plans[goal.index] = make_plan(self.catalogue, goal, self.queries())
        s = self.state
        return next_actions(plan, s.page, s.keywords, s.page_no, s.asin, s.options, self.catalogue, goal)


__all__ = ["SEARCH_ACTION", "PageState", "WebShopEnv", "parse_action", "strip_instruction"]
