"""Multi-turn group rollout: prompts, response parsing, and sampling trajectories into the step table."""

from gaca.rollout.collect import (
    EnvPoolLike,
    ExpertData,
    RolloutBatch,
    RolloutConfig,
    Trajectory,
    anchor_text,
    collect_expert_examples,
    collect_rollouts,
)
from gaca.rollout.prompt import ParsedResponse, format_response, parse_response, render_prompt

__all__ = [
    "EnvPoolLike",
    "ExpertData",
    "ParsedResponse",
    "RolloutBatch",
    "RolloutConfig",
    "Trajectory",
    "anchor_text",
    "collect_expert_examples",
    "collect_rollouts",
    "format_response",
    "parse_response",
    "render_prompt",
]
