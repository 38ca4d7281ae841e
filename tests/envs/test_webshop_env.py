"""The generated shop: pages and their admissible actions, bad actions, step limit, determinism, catalogue."""

from __future__ import annotations

from itertools import combinations

import pytest

from gaca.envs import INFO_KEYS, TextEnv, make_env
from gaca.envs.webshop import (
    SEARCH_ACTION,
    WebShopEnv,
    get_catalogue,
    parse_action,
    strip_instruction,
    webshop_reward,
)
from gaca.envs.webshop.catalog_data import EVAL_TEMPLATES, PRODUCT_TYPES, TRAIN_TEMPLATES
from gaca.envs.webshop.oracle import choose_options, make_plan, oracle_query
from gaca.envs.webshop.reward import fuzzy_match, normalize_color


def make(**kwargs):
    """``make_env("webshop", ...)`` with WebShop's own page text (the instruction on every page)."""
    return make_env("webshop", **{"show_instruction": True, **kwargs})


@pytest.fixture()
def env() -> WebShopEnv:
    return make(split="train", expert=True)  # type: ignore[return-value]


def _results(env: WebShopEnv, seed: int = 0):
    env.reset(seed=seed)
    return env.step(f"search[{oracle_query(env.goal)}]")


def _open_target(env: WebShopEnv, seed: int = 0):
    """Reset, search the oracle's query and open its chosen item (paging as needed)."""
    env.reset(seed=seed)
    plan = make_plan(env.catalogue, env.goal)
    env.step(f"search[{plan.query}]")
    for _ in range(plan.rank // 10):
        env.step("click[next >]")
    return plan, env.step(f"click[{plan.asin}]")


def test_protocol_and_registry(env):
    assert isinstance(env, TextEnv) and env.max_steps == 15
    obs, info = env.reset(seed=0)
    assert set(INFO_KEYS) <= set(info) and info["valid"] and not info["won"]
    assert obs == f"WebShop [SEP] Instruction: [SEP] {info['task']} [SEP] Search"
    # through the registry (the trainer's way) the instruction is left to the prompt's task line
    shown, _ = make_env("webshop", split="train").reset(seed=0)
    assert shown == "Search"
    assert info["task_type"] in {"beauty", "electronics", "fashion", "food", "furniture"}
    shop = make_env("webshop", split="eval", max_steps=7)
    assert shop.max_steps == 7 and isinstance(shop, WebShopEnv)


def test_strip_instruction(env):
    obs, info = env.reset(seed=0)
    assert strip_instruction(obs, info["task"]) == "Search"
    obs, *_ = env.step(f"search[{oracle_query(env.goal)}]")
    assert strip_instruction(obs, info["task"]).startswith("Back to Search [SEP] Page 1")
    assert strip_instruction("no marker", "x") == "no marker"


def test_lowercase_pages_write_ids_and_options_as_the_click_actions_do():
    cased, lower = make(expert=True), make(expert=True, lowercase=True)
    for shop in (cased, lower):
        obs, info = shop.reset(seed=4)
    assert obs == f"webshop [SEP] instruction: [SEP] {info['task']} [SEP] search"  # the task is lowercase already
    pages = [(cased.step(a), lower.step(a)) for a in (f"search[{oracle_query(cased.goal)}]", "click[next >]")]
    plan = make_plan(cased.catalogue, cased.goal)
    for a in (f"click[{plan.asin.lower()}]",):
        pages.append((cased.step(a), lower.step(a)))
    for (obs_c, _, _, _, info_c), (obs_l, _, _, _, info_l) in pages:
        assert obs_l == " [SEP] ".join(part.lower() for part in obs_c.split(" [SEP] "))
        assert info_l["admissible_actions"] == info_c["admissible_actions"]
        assert obs_l != obs_c
        for action in info_l["admissible_actions"]:  # every id and option appears in the page as clicked
            target = parse_action(action)[1]
            assert target in ("back to search", "< prev", "next >") or f"[SEP] {target} [SEP]" in obs_l + " [SEP] "
    # through the registry the instruction is still dropped
    assert make_env("webshop", split="train", lowercase=True).reset(seed=0)[0] == "search"


def test_parse_action():
    assert parse_action(" click[ Buy  Now ] ") == ("click", "buy now")
    assert parse_action("Search[Red Shoes]") == ("search", "red shoes")
    assert parse_action("buy it") is None and parse_action("click") is None


def test_search_page_actions(env):
    _, info = env.reset(seed=0)
    assert info["admissible_actions"] == [SEARCH_ACTION] and info["expert_plan"][0].startswith("search[")


def test_results_page_actions_and_paging(env):
    obs, reward, term, trunc, info = _results(env)
    n = len(env.state.results)
    assert n == 50 and reward == 0.0 and not (term or trunc) and info["valid"]
    acts = info["admissible_actions"]
    assert acts[:2] == ["click[back to search]", "click[next >]"] and "click[< prev]" not in acts
    asins = env.state.results[:10]
    assert acts[2:] == [f"click[{a.lower()}]" for a in asins]
    assert "Page 1 (Total results: 50) [SEP] Next > [SEP] " + asins[0] in obs
    p = env.catalogue.by_asin[asins[0]]
    assert f"{asins[0]} [SEP] {p.title} [SEP] ${p.price:.2f}" in obs
    _, _, _, _, info = env.step("click[next >]")
    assert info["admissible_actions"][:3] == ["click[back to search]", "click[< prev]", "click[next >]"]
    for _ in range(3):
        _, _, _, _, info = env.step("click[next >]")
    assert env.state.page_no == 5 and "click[next >]" not in info["admissible_actions"]
    assert not env.step("click[next >]")[4]["valid"]  # no page 6
    obs, *_ = env.step("click[< prev]")
    assert env.state.page_no == 4 and "Page 4 (Total results: 50)" in obs


def test_item_page_actions_options_and_sub_pages(env):
    plan, (obs, _, _, _, info) = _open_target(env)
    p = env.catalogue.by_asin[plan.asin]
    values = [v.lower() for vals in p.options.values() for v in vals]
    assert info["admissible_actions"] == [
        "click[back to search]", "click[< prev]", "click[description]", "click[features]", "click[reviews]",
        "click[buy now]", *[f"click[{v}]" for v in values]]
    assert f"{p.title} [SEP] Price: ${p.price:.2f} [SEP] Rating: N.A." in obs and obs.endswith("Buy Now")
    group, vals = next(iter(p.options.items()))
    assert f"< Prev [SEP] {group} [SEP] {vals[0]}" in obs
    env.step(f"click[{vals[-1].upper()}]")  # case does not matter
    assert env.state.options == {group: vals[-1]}
    obs, *_, info = env.step("click[Features]")
    assert info["admissible_actions"] == ["click[back to search]", "click[< prev]"]
    assert all(b in obs for b in p.bullet_points) and info["page"] == "sub"
    env.step("click[< prev]")
    assert env.state.page == "item" and env.state.options == {group: vals[-1]}  # selection kept
    obs, *_ = env.step("click[description]")
    assert obs.endswith(p.description)
    env.step("click[< prev]")
    page_no = env.state.page_no
    env.step("click[< prev]")
    assert env.state.page == "results" and env.state.page_no == page_no and env.state.options == {}
    env.step("click[back to search]")
    assert env.state.page == "search"


def test_buy_gives_the_webshop_reward(env):
    plan, _ = _open_target(env, seed=1)
    for v in plan.options.values():
        env.step(f"click[{v}]")
    obs, reward, term, trunc, info = env.step("click[buy now]")
    expected = webshop_reward(env.catalogue.by_asin[plan.asin], env.goal, plan.options)
    assert term and not trunc and reward == expected.reward == plan.reward
    assert info["won"] == (reward == 1.0) and info["reward_info"]["r_type"] == expected.r_type
    assert info["admissible_actions"] == [] and info["expert_plan"] == [] and obs.startswith("Thank you")
    with pytest.raises(RuntimeError, match="reset"):
        env.step("click[back to search]")


def test_wrong_options_lower_the_reward(env):
    for seed in range(40):  # a goal with an option whose item offers another value
        plan, _ = _open_target(env, seed=seed)
        p = env.catalogue.by_asin[plan.asin]
        wrong = {g: v for g, v in p.options.items() if g in env.goal.options
                 for v in p.options[g] if v != env.goal.options[g]}
        if plan.reward == 1.0 and wrong:
            break
    group, value = next(iter(wrong.items()))
    for g, v in plan.options.items():
        env.step(f"click[{value if g == group else v}]")
    _, reward, *_ = env.step("click[buy now]")
    n = len(env.goal.attributes) + len(env.goal.options) + 1
    assert reward == pytest.approx((n - 1) / n)


@pytest.mark.parametrize("action", [
    "click[b0nothing]", "click[buy now]", "click[search]", "hello", "", "search[]", "click[]", "search [x",
])
def test_bad_action_is_invalid_and_changes_nothing(env, action):
    for page in ("search", "results"):
        obs, info = env.reset(seed=2)
        if page == "results":
            obs, *_, info = env.step(f"search[{oracle_query(env.goal)}]")
        before = (env.state.page, env.state.results, env.state.page_no, env.state.asin)
        obs2, reward, term, trunc, info2 = env.step(action)
        if page == "search" and action == "search[]":
            assert not info2["valid"]
        assert not info2["valid"] and reward == 0.0 and not term and not trunc
        assert obs2 == obs and info2["admissible_actions"] == info["admissible_actions"]
        assert (env.state.page, env.state.results, env.state.page_no, env.state.asin) == before


def test_search_is_only_admissible_on_the_search_page(env):
    _results(env)
    _, _, _, _, info = env.step("search[shampoo]")
    assert not info["valid"] and env.state.page == "results"


def test_step_limit_truncates(env):
    env.reset(seed=0)
    for t in range(1, 16):
        _, reward, term, trunc, info = env.step("click[nowhere]")
        assert reward == 0.0 and not term and trunc == (t == 15) and not info["valid"]
    with pytest.raises(RuntimeError):
        env.step("search[x]")
    env.reset(seed=0)  # reset starts over
    assert env.step("search[shampoo]")[4]["valid"]


def _play(env: WebShopEnv, seed: int, actions: list[str]):
    out = [env.reset(seed=seed)[0]]
    for a in actions:
        obs, r, *_ = env.step(a)
        out.append((obs, r))
    return out


def test_determinism_same_seed_same_pages():
    a, b = make(split="train"), make(split="train")
    assert a.reset(seed=7) == b.reset(seed=7)
    q = oracle_query(a.goal)
    actions = [f"search[{q}]", "click[next >]", f"click[{a.catalogue.search(q)[12].lower()}]", "click[features]",
               "click[< prev]", "click[buy now]"]
    assert _play(a, 7, actions) == _play(b, 7, actions)
    assert a.reset(seed=7) != a.reset(seed=8)
    assert a.reset(seed=3)[0] == a.reset(seed=3 + a.num_goals)[0]  # seeds wrap around the split
    assert a.reset(seed=0, options={"goal_index": 5}) == a.reset(seed=5)


def test_catalogue_seed_changes_the_catalogue():
    c0, c1 = get_catalogue(2400, 0), get_catalogue(2400, 1)
    assert [p.asin for p in c0.products[:20]] != [p.asin for p in c1.products[:20]]
    assert get_catalogue(2400, 0) is c0  # shared, built once


def test_catalogue_size_variety_and_splits():
    cat = get_catalogue(2400, 0)
    assert len(cat.products) == 2400 and len(cat.by_asin) == 2400
    types = {p.type_key for p in cat.products}
    assert types == {t.key for t in PRODUCT_TYPES} and len(types) == 30
    assert len({p.title for p in cat.products}) > 1000 and len({p.price for p in cat.products}) > 300
    train, evals = cat.goals["train"], cat.goals["eval"]
    assert len(train) + len(evals) == 2400 and len(evals) == 480
    assert not {g.asin for g in train} & {g.asin for g in evals}
    assert {g.template for g in evals} == set(range(len(EVAL_TEMPLATES)))
    train_heads = {t.split("{")[0] for t in TRAIN_TEMPLATES}
    assert not any(g.instruction.startswith(h) for g in evals for h in train_heads)
    priced = [g for g in train if "price lower than" in g.instruction]
    assert len(priced) > 0.9 * len(train)
    for g in train[:200]:  # every goal is satisfiable by its own product
        p = cat.by_asin[g.asin]
        assert webshop_reward(p, g, choose_options(p.options, g.options)).reward == 1.0
        assert g.instruction.islower()


def test_search_results_hold_hard_negatives():
    cat = get_catalogue(2400, 0)
    n_hard = 0
    for g in cat.goals["train"][:100]:
        results = cat.search(oracle_query(g))[:10]
        same_type = [cat.by_asin[a] for a in results if cat.by_asin[a].type_key == cat.by_asin[g.asin].type_key]
        wrong = [p for p in same_type if webshop_reward(p, g, choose_options(p.options, g.options)).reward < 1.0]
        n_hard += bool(wrong)
    assert n_hard >= 80  # almost every first page shows a same-type product that fails the goal


def test_vocabulary_is_distinct_under_the_reward_matcher():
    for t in PRODUCT_TYPES:
        for a, b in combinations(t.attributes, 2):
            assert not fuzzy_match(a, b) and a not in b and b not in a, (t.key, a, b)
        values = [v for vals in t.options.values() for v in vals]
        assert len(set(values)) == len(values), t.key
        for vals in t.options.values():
            for a, b in combinations(vals, 2):
                assert not fuzzy_match(normalize_color(a), normalize_color(b)), (t.key, a, b)


def test_make_rejects_bad_arguments():
    with pytest.raises(ValueError):
        make(split="test")
    with pytest.raises(ValueError):
        make(max_steps=0)
    with pytest.raises(ValueError, match="human_goals is a setting of the real WebShop"):
        make(human_goals=True)
    with pytest.raises(ValueError, match="lowercase is a setting of the generated WebShop"):
        make(backend="real", lowercase=True)
    with pytest.raises(ValueError):
        make(num_products=10)
    with pytest.raises(ValueError):
        make().reset(seed=-1)


def test_prev_from_item_returns_to_the_same_results_page(env):
    _results(env)
    env.step("click[next >]")
    second = env.state.results[10]
    obs, *_ = env.step(f"click[{second}]")
    assert env.state.page == "item" and env.state.asin == second
    obs, *_, info = env.step("click[< prev]")
    assert env.state.page_no == 2 and "Page 2 (Total results: 50)" in obs and f"click[{second.lower()}]" in info[
        "admissible_actions"]


def test_same_pages_in_another_process():
    """Worker processes (other hash seeds) must see the same catalogue and pages."""
    import os
    import subprocess
    import sys

    import gaca

    code = ("from gaca.envs import make_env\n"
            "env = make_env('webshop'); obs, info = env.reset(seed=11)\n"
            "q = ' '.join((*env.goal.attributes, env.goal.type_name))\n"
            "print(obs, env.step(f'search[{q}]')[0])\n")
    src = os.path.dirname(os.path.dirname(gaca.__file__))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={**env, "PYTHONHASHSEED": str(h)}).stdout for h in (1, 2)}
    assert len(outs) == 1 and "Total results: 50" in outs.pop()


