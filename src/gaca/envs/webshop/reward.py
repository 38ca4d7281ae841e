"""The WebShop reward (Yao et al. 2022), computed on a purchase.

    r = r_type · (|U_att ∩ Y_att| + |U_opt ∩ Y_opt| + 1[y_price ≤ u_price]) / (|U_att| + |U_opt| + 1)

U is the goal (attributes U_att, options U_opt, price bound u_price), Y the purchased product with
the options the agent selected. A goal attribute counts as matched when a product attribute is a
fuzzy match of it (token-set ratio > 85) or the attribute text occurs in the product's title,
features or description; a goal option counts when a selected option is a fuzzy match of it
(colours normalized first). The type factor r_type ∈ {0, 0.1, 0.5, 1} is 1 when the product has the
goal's search query or shares ≥ 2 category levels or more than 20 % of the goal title's nouns;
0.5 when none of those holds; 0.1 when the noun overlap is below 10 %; 0 when it is zero.

Reference: S. Yao, H. Chen, J. Yang, K. Narasimhan, "WebShop: Towards Scalable Real-World Web
Interaction with Grounded Language Agents", NeurIPS 2022, arXiv:2207.01206, section 3.2 (reward)
and its `web_agent_site/engine/goal.py` (the thresholds above).

Two offline substitutions, both documented where they happen: the fuzzy ratio is the Indel
similarity 2·LCS/(|a|+|b|) (what `thefuzz`/`rapidfuzz` compute) implemented here; spaCy's noun
filter over titles is replaced by ``title_nouns``, a closed word-class list over the generated
catalogue's vocabulary.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

FUZZY_THRESHOLD = 85
"""A fuzzy match needs a token-set ratio strictly above this (WebShop's value)."""

PRICE_RANGE: tuple[float, ...] = tuple(10.0 * i for i in range(1, 100))
"""Candidate price bounds of goals (WebShop's: multiples of 10 dollars)."""

CATEGORY_SEP = "›"

# Colour words, searched in this order: an option value containing one is reduced to it.
COLOR_SET: tuple[str, ...] = (
    "beige", "black", "blue", "brown", "burgundy", "charcoal", "coral", "cream", "gold", "green",
    "grey", "ivory", "khaki", "lavender", "mint", "navy", "olive", "orange", "pink", "purple",
    "red", "silver", "tan", "teal", "white", "yellow",
)

_NON_ALNUM = re.compile(r"[^0-9a-z]+")

# Words that are not nouns in generated titles (function words and the adjectives/participles of
# the catalogue vocabulary). Everything else alphabetic counts as a noun or proper noun.
STOPWORDS: frozenset[str] = frozenset(
    "a an and are as at be by for from in into is it its of on or the to with without your you "
    "that this these those our we us i me my he she they them his her".split()
)
NON_NOUNS: frozenset[str] = frozenset(
    """free natural long lasting dry sensitive anti fragrance oil-free matte waterproof vegan
    moisturizing quick non toxic gentle daily deep clean fresh rechargeable wireless noise cancelling
    water resistant fast charging slim shockproof high speed gold plated braided portable stereo
    built adjustable quick-release stainless breathable lightweight slip rubber arch loose short
    sleeve relaxed stretch tummy wicking four way hooded lined windproof open toe organic gluten
    dairy low sugar keto plant based whole medium dark fair single roasted unsalted resealable
    kosher cold pressed extra virgin ergonomic swivel solid industrial mid century modern cooling
    wrinkle washable hidden decorative soft touch dimmable bedside easy premium classic new
    professional ultra compact durable comfortable everyday casual elegant heavy duty smart true
    mens womens unisex small large color treated tested certified""".split()
)


def _process(text: str) -> str:
    """thefuzz's ``full_process``: lowercase, non-alphanumerics to spaces, trimmed."""
    return _NON_ALNUM.sub(" ", text.lower()).strip()


def tokenize(text: str) -> list[str]:
    """Lowercase alphanumeric tokens of ``text`` (hyphens and punctuation split words)."""
    return _process(text).split()


@lru_cache(maxsize=1 << 16)
def _lcs_len(a: str, b: str) -> int:
    """Length of the longest common subsequence of a and b (O(|a|·|b|) dynamic programme)."""
    if not a or not b:
        return 0
    prev = [0] * (len(b) + 1)
    for ca in a:
        cur = [0]
        for j, cb in enumerate(b, 1):
            cur.append(prev[j - 1] + 1 if ca == cb else max(prev[j], cur[j - 1]))
        prev = cur
    return prev[-1]


def ratio(a: str, b: str) -> int:
    """Indel similarity in [0, 100]: round(100 · 2·LCS(a, b) / (|a| + |b|)); 0 if either is empty."""
    if not a or not b:
        return 0
    return round(100.0 * 2 * _lcs_len(a, b) / (len(a) + len(b)))


@lru_cache(maxsize=1 << 16)
def token_set_ratio(a: str, b: str) -> int:
    """thefuzz's ``token_set_ratio``: the best ratio among intersection-plus-remainder strings.

    With T = sorted(tokens(a) ∩ tokens(b)), A = T + sorted(tokens(a) − tokens(b)) and
    B = T + sorted(tokens(b) − tokens(a)) (space-joined), the result is
    max(ratio(T, A), ratio(T, B), ratio(A, B)); 0 when either string has no tokens.
    """
    ta, tb = set(tokenize(a)), set(tokenize(b))
    if not ta or not tb:
        return 0
    sect = " ".join(sorted(ta & tb))
    ca = " ".join([sect, *sorted(ta - tb)]).strip() if sect else " ".join(sorted(ta - tb))
    cb = " ".join([sect, *sorted(tb - ta)]).strip() if sect else " ".join(sorted(tb - ta))
    return max(ratio(sect, ca), ratio(sect, cb), ratio(ca, cb))


def fuzzy_match(a: str, b: str) -> bool:
    """WebShop's fuzzy equality: token-set ratio strictly above ``FUZZY_THRESHOLD``."""
    return token_set_ratio(a, b) > FUZZY_THRESHOLD


def normalize_color(text: str) -> str:
    """Reduce an option value to the first colour word of ``COLOR_SET`` it contains, else keep it."""
    for color in COLOR_SET:
        if color in text:
            return color
    return text


def title_nouns(title: str) -> list[str]:
    """The noun and proper-noun tokens of a product title, in order, without repeats.

    Stands in for WebShop's spaCy filter (tokens tagged NOUN/PROPN): alphabetic tokens of two or more
    letters that are neither in ``STOPWORDS`` nor in ``NON_NOUNS``. Exact on the generated catalogue's vocabulary,
    a heuristic elsewhere.
    """
    out: list[str] = []
    for tok in tokenize(title):
        if len(tok) > 1 and tok.isalpha() and tok not in STOPWORDS and tok not in NON_NOUNS and tok not in out:
            out.append(tok)
    return out


@dataclass(frozen=True)
class RewardBreakdown:
    """The reward of one purchase and its parts (the ``verbose`` info of WebShop)."""

    reward: float
    r_type: float
    r_att: float | None  # share of goal attributes matched; None when the goal has none
    r_option: float | None  # share of goal options matched; None when the goal has none
    r_price: bool
    num_attr_matches: int
    num_option_matches: int
    query_match: bool
    category_match: bool
    title_score: float

    def as_dict(self) -> dict[str, Any]:
        """A plain dict (for ``info``)."""
        return dict(self.__dict__)


def type_reward(
    product_query: str,
    product_category: str,
    product_nouns: Sequence[str],
    goal_query: str,
    goal_category: str,
    goal_nouns: Sequence[str],
) -> tuple[float, bool, bool, float]:
    """r_type and its evidence: (r_type, query_match, category_match, title_score).

    title_score = |nouns(goal title) ∩ nouns(product title)| / |nouns(goal title)| (0.2 when the goal
    title has no noun); category paths are compared as sets of their ``›``-separated levels.
    """
    query_match = product_query == goal_query
    p_levels = {x.strip() for x in product_category.split(CATEGORY_SEP)}
    g_levels = {x.strip() for x in goal_category.split(CATEGORY_SEP)}
    category_match = len(p_levels & g_levels) >= 2
    desired = set(goal_nouns)
    title_score = 0.2 if not desired else len(set(product_nouns) & desired) / len(desired)
    r_type = 1.0
    if not (query_match or category_match or title_score > 0.2):
        r_type = 0.5
    if title_score < 0.1:
        r_type = 0.1
    if title_score == 0.0:
        r_type = 0.0
    return r_type, query_match, category_match, title_score


def attribute_matches(
    goal_attributes: Sequence[str],
    product_attributes: Sequence[str],
    title: str,
    bullet_points: Sequence[str],
    description: str,
) -> int:
    """Number of goal attributes found in the product (fuzzy in its attributes, else as text)."""
    title_l, bullets_l, desc_l = title.lower(), " ".join(bullet_points).lower(), description.lower()
    n = 0
    for g in goal_attributes:
        if any(fuzzy_match(p, g) for p in product_attributes) or g in title_l or g in bullets_l or g in desc_l:
            n += 1
    return n


def option_matches(goal_options: Iterable[str], selected_options: Iterable[str]) -> int:
    """Number of goal option values matched (fuzzily, after colour normalization) by a selection."""
    selected = [normalize_color(o) for o in selected_options]
    n = 0
    for g in (normalize_color(o) for o in goal_options):
        if any(fuzzy_match(p, g) for p in selected):
            n += 1
    return n


def webshop_reward(
    product: Mapping[str, Any],
    goal: Mapping[str, Any],
    selected_options: Mapping[str, str],
) -> RewardBreakdown:
    """The WebShop reward of buying ``product`` with ``selected_options`` for ``goal``.

    Args:
      product: keys ``query``, ``product_category``, ``nouns`` (title nouns), ``attributes``, ``title``,
        ``bullet_points``, ``description``, ``price``.
      goal: keys ``query``, ``product_category``, ``nouns`` (nouns of the goal product's title),
        ``attributes``, ``options`` (option group -> value), ``price_upper`` (``inf``: no bound).
      selected_options: option group -> value chosen on the item page.
    Returns:
      The breakdown; ``reward`` is in [0, 1] and equals 1.0 exactly iff everything matched.
    """
    r_type, query_match, category_match, title_score = type_reward(
        product["query"], product["product_category"], product["nouns"],
        goal["query"], goal["product_category"], goal["nouns"],
    )
    goal_attrs = list(goal["attributes"])
    goal_opts = list(goal["options"].values())
    n_att = attribute_matches(
        goal_attrs, product["attributes"], product["title"], product["bullet_points"], product["description"]
    )
    n_opt = option_matches(goal_opts, selected_options.values())
    bound = float(goal["price_upper"])
    r_price = bool(product["price"] <= bound) if bound > 0 and not math.isnan(bound) else False
    total = (n_att + n_opt + int(r_price)) / (len(goal_attrs) + len(goal_opts) + 1)
    return RewardBreakdown(
        reward=total * r_type,
        r_type=r_type,
        r_att=n_att / len(goal_attrs) if goal_attrs else None,
        r_option=n_opt / len(goal_opts) if goal_opts else None,
        r_price=r_price,
        num_attr_matches=n_att,
        num_option_matches=n_opt,
        query_match=query_match,
        category_match=category_match,
        title_score=title_score,
    )


__all__ = [
    "COLOR_SET",
    "FUZZY_THRESHOLD",
    "PRICE_RANGE",
    "RewardBreakdown",
    "attribute_matches",
    "fuzzy_match",
    "normalize_color",
    "option_matches",
    "ratio",
    "title_nouns",
    "token_set_ratio",
    "tokenize",
    "type_reward",
    "webshop_reward",
]
