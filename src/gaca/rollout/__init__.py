"""Policies in environments: the policy agent, the group rollout into the step table, expert data.

Everything steps episodes through the one driver, ``gaca.envs.play_episodes``.
"""

from gaca.rollout.agent import PolicyAgent, SampledResponse
from gaca.rollout.collect import RolloutBatch, RolloutConfig, anchor_text, collect_rollouts, step_table
from gaca.rollout.expert import DETOUR, DetouringExpert, ExpertData, collect_expert_examples
from gaca.rollout.prompt import ParsedResponse, format_response, parse_response, render_prompt, turn_prompt

__all__ = [
    "DETOUR",
    "DetouringExpert",
    "ExpertData",
    "ParsedResponse",
    "PolicyAgent",
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
    "turn_prompt",
]
