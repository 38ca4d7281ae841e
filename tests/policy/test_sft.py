"""Supervised warm start on (prompt, response) pairs."""

from __future__ import annotations

import math

import pytest
import torch

from gaca.policy import load_policy, sft_loss, sft_warm_start
from gaca.policy.sft import LR_SCHEDULES
from gaca.train.config import SFTConfig


def test_sft_lowers_loss_and_learns_the_format(tiny_config, tiny_tokenizer, corpus):
    policy = load_policy(tiny_config(), tokenizer=tiny_tokenizer)
    prompts, responses = corpus
    examples = list(zip(prompts, responses, strict=True))
    stats = sft_warm_start(policy, examples, steps=50, lr=5e-3, batch_size=16, seed=0)
    assert stats["steps"] == 50 and len(stats["losses"]) == 50
    assert stats["loss_final"] < 0.5 * stats["loss_initial"]
    assert sum(stats["losses"][-5:]) < sum(stats["losses"][:5])
    assert stats["tokens"] > 0 and stats["tokens_per_s"] > 0
    # the warm-started policy emits the response format and stops at </action>
    out = policy.sample(prompts[:8], max_new_tokens=40, temperature=0)
    assert all(r == "stop" for r in out.finish_reasons)
    assert all(t.startswith("<think>") and t.endswith("</action>") for t in out.texts)
    # the reference was reset to the warm-started policy
    with torch.no_grad():
        a = policy.score(out.prompt_ids, out.response_ids, out.response_mask).logprobs
        b = policy.score(out.prompt_ids, out.response_ids, out.response_mask, reference=True).logprobs
    torch.testing.assert_close(a, b)


def test_sft_is_seeded(tiny_config, tiny_tokenizer, corpus):
    examples = list(zip(*corpus, strict=True))[:32]
    runs = []
    for _ in range(2):
        policy = load_policy(tiny_config(), tokenizer=tiny_tokenizer)
        runs.append(sft_warm_start(policy, examples, steps=4, lr=1e-3, batch_size=8, seed=7)["losses"])
    assert runs[0] == runs[1]


def test_sft_zero_steps_and_lora(tiny_config, tiny_tokenizer, corpus):
    examples = list(zip(*corpus, strict=True))[:16]
    policy = load_policy(tiny_config(lora_rank=8), tokenizer=tiny_tokenizer)
    zero = sft_warm_start(policy, examples, steps=0, lr=1e-3, batch_size=8, seed=0)
    assert zero["loss_initial"] == pytest.approx(zero["loss_final"])
    stats = sft_warm_start(policy, examples, steps=8, lr=1e-2, batch_size=8, seed=0)
    assert stats["loss_final"] < stats["loss_initial"]


def test_sft_loss_is_token_mean(tiny_policy, corpus):
    p = [tiny_policy.encode_prompt(x) for x in corpus[0][:3]]
    r = [tiny_policy.encode_response(x) for x in corpus[1][:3]]
    with torch.no_grad():
        per = [float(sft_loss(tiny_policy, [p[i]], [r[i]])) * r[i].numel() for i in range(3)]
        joint = float(sft_loss(tiny_policy, p, r))
    assert joint == pytest.approx(sum(per) / sum(x.numel() for x in r), rel=1e-5)


def test_sft_rejects_empty(tiny_policy):
    with pytest.raises(ValueError):
        sft_warm_start(tiny_policy, [], steps=1, lr=1e-3, batch_size=1, seed=0)
    with pytest.raises(ValueError, match="empty response"):
        sft_warm_start(tiny_policy, [("a prompt", "")], steps=1, lr=1e-3, batch_size=1, seed=0)


def test_lr_schedules_match_their_formulas():
    steps = 10
    assert [LR_SCHEDULES["constant"](t, steps) for t in range(steps)] == [1.0] * steps
    for t in range(steps + 1):
        assert LR_SCHEDULES["cosine"](t, steps) == pytest.approx(0.5 * (1 + math.cos(math.pi * t / steps)))
    assert LR_SCHEDULES["cosine"](0, steps) == 1.0 and LR_SCHEDULES["cosine"](steps, steps) == pytest.approx(0.0)


