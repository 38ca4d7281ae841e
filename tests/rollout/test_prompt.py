"""Prompt rendering (memory window) and response parsing."""

from __future__ import annotations

import re
import signal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gaca.rollout import format_response, parse_response, render_prompt
from gaca.rollout.prompt import tag_spans


def test_render_prompt_shows_task_observation_actions_and_last_k_pairs():
    history = [(f"obs {i}", f"act {i}") for i in range(5)]
    text = render_prompt("put a mug in sink", "You see a sink.", ["go to sink 1", "look"], history,
                         history_length=2, step=5, intro="INTRO")
    assert text.startswith("INTRO\nYour task is: put a mug in sink")
    assert "[Observation 4: obs 3 | Action 4: act 3]" in text
    assert "[Observation 5: obs 4 | Action 5: act 4]" in text
    assert "obs 2" not in text  # outside the window of K = 2
    assert "You have taken 5 step(s)" in text
    assert "Now at step 6, you observe: You see a sink." in text
    assert "Admissible actions: [go to sink 1, look]." in text
    assert "<think>" in text and "<action>" in text


def test_render_prompt_first_step_and_zero_window():
    first = render_prompt("t", "start", ["a"], [], history_length=3, step=0)
    assert "step(s) so far" not in first and "Now at step 1" in first
    none = render_prompt("t", "now", ["a"], [("o", "x")], history_length=0, step=1)
    assert "Observation 1" not in none and "You have taken 1 step(s) so far." in none


def test_action_memory_lists_the_actions_before_the_window():
    history = [(f"obs {i}", f"act {i}") for i in range(6)]
    text = render_prompt("t", "now", ["a"], history, history_length=2, step=6, action_memory=3)
    assert "Your actions at steps 2-4: act 1; act 2; act 3." in text  # steps are 1-based, as the pairs'
    assert "[Observation 5: obs 4 | Action 5: act 4]" in text and "act 0" not in text
    assert text.index("Your actions at") < text.index("You have taken 6 step(s)")
    short = render_prompt("t", "now", ["a"], history[:3], history_length=2, step=3, action_memory=3)
    assert "Your actions at step 1: act 0." in short
    only = render_prompt("t", "now", ["a"], history[:3], history_length=0, step=3, action_memory=2)
    assert "Your actions at steps 2-3: act 1; act 2." in only and "Observation" not in only
    # no memory: the prompt is the one the window alone renders (warm starts keyed before it stay valid)
    assert render_prompt("t", "now", ["a"], history, history_length=2, step=6, action_memory=0) == \
        render_prompt("t", "now", ["a"], history, history_length=2, step=6)


@pytest.mark.parametrize(
    ("text", "action", "ok"),
    [
        ("<think>go</think><action>go to desk 1</action>", "go to desk 1", True),
        ("<think>a</think> then <action>  take mug 1 </action>", "take mug 1", True),
        ("<action>look</action>", "look", False),  # no think
        ("<think>x</think><action></action>", "", False),  # empty action
        ("<think>x</think><action>a</action><action>b</action>", "a", False),  # two actions
        ("<action>a</action><think>x</think>", "a", False),  # think after action
        ("<think>x</think><think>y</think><action>a</action>", "a", False),  # two thinks
        ("I will look around", "I will look around", False),  # no tags: the tail goes to the env
    ],
)
def test_parse_response(text, action, ok):
    parsed = parse_response(text)
    assert parsed.action == action
    assert parsed.well_formed is ok


def test_parse_response_fallback_is_the_tail():
    parsed = parse_response("x" * 100 + "look", fallback_chars=10)
    assert parsed.action == "xxxxxxlook" and not parsed.well_formed


def test_format_response_round_trips():
    assert parse_response(format_response("open fridge 1", "cold")) == parse_response(
        "<think>cold</think><action>open fridge 1</action>"
    )
    assert parse_response(format_response("open fridge 1")).action == "open fridge 1"


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["<action>", "</action>", "<think>", "</think>", "go", " ", "\n", "<", ">", "x"]),
                max_size=30).map("".join))
def test_tag_spans_are_the_regex_pairs(text):
    for tag in ("action", "think"):
        regex = re.compile(f"<{tag}>(.*?)</{tag}>", re.DOTALL)
        assert [text[c:e] for _, c, e, _ in tag_spans(text, tag)] == regex.findall(text)
        assert [(s, e) for s, _, _, e in tag_spans(text, tag)] == [m.span() for m in regex.finditer(text)]


def test_many_unclosed_tags_parse_in_linear_time():
    # 20,000 unclosed tags took over 40 s with the regex; linear parsing takes milliseconds. The alarm
    # (500x the expected time) only keeps a regression from hanging the suite.
    def ring(signum, frame):
        raise TimeoutError("parse_response is not linear")

    previous = signal.signal(signal.SIGALRM, ring)
    signal.alarm(5)
    try:
        out = parse_response("<think>" + "<action>" * 20_000)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert not out.well_formed and out.action == "<action>" * 5


def test_the_admissible_list_can_be_left_out_for_a_choosing_agent():
    from gaca.rollout import RolloutConfig

    text = render_prompt("t", "now", ["go to desk 1", "look"], [], history_length=2, step=0, list_actions=False)
    assert "Admissible actions" not in text and "Now at step 1, you observe: now" in text
    assert RolloutConfig(action_mode="choose", list_actions=False).prompt_format("x").list_actions is False
    with pytest.raises(ValueError, match="list_actions=false is for choose mode"):
        RolloutConfig(list_actions=False)
