"""Choose mode on the toy corridor with a real tiny policy: admissible by construction, action-level log-probs."""

from __future__ import annotations

import math

import pytest
import torch

from gaca.advantage import compute_advantages
from gaca.envs.episodes import Turn
from gaca.policy.choice import choice_logits, choice_logprobs
from gaca.rollout import (
    ChooseAgent,
    NoCandidatesError,
    PromptFormat,
    RolloutConfig,
    collect_rollouts,
    format_response,
)
from gaca.testing.fakes import CorridorEnv, pool_of


def choose_cfg(**kw) -> RolloutConfig:
    return RolloutConfig(**{"group_size": 3, "tasks_per_iter": 2, "action_mode": "choose", "temperature": 0.7, **kw})


def rollout(policy, cfg, seed=0, seeds=(0, 1), max_steps=4):
    pool = pool_of(len(seeds) * cfg.group_size, max_steps=max_steps)
    return collect_rollouts(policy, pool, list(seeds), cfg, generator=torch.Generator().manual_seed(seed))


def test_choices_are_admissible_and_the_update_rescores_their_logprobs(make_policy):
    policy = make_policy()
    cfg = choose_cfg()
    batch = rollout(policy, cfg)
    assert set(batch.actions) <= set(CorridorEnv.ACTIONS) and not batch.invalid.any()
    s = batch.steps
    assert s.logprobs.shape == (batch.num_rows, 1) and s.mask.all()
    # the step table holds log π(a|s) of the chosen action, which is also the update's old log-prob
    assert torch.equal(s.logprobs, batch.rows.old_logprobs)
    with torch.no_grad():
        rescored = batch.rows.score(policy, temperature=0.7, with_entropy=True)
    torch.testing.assert_close(rescored.logprobs, batch.rows.old_logprobs, atol=1e-5, rtol=0)
    assert (s.logprobs <= 0).all() and (s.logprobs > -math.log(3) * 20).all()
    # the exact entropy of π(·|s) over the 3 actions, per row, is what the rollout records
    torch.testing.assert_close(rescored.entropy[:, 0], batch.steps.entropy, atol=1e-5, rtol=0)
    assert ((batch.steps.entropy >= 0) & (batch.steps.entropy <= math.log(3) + 1e-6)).all()
    # one forward pass per step batch: as many as the longest episode's steps
    assert batch.forward_passes == max(e.length for e in batch.episodes)
    out = compute_advantages(s, "gaca")
    torch.testing.assert_close(out.nll, -s.logprobs[:, 0])  # criticality reads the decision surprisal


def test_same_seed_same_choices_and_batched_scoring_equals_one_at_a_time(make_policy):
    policy = make_policy()
    hot = choose_cfg(temperature=20.0)  # the untrained model all but always picks the short "look" at T = 0.7
    a, b, c = rollout(policy, hot, 3), rollout(policy, hot, 3), rollout(policy, hot, 4)
    assert a.actions == b.actions and torch.equal(a.steps.logprobs, b.steps.logprobs)
    assert a.actions != c.actions or not torch.equal(a.steps.logprobs, c.steps.logprobs)
    sets = a.rows.choices
    with torch.no_grad():
        together = policy.score_choices(sets)
        for i, one in enumerate(sets):
            alone = policy.score_choices([one])
            torch.testing.assert_close(alone.logprob_sum[0], together.logprob_sum[i], atol=1e-5, rtol=0)
    # greedy (T = 0): a pool of one environment, episode after episode, takes the same actions
    greedy = choose_cfg(temperature=1.0)
    agent_cfg = dict(temperature=0.0)
    batched = collect_rollouts(policy, pool_of(6, max_steps=4), [0, 1], greedy,
                               generator=torch.Generator().manual_seed(0))
    from gaca.envs.episodes import play_episodes

    single = play_episodes(pool_of(1, max_steps=4), [0, 0, 0, 1, 1, 1],
                           greedy.agent(policy, pool_of(1), **agent_cfg))
    batched_greedy = play_episodes(pool_of(6, max_steps=4), [0, 0, 0, 1, 1, 1],
                                   greedy.agent(policy, pool_of(6), **agent_cfg))
    assert [[s.decision.action for s in e.steps] for e in single.episodes] == \
        [[s.decision.action for s in e.steps] for e in batched_greedy.episodes]
    assert batched.num_rows > 0


