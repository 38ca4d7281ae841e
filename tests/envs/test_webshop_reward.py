"""The WebShop reward on hand-worked cases, and its fuzzy matcher on golden values."""

from __future__ import annotations

import math

import pytest

from gaca.envs.webshop.reward import (
    fuzzy_match,
    normalize_color,
    ratio,
    title_nouns,
    token_set_ratio,
    webshop_reward,
)


def _ratio_ref(a: str, b: str) -> int:
    """Indel ratio from its definition via an edit-distance table (insert/delete only)."""
    if not a or not b:
        return 0
    d = [[i + j if i == 0 or j == 0 else 0 for j in range(len(b) + 1)] for i in range(len(a) + 1)]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            d[i][j] = d[i - 1][j - 1] if a[i - 1] == b[j - 1] else 1 + min(d[i - 1][j], d[i][j - 1])
    return round(100 * (1 - d[-1][-1] / (len(a) + len(b))))


@pytest.mark.parametrize("a,b", [("fl oz 8", "fl oz 16"), ("kitten", "sitting"), ("abc", "abc"), ("x", "yz"),
                                 ("sulfate free", "paraben free")])
def test_ratio_matches_indel_definition(a, b):
    assert ratio(a, b) == _ratio_ref(a, b)


def test_token_set_ratio_golden_values():
    # T = "fl oz", A = "fl oz 8" (7 chars), B = "fl oz 16" (8 chars):
    # ratio(T, A) = 2·5/12 = 83.3; ratio(T, B) = 2·5/13 = 76.9; ratio(A, B) = 2·6/15 = 80 -> 83
    assert token_set_ratio("8 fl oz", "16 fl oz") == 83
    # tokens of "large" are a subset of those of "x-large": T == A, ratio 100 (a real WebShop quirk)
    assert token_set_ratio("large", "X-Large") == 100
    # T = "of pack", A = "of pack 2", B = "of pack 3": ratio(T, A) = 2·7/16 = 87.5,
    # ratio(A, B) = 2·8/18 = 88.9 -> 89 > 85: pack sizes are not told apart (another quirk)
    assert token_set_ratio("pack of 2", "pack of 3") == 89
    assert fuzzy_match("pack of 2", "pack of 3")
    assert not fuzzy_match("8 fl oz", "16 fl oz")
    assert token_set_ratio("essential oils", "essential oil") > 85
    assert token_set_ratio("", "anything") == 0


def test_normalize_color_and_title_nouns():
    assert normalize_color("heather grey") == "grey"
    assert normalize_color("16 fl oz") == "16 fl oz"
    assert title_nouns("Lumora Sulfate Free Argan Oil Shampoo for Women and Men") == [
        "lumora", "sulfate", "argan", "oil", "shampoo", "women", "men"]


def _product(**kw):
    p = dict(query="shampoo", product_category="beauty › hair care › shampoo",
             nouns=("lumora", "argan", "oil", "shampoo", "hair"), title="Lumora Argan Oil Shampoo",
             attributes=("tea tree", "essential oil", "natural ingredients"), bullet_points=(), description="",
             price=35.0)
    p.update(kw)
    return p


def _goal(**kw):
    g = dict(query="shampoo", product_category="beauty › hair care › shampoo",
             nouns=("lumora", "argan", "oil", "shampoo", "hair"),
             attributes=("tea tree", "essential oils", "natural ingredients"),
             options={"color": "grey", "size": "xl"}, price_upper=40.0)
    g.update(kw)
    return g


def test_reward_all_matched_is_exactly_one():
    r = webshop_reward(_product(), _goal(), {"color": "grey", "size": "xl"})
    # (3 attributes + 2 options + 1 price) / (3 + 2 + 1) · r_type 1
    assert r.reward == 1.0 and r.r_type == 1.0 and r.r_price and r.num_attr_matches == 3


def test_reward_attribute_found_in_text_counts():
    p = _product(attributes=("tea tree",), bullet_points=("Made with essential oils",),
                 description="natural ingredients only")
    assert webshop_reward(p, _goal(), {"color": "grey", "size": "xl"}).reward == 1.0


def test_reward_partial_cases():
    # one attribute missing: (2 + 2 + 1) / 6 = 5/6
    p = _product(attributes=("tea tree", "essential oil"))
    assert webshop_reward(p, _goal(), {"color": "grey", "size": "xl"}).reward == pytest.approx(5 / 6)
    # three goal options, two selected right: (3 + 2 + 1) / (3 + 3 + 1) = 6/7
    g = _goal(options={"color": "grey", "size": "xl", "scent": "lavender"})
    sel = {"color": "grey", "size": "xl", "scent": "mint"}
    assert webshop_reward(_product(), g, sel).reward == pytest.approx(6 / 7)
    # price above the bound: (3 + 2 + 0) / 6
    assert webshop_reward(_product(price=45.0), _goal(), {"color": "grey", "size": "xl"}).reward == pytest.approx(5 / 6)
    # no price bound (inf) always satisfied; colour normalized before matching
    r = webshop_reward(_product(price=999.0), _goal(price_upper=math.inf), {"color": "heather grey", "size": "xl"})
    assert r.reward == 1.0
    # nothing selected: (3 + 0 + 1) / 6
    assert webshop_reward(_product(), _goal(), {}).reward == pytest.approx(4 / 6)


def test_type_factor_cases():
    sel = {"color": "grey", "size": "xl"}
    # other query, one shared category level, noun overlap 1/5 = 0.2 (not > 0.2): r_type 0.5
    p = _product(query="conditioner", product_category="beauty › skin", nouns=("shampoo", "x", "y"))
    r = webshop_reward(p, _goal(), sel)
    assert (r.r_type, r.query_match, r.category_match, r.title_score) == (0.5, False, False, 0.2)
    assert r.reward == 0.5
    # same query keeps r_type 1 at that overlap
    assert webshop_reward(_product(nouns=("shampoo",)), _goal(), sel).r_type == 1.0
    # two shared category levels (order ignored) keep r_type 1
    p = _product(query="q", product_category="hair care › beauty › other", nouns=("shampoo",))
    assert webshop_reward(p, _goal(), sel).r_type == 1.0
    # overlap 1/11 < 0.1: r_type 0.1 even with the same query
    g = _goal(nouns=(*(f"n{i}" for i in range(10)), "shampoo"))
    assert webshop_reward(_product(), g, sel).r_type == 0.1
    # no shared noun: 0
    assert webshop_reward(_product(nouns=("lamp",)), _goal(), sel).reward == 0.0
    # the goal title has no noun: title score 0.2
    assert webshop_reward(_product(), _goal(nouns=()), sel).title_score == 0.2