def test_state_key_tells_apart_what_the_page_text_does_not(env):
    obs, _, _, _, info = _open_target(env, 0)[1]
    assert info["page"] == "item"
    option = next((a for a in info["admissible_actions"] if a not in {
        "click[back to search]", "click[< prev]", "click[description]", "click[features]", "click[reviews]",
        "click[buy now]"}), None)
    assert option is not None, "the item has no option to select"
    obs2, _, _, _, info2 = env.step(option)
    assert obs2 == obs and info2["admissible_actions"] == info["admissible_actions"]  # the text is the same...
    assert info2["state_key"] != info["state_key"]  # ...the state is not (an option is selected)
    env.reset(seed=0)
    again = _open_target(env, 0)[1][4]
    assert again["state_key"] == info["state_key"]  # same path, same state


def test_instruction_queries_are_built_from_the_text_alone():
    from gaca.envs.webshop.queries import instruction_queries, key_words, request_part

    text = ("i am looking for jeans that are stretch denim and classic five pocket with size: 38w x 36l, "
            "and price lower than 90.00 dollars")
    assert request_part(text) == "i am looking for jeans that are stretch denim and classic five pocket"
    assert key_words(request_part(text)) == "jeans stretch denim and classic five pocket"
    assert instruction_queries(text) == (text, request_part(text), key_words(request_part(text)))
    held_out = ("please help me find a smart watch band that is silicone; color olive, and price lower than "
                "50.00 dollars")
    assert instruction_queries(held_out)[1:] == ("please help me find a smart watch band that is silicone",
                                                "smart watch band silicone")
    assert instruction_queries("find me socks") == ("find me socks", "socks")  # duplicates dropped


def test_instruction_search_queries_are_listed_and_the_only_ones_accepted():
    env = make(split="eval", expert=True, search_queries="instruction")
    _, info = env.reset(seed=3)
    from gaca.envs.webshop.queries import instruction_queries

    queries = instruction_queries(env.goal.instruction)
    assert info["admissible_actions"] == [f"search[{q}]" for q in queries]
    assert info["expert_plan"][0] in info["admissible_actions"]
    _, _, _, _, info = env.step("search[anything else]")
    assert not info["valid"] and info["page"] == "search"
    _, _, _, _, info = env.step(f"search[{queries[-1].upper()}]")  # matching ignores case, as clicks do
    assert info["valid"] and info["page"] == "results"
    with pytest.raises(ValueError, match="generated WebShop"):
        from gaca.envs.webshop import WebShopConfig

        WebShopConfig(name="webshop", backend="real", search_queries="instruction")
