"""The ``gaca_text_env`` verl agent loop on CPU: a fake LLM server, a tiny local tokenizer, a
deterministic hallway environment; its rows then go through verl's compute_advantage."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
import torch

pytest.importorskip("hydra")  # verl's agent-loop stack
pytest.importorskip("verl")

from omegaconf import OmegaConf
from verl import DataProto
from verl.experimental.agent_loop.agent_loop import DictConfigWrap
from verl.trainer.ppo import ray_trainer
from verl.workers.rollout.replica import TokenOutput

import gaca.envs
import gaca.integrations.verl
from gaca.integrations.verl.agent_loop import TextEnvAgentLoop, observation_message
from tests.integrations.verl.fake_env import HallwayConfig

CHAT_TEMPLATE = ("{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|end|>{% endfor %}"
                 "{% if add_generation_prompt %}<|assistant|>{% endif %}")


@pytest.fixture(scope="module")
def tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<|pad|>", "<|user|>", "<|assistant|>", "<|end|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    corpus = ["You are in room 0. Observation: Admissible actions: [go east, wait]. "
              "<think>go on</think><action>go east</action> Your task is: reach the last room."] * 4
    tok.train_from_iterator(corpus, trainer)
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<|pad|>", eos_token="<|end|>")
    hf.chat_template = CHAT_TEMPLATE
    return hf


class ScriptedServer:
    """Answers each request with the next scripted action; log-prob −0.1·(turn+1) per token."""

    def __init__(self, tokenizer, actions: list[str]) -> None:
        self.tokenizer, self.actions, self.calls = tokenizer, list(actions), []

    async def generate(self, request_id, prompt_ids, sampling_params, **kwargs) -> TokenOutput:
        turn = len(self.calls)
        self.calls.append(list(prompt_ids))
        text = f"<think>step {turn}</think><action>{self.actions[turn]}</action>"
        ids = [*self.tokenizer.encode(text, add_special_tokens=False), self.tokenizer.eos_token_id]
        return TokenOutput(token_ids=ids, log_probs=[-0.1 * (turn + 1)] * len(ids))


def _run_episode(tokenizer, actions, monkeypatch, response_length=4096):
    if "hallway" not in gaca.envs.ENVIRONMENTS:
        gaca.envs.register_env("hallway", HallwayConfig, "tests.integrations.verl.fake_env:make")
    config = OmegaConf.create({"actor_rollout_ref": {"rollout": {"prompt_length": 1024,
                                                                 "response_length": response_length}}})
    server = ScriptedServer(tokenizer, actions)

    async def main():
        loop = TextEnvAgentLoop(trainer_config=DictConfigWrap(config), server_manager=server, tokenizer=tokenizer,
                                processor=None, dataset_cls=None, data_config=DictConfigWrap(OmegaConf.create({})))
        return await loop.run({"temperature": 1.0}, extra_info={"env": "hallway", "seed": 0,
                                                                "env_kwargs": {"max_steps": 6}})

    return asyncio.run(main()), server


def _spans(mask: list[int]) -> list[tuple[int, int]]:
    spans, start = [], None
    for i, m in enumerate([*mask, 0]):
        if m and start is None:
            start = i
        if not m and start is not None:
            spans.append((start, i))
            start = None
    return spans


def test_episode_becomes_one_row_with_a_span_per_turn(tokenizer, monkeypatch):
    out, server = _run_episode(tokenizer, ["go east", "wait", "go east", "go east"], monkeypatch)
    assert len(server.calls) == 4  # won on the 4th turn
    assert out.reward_score == 10.0
    assert out.extra_fields["turn_rewards"] == [0.0, 0.0, 0.0, 10.0]
    assert out.extra_fields["won"] is True and out.extra_fields["well_formed_turns"] == 4
    # the first prompt opens with the environment's own introduction
    assert tokenizer.decode(out.prompt_ids).count("You walk down a corridor.") == 1
    spans = _spans(out.response_mask)
    assert len(spans) == 4
    # Each span is exactly the tokens the server generated, with its log-probs.
    for turn, (a, b) in enumerate(spans):
        generated = server.calls[turn + 1][len(out.prompt_ids) + a:] if turn + 1 < len(server.calls) else None
        assert out.response_logprobs[a:b] == pytest.approx([-0.1 * (turn + 1)] * (b - a))
        if generated is not None:
            assert out.response_ids[a:b] == generated[: b - a]
    # Between spans: the environment's answer, masked out.
    between = tokenizer.decode(out.response_ids[spans[0][1]:spans[1][0]])
    assert observation_message("You are in room 1.", ["go east", "wait"]) in between
    # The prompt is the rendered first observation; each request extends the previous one.
    assert "You are in room 0." in tokenizer.decode(out.prompt_ids)
    for earlier, later in zip(server.calls, server.calls[1:], strict=False):
        assert later[: len(earlier)] == earlier


def test_truncated_episode_and_response_budget(tokenizer, monkeypatch):
    out, server = _run_episode(tokenizer, ["wait"] * 6, monkeypatch)
    assert len(server.calls) == 6 and out.reward_score == 0.0 and out.extra_fields["won"] is False
    short, _ = _run_episode(tokenizer, ["wait"] * 6, monkeypatch, response_length=60)
    assert len(short.response_mask) <= 60 and len(short.response_ids) == len(short.response_mask)


def test_agent_loop_rows_through_verl_compute_advantage(tokenizer, monkeypatch):
    """Two rollouts of one game: the winner's turns get positive credit, the loser's negative."""
    win, _ = _run_episode(tokenizer, ["go east", "wait", "go east", "go east"], monkeypatch)
    lose, _ = _run_episode(tokenizer, ["wait"] * 6, monkeypatch)
    rows = [win, lose]
    width = max(len(r.response_ids) for r in rows)
    prompt_width = max(len(r.prompt_ids) for r in rows)

    def pad(seqs, fill, left=False, dtype=torch.int64, size=width):
        out = torch.full((len(seqs), size), fill, dtype=dtype)
        for b, s in enumerate(seqs):
            if left:
                out[b, size - len(s):] = torch.tensor(s, dtype=dtype)
            else:
                out[b, : len(s)] = torch.tensor(s, dtype=dtype)
        return out

    responses = pad([r.response_ids for r in rows], 0)
    response_mask = pad([r.response_mask for r in rows], 0)
    rewards = torch.zeros(2, width)
    for b, r in enumerate(rows):
        rewards[b, len(r.response_ids) - 1] = r.reward_score  # where verl puts reward_score
    data = DataProto.from_dict(
        tensors={
            "prompts": pad([r.prompt_ids for r in rows], 0, left=True, size=prompt_width),
            "responses": responses,
            "attention_mask": torch.cat([pad([[1] * len(r.prompt_ids) for r in rows], 0, left=True, size=prompt_width),
                                         pad([[1] * len(r.response_ids) for r in rows], 0)], dim=1),
            "response_mask": response_mask,
            "token_level_rewards": rewards,
            "rollout_log_probs": pad([r.response_logprobs for r in rows], 0.0, dtype=torch.float32),
        },
        non_tensors={"uid": np.array(["game-0", "game-0"], dtype=object)},
    )
    config = OmegaConf.create({"gaca": {"kappa": 0.25}})
    out = ray_trainer.compute_advantage(data, adv_estimator="gaca", gamma=0.95, config=config)
    advantages = out.batch["advantages"]
    assert bool((advantages[0][response_mask[0].bool()] > 0).all())
    assert bool((advantages[1][response_mask[1].bool()] < 0).all())
    assert bool((advantages[response_mask == 0] == 0).all())
    table = gaca.integrations.verl.build_step_table(data, gaca.integrations.verl.VerlSettings())
    assert table.batch.step.tolist() == [0, 1, 2, 3, 0, 1, 2, 3, 4, 5]
    # Turn 0 starts from the same state in both rollouts; so do the turns after "wait" in room 0.
    anchors = table.batch.anchor.tolist()
    assert anchors[0] == anchors[4]
    assert anchors[2] == anchors[1]  # room 1 after "go east" then "wait": same observation
