"""Agent prompts and response parsing for multi-turn text environments.

The prompt follows the structure of verl-agent's ALFWorld prompt (Feng et al. 2025, arXiv:2505.10978):
the task, how many steps were taken, a memory window of the last K observations and actions, the
current observation, the admissible actions, and the request to reason inside ``<think>…</think>``
and answer inside ``<action>…</action>``. The wording is ours.

Everything here is plain string handling: no model, no environment.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gaca.envs.episodes import Turn

DEFAULT_INTRO = "You are an expert agent acting in a text-based environment."


@dataclass(frozen=True)
class ParsedResponse:
    """What was read out of one sampled response."""

    action: str
    """The text sent to the environment: the ``<action>`` content, or the stripped tail of a malformed response."""
    well_formed: bool
    """Exactly one ``<think>…</think>`` before exactly one non-empty ``<action>…</action>``."""


def render_prompt(
    task: str,
    observation: str,
    admissible_actions: list[str],
    history: list[tuple[str, str]],
    *,
    history_length: int,
    step: int,
    intro: str = DEFAULT_INTRO,
    action_memory: int = 0,
    list_actions: bool = True,
) -> str:
    """The agent prompt for one step.

    Args:
      task: the goal text (``info["task"]``).
      observation: the current observation (the environment's text before this step).
      admissible_actions: the actions the environment accepts now.
      history: all earlier (observation, action) pairs of this episode, oldest first.
      history_length: K, how many of the most recent pairs are shown (0: none).
      step: the 0-based index of the current step (= len(history) in a normal episode).
      intro: the first line (who the agent is, which environment).
      action_memory: M, how many actions before those K pairs are listed, by name only (0: none).
      list_actions: show the admissible actions (an agent that chooses among them scores each anyway).
    Returns:
      The user-message text (the policy applies its chat template on top).
    """
    lines = [intro, f"Your task is: {task}"]
    shown = history[-history_length:] if history_length > 0 else []
    earlier = history[: len(history) - len(shown)]
    remembered = earlier[-action_memory:] if action_memory > 0 else []
    if remembered:
        first = step - len(shown) - len(remembered) + 1
        last = first + len(remembered) - 1
        span = f"step {first}" if first == last else f"steps {first}-{last}"
        lines.append(f"Your actions at {span}: " + "; ".join(act for _, act in remembered) + ".")
    if step > 0 and shown:
        first = step - len(shown) + 1
        lines.append(f"You have taken {step} step(s) so far. Your last {len(shown)} observation(s) and action(s):")
        for k, (obs, act) in enumerate(shown):
            lines.append(f"[Observation {first + k}: {obs.strip()} | Action {first + k}: {act}]")
    elif step > 0:
        lines.append(f"You have taken {step} step(s) so far.")
    lines.append(f"Now at step {step + 1}, you observe: {observation.strip()}")
    if list_actions:
        lines.append("Admissible actions: [" + ", ".join(admissible_actions) + "].")
    lines.append(
        "Think about the situation inside <think> </think> tags, then give exactly one admissible "
        "action inside <action> </action> tags."
    )
    return "\n".join(lines)


@dataclass(frozen=True)
class PromptFormat:
    """How an episode driver's ``Turn`` becomes the agent prompt (``RolloutConfig.prompt_format``)."""

    intro: str = DEFAULT_INTRO
    """The first line (the environment's ``EnvConfig.intro``)."""
    history_length: int = 2
    """K: the most recent (observation, action) pairs shown."""
    action_memory: int = 0
    """M: the actions before those K pairs listed by name only."""
    list_actions: bool = True
    """Show the admissible actions."""

    def render(self, turn: Turn) -> str:
        """``render_prompt`` of the turn's task, observation, actions and history."""
        return render_prompt(turn.task, turn.observation, turn.admissible_actions, list(turn.history),
                             history_length=self.history_length, step=turn.step, intro=self.intro,
                             action_memory=self.action_memory, list_actions=self.list_actions)


def format_response(action: str, thought: str = "") -> str:
    """The canonical response for ``action`` (used to build SFT targets from expert plans)."""
    return f"<think>{thought}</think><action>{action}</action>"


def tag_spans(text: str, tag: str) -> list[tuple[int, int, int, int]]:
    """Every ``<tag>…</tag>`` pair, left to right: (open start, content start, content end, close end).

    The same pairs as ``re.findall(r"<tag>(.*?)</tag>", text, re.DOTALL)``, found with ``str.find`` in
    linear time (the regex is quadratic on many unclosed opening tags).
    """
    opening, closing = f"<{tag}>", f"</{tag}>"
    spans, pos = [], 0
    while (start := text.find(opening, pos)) >= 0:
        end = text.find(closing, start + len(opening))
        if end < 0:  # no closing tag after this opening tag, so none after any later one either
            break
        spans.append((start, start + len(opening), end, end + len(closing)))
        pos = end + len(closing)
    return spans


def parse_response(text: str, *, fallback_chars: int = 40) -> ParsedResponse:
    """Read the action out of a sampled response.

    A response is well formed when it holds exactly one ``<think>…</think>`` and exactly one
    non-empty ``<action>…</action>`` after it. A malformed response still yields an action
    string for the environment (the first ``<action>`` content if any, else the last
    ``fallback_chars`` characters), so that the environment answers with its own response
    (e.g. ALFWorld's "Nothing happens.").
    """
    actions = tag_spans(text, "action")
    thinks = tag_spans(text, "think")
    if actions:
        action = text[actions[0][1] : actions[0][2]].strip()
    else:
        action = text.strip()[-fallback_chars:].strip()
    well_formed = (
        len(actions) == 1
        and len(thinks) == 1
        and bool(action)
        and thinks[0][3] <= actions[0][0]
    )
    return ParsedResponse(action=action, well_formed=well_formed)


__all__ = ["DEFAULT_INTRO", "ParsedResponse", "PromptFormat", "format_response", "parse_response", "render_prompt",
           "tag_spans"]
