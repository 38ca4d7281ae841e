"""The group rollout on a toy corridor: step table, anchors, penalties, tokens, expert data."""

from __future__ import annotations

import pytest
import torch

from gaca.advantage import compute_advantages, hash_text
from gaca.config import ConfigError, from_dict
from gaca.rollout import (
    PromptFormat,
    RolloutConfig,
    anchor_text,
    collect_expert_examples,
    collect_rollouts,
    format_response,
)
from gaca.testing.fakes import CorridorEnv, ScriptedPolicy, forward_then, pool_of


def env_seeds(pool):
    return [slot.env.seed for slot in pool._backend.slots]


def test_optimal_policy_rows_groups_and_rewards():
    cfg = RolloutConfig(group_size=3, tasks_per_iter=2, invalid_penalty=0.1)
    pool = pool_of(6, max_steps=10)
    policy = ScriptedPolicy(forward_then)
    batch = collect_rollouts(policy, pool, [0, 2], cfg, generator=torch.Generator().manual_seed(0))
    # seed 0 -> target 1 (1 step), seed 2 -> target 3 (3 steps); 3 trajectories each
    assert env_seeds(pool) == [0, 0, 0, 2, 2, 2]
    assert batch.num_rows == 3 * 1 + 3 * 3
    s = batch.steps
    assert s.group_id.tolist() == [0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1]
    assert sorted(s.traj_id.tolist()) == [0, 1, 2, 3, 3, 3, 4, 4, 4, 5, 5, 5]
    assert all(e.won for e in batch.episodes)
    assert [e.length for e in batch.episodes] == [1, 1, 1, 3, 3, 3]
    assert s.reward.sum().item() == pytest.approx(60.0)
    assert not batch.invalid.any()
    # anchor = hash of the observation (+ admissible actions) before the step; equal across the group at
    # equal states
    actions = list(CorridorEnv.ACTIONS)
    start = hash_text(anchor_text("You are in room 0.", actions))
    assert (s.anchor[s.step == 0] == start).all()
    assert (s.anchor[(s.group_id == 1) & (s.step == 2)] == hash_text(anchor_text("You are in room 2.", actions))).all()
    assert s.anchor_text is not None and s.anchor_text[0].startswith("You are in room 0.")
    # tokens: one row per step, log-probs of the step table are the sampler's
    rows = batch.rows
    assert rows.response_ids.shape == rows.mask.shape == rows.old_logprobs.shape
    assert torch.equal(s.logprobs, rows.old_logprobs) and torch.equal(s.mask, rows.mask)
    assert len(rows.prompt_ids) == len(batch.actions) == batch.num_rows
    # 1 batched call per step: 3 steps for the longest trajectory
    assert policy.calls == 3
    assert batch.forward_passes == policy.forward_calls


def test_invalid_actions_get_penalty_and_env_response():
    answers = iter(["no tags here", "<think>t</think><action>dance</action>"] * 10)
    policy = ScriptedPolicy(lambda p: next(answers))
    cfg = RolloutConfig(group_size=1, tasks_per_iter=1, invalid_penalty=0.25)
    batch = collect_rollouts(policy, pool_of(1, max_steps=4), [0], cfg)
    assert batch.num_rows == 4 and batch.invalid.all()
    assert batch.steps.reward.tolist() == [-0.25] * 4
    assert batch.actions[1] == "dance"
    t = batch.episodes[0]
    assert t.invalid == 4 and not t.won and t.truncated
    # the environment's own response ("Nothing happens.") became the next observation
    assert (batch.steps.anchor[1:] == hash_text(anchor_text("Nothing happens.", list(CorridorEnv.ACTIONS)))).all()
    assert "Nothing happens." in policy.prompts[1]


def test_anchor_keeps_failed_commands_in_different_states_apart():
    # ALFWorld answers every failed command with "Nothing happens."; the admissible actions still
    # tell the states apart (at the fridge vs at the desk), and equal states stay equal.
    at_fridge = anchor_text("Nothing happens.", ["open fridge 1", "go to desk 1"])
    at_desk = anchor_text("Nothing happens.", ["take pen 1 from desk 1", "go to fridge 1"])
    assert hash_text(at_fridge) != hash_text(at_desk)
    assert at_fridge == anchor_text("Nothing happens.", ["open fridge 1", "go to desk 1"])
    assert anchor_text("Nothing happens.", ["a"], "observation") == "Nothing happens."
    # the option reaches the step table
    policy = ScriptedPolicy(lambda p: "<think>x</think><action>dance</action>")
    cfg = RolloutConfig(group_size=1, tasks_per_iter=1, anchor="observation")
    batch = collect_rollouts(policy, pool_of(1, max_steps=2), [0], cfg)
    assert batch.steps.anchor.tolist() == [hash_text("You are in room 0."), hash_text("Nothing happens.")]
    with pytest.raises(ValueError, match=r"rollout\.anchor"):
        RolloutConfig(anchor="page")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"rollout\.anchor must be one of"):
        from_dict(RolloutConfig, {"anchor": "page"}, "rollout.")


