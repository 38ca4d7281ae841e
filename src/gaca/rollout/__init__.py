"""Policies in environments: the action modes' agents, the group rollout into the step table, expert data.

Everything steps episodes through the one driver, ``gaca.envs.play_episodes``.
"""

from gaca.rollout.choose import ChooseAgent, ChosenAction, ChosenActions, NoCandidatesError
from gaca.rollout.collect import RolloutBatch, anchor_text, collect_rollouts, step_table
from gaca.rollout.config import ACTION_MODES, RolloutConfig
from gaca.rollout.expert import DETOUR, DetouringExpert, ExpertData, collect_expert_examples
from gaca.rollout.generate import GenerateAgent, GeneratedResponses, SampledResponse
from gaca.rollout.modes import ResponseRows
from gaca.rollout.prompt import (
    DEFAULT_INTRO,
    ParsedResponse,
    PromptFormat,
    format_response,
    parse_response,
    render_prompt,
)

__all__ = [
    "ACTION_MODES",
    "DEFAULT_INTRO",
    "DETOUR",
    "ChooseAgent",
    "ChosenAction",
    "ChosenActions",
    "DetouringExpert",
    "ExpertData",
    "GenerateAgent",
    "GeneratedResponses",
    "NoCandidatesError",
    "ParsedResponse",
    "PromptFormat",
    "ResponseRows",
    "RolloutBatch",
    "RolloutConfig",
    "SampledResponse",
    "anchor_text",
    "collect_expert_examples",
    "collect_rollouts",
    "format_response",
    "parse_response",
    "render_prompt",
    "step_table",
]
