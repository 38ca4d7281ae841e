"""A verl multi-turn agent loop over gaca's text environments (ALFWorld, WebShop).

Registered as verl agent loop ``gaca_text_env``. One trajectory is one verl row (the trajectory
layout of ``gaca.integrations.verl.tables``): the first user message is ``render_prompt`` of the
task and first observation; each assistant turn is sampled by verl's rollout server; each later
user message is the environment's answer (observation + admissible actions), tokenized by verl's
continuous-token builder with response-mask 0. The episode's return is the row's
``reward_score``; ``extra_fields["turn_rewards"]`` keeps the per-turn env rewards.

Dataset rows (see ``examples/verl/make_dataset.py``) carry ``agent_name = "gaca_text_env"`` and
``extra_info = {"env": "alfworld", "seed": s, "env_kwargs": {...}}``; verl repeats each row
``rollout.n`` times under one ``uid``, so a group is n rollouts of one game from one state.

Needs verl's agent-loop stack (``hydra-core``); import it in the rollout workers through
``VERL_USE_EXTERNAL_MODULES=gaca.integrations.verl,gaca.integrations.verl.agent_loop``.
"""

from __future__ import annotations

import logging
import threading
from collections import defaultdict
from typing import Any
from uuid import uuid4

from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopOutput, register

from gaca.envs import EnvSpec, TextEnv, named_spec
from gaca.rollout.prompt import parse_response, render_prompt

logger = logging.getLogger(__name__)

AGENT_NAME = "gaca_text_env"


def observation_message(observation: str, admissible_actions: list[str]) -> str:
    """The user message of a later turn: the environment's answer and what it accepts now."""
    return (f"Observation: {observation.strip()}\n"
            f"Admissible actions: [{', '.join(admissible_actions)}].\n"
            "Answer with <think> </think> then one admissible action inside <action> </action>.")


class EnvCache:
    """Idle environments kept per ``EnvSpec`` for reuse, so games are built once per worker process.

    verl runs each episode as its own coroutine, so environments are lent one at a time here rather
    than stepped in lock-step by a ``gaca.envs.EnvPool``.
    """

    def __init__(self) -> None:
        self._free: dict[EnvSpec, list[TextEnv]] = defaultdict(list)
        self._lock = threading.Lock()

    def acquire(self, spec: EnvSpec) -> TextEnv:
        with self._lock:
            free = self._free[spec]
            if free:
                return free.pop()
        return spec.build()

    def release(self, spec: EnvSpec, env: TextEnv) -> None:
        with self._lock:
            self._free[spec].append(env)


ENV_CACHE = EnvCache()


@register(AGENT_NAME)
class TextEnvAgentLoop(AgentLoopBase):
    """Plays one episode of a gaca ``TextEnv`` as one multi-turn verl trajectory."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.response_length = int(self.rollout_config.response_length)

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        """Run one episode; returns verl's ``AgentLoopOutput`` (one row, one span per turn)."""
        extra = dict(kwargs.get("extra_info") or {})
        spec = named_spec(str(extra.get("env", "alfworld")), **dict(extra.get("env_kwargs") or {}))
        seed = int(extra["seed"])
        env = await self.loop.run_in_executor(None, ENV_CACHE.acquire, spec)
        try:
            return await self._episode(env, spec.intro, seed, sampling_params)
        finally:
            ENV_CACHE.release(spec, env)

    async def _episode(self, env: TextEnv, intro: str, seed: int, sampling_params: dict[str, Any]) -> AgentLoopOutput:
        observation, info = await self.loop.run_in_executor(None, lambda: env.reset(seed=seed))
        first = render_prompt(info["task"], observation, list(info["admissible_actions"]), [],
                              history_length=0, step=0, intro=intro)
        messages: list[dict[str, Any]] = [{"role": "user", "content": first}]
        tokens = await self.ct_build_initial_tokens(messages)
        response_mask: list[int] = []
        logprobs: list[float] | None = None
        turn_rewards: list[float] = []
        well_formed = 0
        won = False
        request_id = uuid4().hex
        for _turn in range(env.max_steps):
            output = await self.server_manager.generate(
                request_id=request_id, prompt_ids=tokens, sampling_params=sampling_params
            )
            merged, response_mask, logprobs = await self.ct_merge_assistant_token(
                tokens, output.token_ids, response_mask,
                logprobs if logprobs is not None else ([] if output.log_probs else None),
                assistant_logprobs=output.log_probs or None,
            )
            tokens = merged.token_ids
            text = self.tokenizer.decode(output.token_ids, skip_special_tokens=True)
            parsed = parse_response(text)
            well_formed += int(parsed.well_formed)
            observation, reward, terminated, truncated, info = await self.loop.run_in_executor(
                None, env.step, parsed.action
            )
            turn_rewards.append(float(reward))
            won = bool(info.get("won", False))
            messages.append({"role": "assistant", "content": text})
            if terminated or truncated or len(response_mask) >= self.response_length:
                break
            previous = list(messages)
            messages.append({"role": "user",
                             "content": observation_message(observation, list(info["admissible_actions"]))})
            merged, new_mask, new_logprobs = await self.ct_merge_context_msg(
                previous, messages, tokens, response_mask, logprobs
            )
            if len(new_mask) >= self.response_length:
                break
            tokens, response_mask, logprobs = merged.token_ids, new_mask, new_logprobs
        prompt_ids = tokens[: len(tokens) - len(response_mask)]
        response_ids = tokens[len(prompt_ids):]
        cut = self.response_length
        return AgentLoopOutput(
            prompt_ids=prompt_ids,
            response_ids=response_ids[:cut],
            response_mask=response_mask[:cut],
            response_logprobs=logprobs[:cut] if logprobs else None,
            reward_score=float(sum(turn_rewards)),
            num_turns=2 * len(turn_rewards),
            metrics={},
            extra_fields={"turn_rewards": turn_rewards, "won": won, "well_formed_turns": well_formed,
                          "turn_scores": [], "tool_rewards": []},
        )


__all__ = ["AGENT_NAME", "ENV_CACHE", "EnvCache", "TextEnvAgentLoop", "observation_message"]