def test_step_limit_truncates_and_spare_envs_sit_out():
    cfg = RolloutConfig(group_size=2, tasks_per_iter=1)
    pool = pool_of(5, max_steps=2)  # the environment's step limit is the rollout's
    policy = ScriptedPolicy(lambda p: "<think>x</think><action>look</action>")
    batch = collect_rollouts(policy, pool, [1], cfg)
    assert env_seeds(pool) == [1, 1, 0, 0, 0]  # the spare envs sit out: never reset (seed 1), never stepped
    assert batch.num_rows == 4
    assert all(e.truncated and e.length == 2 for e in batch.episodes)
    assert pool._backend.slots[2].env.t == 0


def test_a_small_pool_plays_the_rollout_in_chunks():
    pick = ["<think>a</think><action>go forward</action>", "<think>b</think><action>go back</action>"]

    def run(num_envs):
        policy = ScriptedPolicy(lambda p: pick[len(p) % 2])
        return collect_rollouts(policy, pool_of(num_envs), [0, 1], RolloutConfig(group_size=2))

    big, small = run(4), run(2)  # 4 trajectories at once, or two chunks of 2
    assert [e.length for e in small.episodes] == [e.length for e in big.episodes]
    assert [[s.decision.action for s in e.steps] for e in small.episodes] == \
        [[s.decision.action for s in e.steps] for e in big.episodes]
    def rows(batch):
        s = batch.steps
        return sorted(zip(s.traj_id.tolist(), s.step.tolist(), s.group_id.tolist(), strict=True))

    assert rows(small) == rows(big)


def test_rollout_is_reproducible_and_feeds_estimators():
    cfg = RolloutConfig(group_size=4)
    pick = ["<think>a</think><action>go forward</action>", "<think>b</think><action>go back</action>"]

    def run(seed):
        g = torch.Generator().manual_seed(seed)
        policy = ScriptedPolicy(lambda p: pick[int(torch.randint(2, (1,), generator=g))])
        return collect_rollouts(policy, pool_of(8, max_steps=5), [2, 5], cfg,
                                generator=torch.Generator().manual_seed(seed))

    a, b = run(3), run(3)
    assert torch.equal(a.steps.reward, b.steps.reward) and torch.equal(a.steps.logprobs, b.steps.logprobs)
    for name in ("grpo", "gigpo", "gaca"):
        out = compute_advantages(a.steps, name)
        assert out.advantage.shape == (a.num_rows,) and torch.isfinite(out.advantage).all()


def test_prompt_memory_window_uses_previous_actions():
    cfg = RolloutConfig(group_size=1, history_length=1)
    policy = ScriptedPolicy(forward_then)
    collect_rollouts(policy, pool_of(1, max_steps=3), [2], cfg)
    assert len(policy.prompts) == 3
    assert policy.prompts[0].startswith("<user>")  # the policy's build_prompt was applied
    assert "[Observation 2: You are in room 1. | Action 2: go forward]" in policy.prompts[2]
    assert "Observation 1:" not in policy.prompts[2]


def test_expert_examples_follow_the_plan():
    pool = pool_of(2, max_steps=10)
    data = collect_expert_examples(pool, [0, 1, 2], prompt=PromptFormat(history_length=2), thought="go")
    assert data.success_rate == 1.0 and data.episodes == 3
    assert len(data.examples) == 1 + 2 + 3
    assert all(r == format_response("go forward", "go") for _, r in data.examples)
    assert data.examples[0][0].startswith(pool.intro)