def test_tokens_option_puts_the_chosen_responses_token_logprobs_in_the_step_table(make_policy):
    policy = make_policy()
    batch = rollout(policy, choose_cfg(step_nll="tokens"))
    rows = batch.rows
    assert rows.old_logprobs.shape == (batch.num_rows, 1)  # the PPO ratio stays action-level
    for i in range(batch.num_rows):
        s = rows.choices[i]
        cand = s.candidates[int(rows.chosen[i])]
        n = int(batch.steps.mask[i].sum())
        assert n == cand.numel()
        ids = torch.cat([s.prompt_ids, cand])
        with torch.no_grad():  # teacher-forced: the candidate's own tokens after the prompt and shared prefix
            ref = policy.score([s.prompt_ids], cand[None], torch.ones(1, n, dtype=torch.bool)).logprobs[0]
        torch.testing.assert_close(batch.steps.logprobs[i, :n], ref, atol=1e-5, rtol=0)
        assert ids.numel() > n


def test_mean_score_divides_by_the_candidates_own_tokens(make_policy):
    policy = make_policy()
    batch = rollout(policy, choose_cfg(choice_score="mean"))
    with torch.no_grad():
        scores = policy.score_choices(batch.rows.choices)
    logp = choice_logprobs(scores.logprob_sum / scores.num_tokens.clamp_min(1), scores.mask, 0.7)
    torch.testing.assert_close(logp.gather(1, batch.rows.chosen[:, None]), batch.rows.old_logprobs, atol=1e-5,
                               rtol=0)
    assert not torch.allclose(choice_logits(scores, "sum"), choice_logits(scores, "mean"))


def turn(actions) -> Turn:
    return Turn(episode=2, seed=7, step=3, observation="You are in room 0.",
                info={"task": "reach room 1", "admissible_actions": list(actions)}, history=())


def test_bad_candidate_sets_raise_one_clear_line(make_policy):
    policy = make_policy()
    agent = ChooseAgent(policy, prompt=PromptFormat("x", 0), thought="", temperature=1.0, choice_score="sum",
                        step_nll="decision", max_candidates=2)
    with pytest.raises(NoCandidatesError, match=r"episode 2 \(seed 7\) offers no admissible action at step 3"):
        agent.act([turn([])])
    with pytest.raises(NoCandidatesError, match=r"offers 3 admissible actions.*rollout\.max_candidates=2"):
        agent.act([turn(CorridorEnv.ACTIONS)])
    # duplicates are one candidate: π is over distinct actions
    d = agent.act([turn(["look", "go back", "look"])])[0]
    assert d.payload.actions == ("look", "go back") and d.action in ("look", "go back")
    assert d.payload.choices.size == 2
    with pytest.raises(ValueError, match=r"rollout\.action_mode"):
        RolloutConfig(action_mode="pick")


def test_candidates_are_the_responses_the_policy_was_taught(make_policy):
    policy = make_policy()
    agent = ChooseAgent(policy, prompt=PromptFormat("x", 0), thought="x", temperature=1.0, choice_score="sum",
                        step_nll="decision", max_candidates=8)
    t = turn(CorridorEnv.ACTIONS)
    s = agent.act([t])[0].payload.choices
    prompt = policy.encode_prompt(policy.build_prompt(PromptFormat("x", 0).render(t)))
    assert torch.equal(s.prompt_ids[: prompt.numel()], prompt)
    shared = s.prompt_ids[prompt.numel():]  # the tokens every candidate response starts with
    for action, cand in zip(CorridorEnv.ACTIONS, s.candidates, strict=True):
        full = policy.encode_response(format_response(action, "x"))  # what SFT trains on
        assert torch.cat([shared, cand]).tolist() == full.tolist()
