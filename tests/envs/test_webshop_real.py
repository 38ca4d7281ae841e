"""The adapter to the real WebShop (``web_agent_site``): its error when missing, and its translation
logic against a fake with WebAgentTextEnv's interface (reset(session), step, get_available_actions,
instruction_text, server.goals). The real package cannot be installed here, so nothing below shows
that the adapter runs against it; the fake only pins what the adapter itself does."""

from __future__ import annotations

import importlib.util
import sys
import types

import pytest

from gaca.envs import INFO_KEYS, make_env
from gaca.envs.webshop import SEARCH_ACTION, RealWebShopEnv


def make(**kwargs):
    """``make_env("webshop", ...)``; ``split`` defaults to train."""
    return make_env("webshop", **kwargs)


@pytest.mark.skipif(importlib.util.find_spec("web_agent_site") is not None, reason="web_agent_site installed")
def test_missing_package_error_names_what_is_missing():
    with pytest.raises(RuntimeError, match=r"web_agent_site.*not on PyPI.*princeton-nlp/WebShop") as err:
        make_env("webshop", backend="real")
    assert "setup.sh" in str(err.value) and "backend" in str(err.value)
    with pytest.raises(ValueError, match="expert"):
        make(backend="real", expert=True)


class FakeTextEnv:
    """Three pages: search bar -> results with one item -> item with Buy Now (reward 1 for 'item-a')."""

    def __init__(self, observation_mode="html", num_products=None, human_goals=True, **kwargs):
        assert observation_mode == "text"
        self.server = types.SimpleNamespace(goals=[{"category": f"cat{i}"} for i in range(520)])
        self.calls: list[str] = []
        self.page = "search"
        self.instruction_text = ""

    def reset(self, session=None, instruction_text=None):
        self.session, self.page = session, "search"
        self.instruction_text = f"goal {session}"
        return f"WebShop [SEP] Instruction: [SEP] goal {session} [SEP] Search", None

    def get_available_actions(self):
        clickables = {"search": ["search"], "results": ["back to search", "item-a", "item-b"],
                      "item": ["back to search", "< prev", "buy now"]}[self.page]
        return {"has_search_bar": self.page == "search", "clickables": clickables}

    def step(self, action):
        self.calls.append(action)
        if action.startswith("search["):
            self.page = "results"
        elif action in ("click[item-a]", "click[item-b]"):
            self.page, self.item = "item", action[6:-1]
        elif action == "click[buy now]":
            return "done", (1.0 if self.item == "item-a" else 0.5), True, None
        return f"page {self.page}", 0.0, False, None


@pytest.fixture()
def fake(monkeypatch):
    mod = types.ModuleType("web_agent_site.envs.web_agent_text_env")
    mod.WebAgentTextEnv = FakeTextEnv
    for name in ("web_agent_site", "web_agent_site.envs"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, mod.__name__, mod)
    return mod


def test_goal_ids_per_split(fake):
    ev, tr = make(backend="real", split="eval"), make(backend="real", split="train")
    assert ev.reset(seed=3)[1]["task"] == "goal 3" and ev.reset(seed=503)[1]["task"] == "goal 3"
    assert tr.reset(seed=0)[1]["task_id"] == "webshop-real/train/500"
    assert tr.reset(seed=20)[1]["task"] == "goal 500"  # 20 train goals: wraps around
    assert tr.reset(seed=1)[1]["task_type"] == "cat501"


def test_translation_of_actions_validity_and_reward(fake):
    env = make(backend="real", split="eval", max_steps=10)
    assert isinstance(env, RealWebShopEnv)
    obs, info = env.reset(seed=0)
    assert set(INFO_KEYS) <= set(info) and info["admissible_actions"] == [SEARCH_ACTION]
    # inadmissible: not forwarded, nothing changes
    for bad in ("click[search]", "click[item-a]", "search[]", "hello"):
        obs2, r, term, trunc, info = env.step(bad)
        assert (obs2, r, term, trunc, info["valid"]) == (obs, 0.0, False, False, False)
    assert env.env.calls == []
    _, _, _, _, info = env.step("Search[ Red  Shoes ]")
    assert env.env.calls == ["search[red shoes]"] and info["valid"]
    assert info["admissible_actions"] == ["click[back to search]", "click[item-a]", "click[item-b]"]
    assert not env.step("search[again]")[4]["valid"]  # no search bar on this page
    env.step("click[Item-A]")
    obs, r, term, trunc, info = env.step("click[buy now]")
    assert (r, term, trunc, info["won"], info["admissible_actions"]) == (1.0, True, False, True, [])
    env.reset(seed=1)
    env.step("search[x]")
    env.step("click[item-b]")
    _, r, term, _, info = env.step("click[buy now]")
    assert r == 0.5 and term and not info["won"]


def test_step_limit(fake):
    env = make(backend="real", split="eval", max_steps=3)
    env.reset(seed=0)
    outs = [env.step("click[nothing]") for _ in range(3)]
    assert [o[3] for o in outs] == [False, False, True]
    with pytest.raises(RuntimeError):
        env.step("search[x]")