def test_expert_detours_teach_recovery_and_are_not_targets():
    seeds = [2] * 8  # target room 3: three expert steps without detours

    def run(seed):
        return collect_expert_examples(pool_of(4, max_steps=10), seeds, prompt=PromptFormat(history_length=1),
                                       detour_prob=0.4, seed=seed)

    data = run(1)
    # every target is the expert's action; the detours show up only in the prompts' history
    assert all(r == format_response("go forward") for _, r in data.examples)
    detoured = [p for p, _ in data.examples if "Action" in p and "go forward]" not in p]
    assert detoured, "no example starts after a detour"
    assert run(1).examples == data.examples  # seeded
    assert run(2).examples != data.examples
    plain = collect_expert_examples(pool_of(4, max_steps=10), seeds, prompt=PromptFormat(history_length=1))
    assert len(plain.examples) == 3 * len(seeds)
    with pytest.raises(ValueError, match="detour_prob"):
        collect_expert_examples(pool_of(1), [0], prompt=PromptFormat(history_length=1), detour_prob=1.0)


def test_expert_examples_need_expert_plans():
    class NoPlan(CorridorEnv):
        def _info(self, valid):
            info = super()._info(valid)
            del info["expert_plan"]
            return info

    with pytest.raises(RuntimeError, match="expert=True"):
        collect_expert_examples(pool_of(1, env_cls=NoPlan), [0], prompt=PromptFormat(history_length=2))


def test_real_tiny_policy_rollout_logprobs_match_score():
    from gaca.policy import PolicyConfig, fit_tiny_tokenizer, load_policy
    from gaca.rollout import render_prompt

    texts = [render_prompt("reach room 2", f"You are in room {k}.", list(CorridorEnv.ACTIONS), [],
                           history_length=2, step=0) for k in range(3)]
    texts += [format_response(a, "x") for a in CorridorEnv.ACTIONS]
    tok = fit_tiny_tokenizer(texts * 4, 400, cache_dir=None)
    policy = load_policy(PolicyConfig(model="tiny", tiny_hidden=32, tiny_layers=1, tiny_heads=2), tokenizer=tok)
    cfg = RolloutConfig(group_size=2, max_new_tokens=6)
    batch = collect_rollouts(policy, pool_of(2, max_steps=2), [1], cfg, generator=torch.Generator().manual_seed(0))
    assert batch.num_rows == 4 and batch.invalid.all()  # an untrained model writes no valid action
    with torch.no_grad():
        scored = batch.rows.score(policy, temperature=1.0).logprobs
    assert torch.allclose(scored, batch.steps.logprobs, atol=1e-4)
    assert batch.forward_passes > 0


class LampRoom:
    """Walk to the lamp, then use it; "go to lamp" is inadmissible once there (ALFWorld's pattern)."""

    max_steps = 8

    def reset(self, *, seed, options=None):
        self.at_lamp = False
        return "You are in the room.", self._info(True, False)

    def _info(self, valid, won):
        return {"task": "use the lamp", "task_id": "lamp", "task_type": "lamp", "valid": valid, "won": won,
                "admissible_actions": ["use lamp"] if self.at_lamp else ["go to lamp"],
                "expert_plan": ["use lamp"] if self.at_lamp else ["go to lamp", "use lamp"]}

    def step(self, action):
        valid = action in self._info(True, False)["admissible_actions"]
        if not valid:
            return "Nothing happens.", 0.0, False, False, self._info(False, False)
        if action == "go to lamp":
            self.at_lamp = True
            return "You arrive at the lamp.", 0.0, False, False, self._info(True, False)
        return "The lamp is on.", 10.0, True, False, self._info(True, True)

    def close(self):
        pass


def test_expert_repeats_teach_what_to_do_after_a_failed_action():
    from gaca.envs import EnvPool

    with EnvPool.from_envs([LampRoom() for _ in range(8)]) as pool:
        data = collect_expert_examples(pool, list(range(40)), prompt=PromptFormat(history_length=2), repeat_prob=0.5,
                                       seed=1)
    assert data.success_rate == 1.0
    after_failure = [r for p, r in data.examples if "Nothing happens." in p]
    assert after_failure and all("use lamp" in r for r in after_failure)
    assert all("go to lamp" not in r for p, r in data.examples if "You arrive at the lamp." in p)
    with EnvPool.from_envs([LampRoom()]) as pool:  # off by default: no failed action in expert play
        plain = collect_expert_examples(pool, [0, 1], prompt=PromptFormat(history_length=2))
    assert not any("Nothing happens." in p for p, _ in plain.examples)


def test_state_anchor_needs_a_state_key():
    assert anchor_text("obs", ["a"], "state", state_key="k") == "k"
    with pytest.raises(ValueError, match="state_key"):
        anchor_text("obs", ["a"], "state")
