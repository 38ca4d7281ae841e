"""Test doubles shared by several test packages: a toy corridor environment and a scripted policy
(pools are real ``EnvPool``s).

The corridor is deterministic: the agent starts in room 0 and must reach room ``target``
(chosen by the seed) with "go forward"; "go back" moves back; anything else is inadmissible.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from gaca.envs import EnvPool
from gaca.policy import SampleOutput


class CorridorEnv:
    """A TextEnv: reach room ``target`` = 1 + seed % 3; reward 10 on arrival."""

    ACTIONS = ("go forward", "go back", "look")

    def __init__(self, max_steps: int = 6) -> None:
        self.max_steps = max_steps
        self.room = 0
        self.target = 1
        self.t = 0
        self.seed = 0

    def _info(self, valid: bool) -> dict[str, Any]:
        return {
            "task": f"reach room {self.target}",
            "task_id": f"corridor-{self.target}",
            "task_type": "short" if self.target < 3 else "long",
            "admissible_actions": list(self.ACTIONS),
            "won": self.room == self.target,
            "valid": valid,
            "expert_plan": ["go forward"] * (self.target - self.room),
        }

    def reset(self, *, seed: int, options: dict | None = None) -> tuple[str, dict[str, Any]]:
        self.seed, self.room, self.t = seed, 0, 0
        self.target = 1 + seed % 3
        return f"You are in room {self.room}.", self._info(True)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self.t += 1
        valid = action in self.ACTIONS
        if action == "go forward":
            self.room += 1
        elif action == "go back":
            self.room = max(0, self.room - 1)
        obs = f"You are in room {self.room}." if valid else "Nothing happens."
        won = self.room == self.target
        return obs, 10.0 if won else 0.0, won, (not won) and self.t >= self.max_steps, self._info(valid)

    def close(self) -> None:
        pass


def pool_of(n: int, max_steps: int = 6, env_cls: type = CorridorEnv) -> EnvPool:
    """An in-process pool of ``n`` corridors (the real ``EnvPool``, over environments built here)."""
    return EnvPool.from_envs([env_cls(max_steps) for _ in range(n)])


class ScriptedPolicy:
    """Answers each prompt with ``respond(prompt)``; one token per character, random log-probs."""

    def __init__(self, respond: Callable[[str], str]) -> None:
        self.respond = respond
        self.calls = 0
        self.prompts: list[str] = []
        self.forward_calls = 0

    def build_prompt(self, text: str) -> str:
        return "<user>" + text

    def sample(self, prompts, *, max_new_tokens, temperature=1.0, top_p=1.0, stop=None, generator=None):
        self.calls += 1
        self.prompts.extend(prompts)
        texts = [self.respond(p) for p in prompts]
        width = max(len(t) for t in texts)
        ids = torch.zeros(len(texts), width, dtype=torch.long)
        mask = torch.zeros(len(texts), width, dtype=torch.bool)
        for i, t in enumerate(texts):
            ids[i, : len(t)] = torch.tensor([ord(c) % 128 for c in t])
            mask[i, : len(t)] = True
        logp = -torch.rand(len(texts), width, generator=generator) * mask
        passes = 1 + width
        self.forward_calls += passes
        return SampleOutput(
            prompt_ids=[torch.tensor([ord(c) % 128 for c in p[-8:]]) for p in prompts],
            response_ids=ids, response_mask=mask, logprobs=logp, entropy=-logp, texts=texts, forward_passes=passes,
        )


def forward_then(prompt: str) -> str:
    """The optimal corridor policy's response."""
    return "<think>move on</think><action>go forward</action>"