def test_cosine_schedule_reaches_the_optimizer(tiny_config, tiny_tokenizer, corpus, monkeypatch):
    examples = list(zip(*corpus, strict=True))[:16]
    seen = []
    real_step = torch.optim.AdamW.step

    def recording_step(self, *args, **kwargs):
        seen.append(self.param_groups[0]["lr"])
        return real_step(self, *args, **kwargs)

    monkeypatch.setattr(torch.optim.AdamW, "step", recording_step)
    policy = load_policy(tiny_config(), tokenizer=tiny_tokenizer)
    sft_warm_start(policy, examples, steps=4, lr=1e-2, batch_size=8, seed=0, lr_schedule="cosine")
    assert seen == pytest.approx([1e-2 * 0.5 * (1 + math.cos(math.pi * t / 4)) for t in range(4)])
    with pytest.raises(ValueError, match="lr_schedule"):
        sft_warm_start(policy, examples, steps=1, lr=1e-3, batch_size=8, seed=0, lr_schedule="linear")


def test_config_rejects_an_unknown_lr_schedule():
    with pytest.raises(ValueError, match=r"sft\.lr_schedule"):
        SFTConfig(lr_schedule="step")


def _weights(policy) -> list[torch.Tensor]:
    return [p.detach().clone() for p in policy.trainable_parameters()]


def test_sft_resumed_from_its_progress_equals_the_uninterrupted_run(tiny_config, tiny_tokenizer, corpus, caplog):
    examples = list(zip(*corpus, strict=True))[:40]
    kw = dict(steps=7, lr=3e-3, batch_size=8, seed=3)  # 40 examples / 8: the order crosses an epoch at step 5
    plain = load_policy(tiny_config(), tokenizer=tiny_tokenizer)
    expected = sft_warm_start(plain, examples, **kw)
    saved: list[dict] = []
    watched = load_policy(tiny_config(), tokenizer=tiny_tokenizer)
    stats = sft_warm_start(watched, examples, **kw, save_progress=saved.append, progress_every=2)
    assert [s["step"] for s in saved] == [2, 4, 6]  # none after the last step
    assert stats["losses"] == expected["losses"]  # keeping the state changes nothing
    assert all(torch.equal(a, b) for a, b in zip(_weights(watched), _weights(plain), strict=True))
    for state in saved:
        resumed = load_policy(tiny_config(), tokenizer=tiny_tokenizer)
        with caplog.at_level("INFO", logger="gaca.policy.sft"):
            out = sft_warm_start(resumed, examples, **kw, progress=state)
        assert f"SFT resumed at step {state['step']}/7" in caplog.text
        assert out["losses"] == expected["losses"] and out["loss_initial"] == expected["loss_initial"]
        assert out["loss_final"] == expected["loss_final"] and out["tokens"] == expected["tokens"]
        assert all(torch.equal(a, b) for a, b in zip(_weights(resumed), _weights(plain), strict=True))
        # time adds up over the processes; the speed is the resumed process's own tokens over its own time
        own_seconds = out["seconds"] - state["seconds"]
        assert state["seconds"] > 0 and own_seconds > 0
        assert out["tokens_per_s"] * own_seconds == pytest.approx(out["tokens"] - state["tokens"])


def test_sft_ignores_the_progress_of_another_run(tiny_config, tiny_tokenizer, corpus, caplog):
    examples = list(zip(*corpus, strict=True))[:24]
    saved: list[dict] = []
    first = load_policy(tiny_config(), tokenizer=tiny_tokenizer)
    sft_warm_start(first, examples, steps=4, lr=1e-3, batch_size=8, seed=0, save_progress=saved.append,
                   progress_every=2)
    plain = load_policy(tiny_config(), tokenizer=tiny_tokenizer)
    expected = sft_warm_start(plain, examples, steps=4, lr=2e-3, batch_size=8, seed=0)
    other = load_policy(tiny_config(), tokenizer=tiny_tokenizer)
    with caplog.at_level("WARNING", logger="gaca.policy.sft"):
        out = sft_warm_start(other, examples, steps=4, lr=2e-3, batch_size=8, seed=0, progress=saved[0])
    assert "SFT progress of another run" in caplog.text
    assert out["losses"] == expected["losses"]
    assert all(torch.equal(a, b) for a, b in zip(_weights(other), _weights(plain), strict=True))
