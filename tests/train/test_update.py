"""ppo_update on a real (very small) policy: direction, micro-batch invariance, KL, non-finite guard."""

from __future__ import annotations

import logging

import pytest
import torch

from gaca.advantage import compute_advantages
from gaca.rollout import RolloutConfig, collect_rollouts
from gaca.testing.fakes import pool_of
from gaca.train.config import PPOConfig
from gaca.train.update import (
    NonFiniteGuard,
    NonFiniteLossError,
    make_optimizer,
    optimizer_steps_taken,
    ppo_update,
    set_warmup_lr,
)


def flat(policy):
    return torch.cat([p.detach().flatten().clone() for p in policy.trainable_parameters()])


def row_logprob(policy, batch):
    with torch.no_grad():
        lp = batch.rows.score(policy, temperature=1.0).logprobs
    return lp.sum(1)


def test_update_moves_toward_positive_advantage(make_policy, rollout_batch):
    policy = make_policy()
    n = rollout_batch.num_rows
    adv = torch.zeros(n)
    adv[0], adv[1] = 1.0, -1.0
    before = row_logprob(policy, rollout_batch)
    cfg = PPOConfig(lr=1e-2, num_minibatches=1, micro_batch_size=4)
    opt = make_optimizer(policy, cfg)
    stats = ppo_update(policy, opt, rollout_batch, adv, cfg, generator=torch.Generator().manual_seed(0))
    after = row_logprob(policy, rollout_batch)
    assert after[0] > before[0] and after[1] < before[1]
    # one minibatch: the update starts on-policy (ratio 1, nothing clipped, KL to old ~ 0)
    m = stats.metrics
    assert m["policy/ratio_mean"] == pytest.approx(1.0, abs=1e-4)
    assert m["policy/clip_frac"] == 0.0 and m["policy/approx_kl"] < 1e-8
    assert m["policy/updates"] == 1.0 and m["policy/skipped_updates"] == 0.0
    for key in ("loss/total", "loss/policy", "policy/grad_norm", "policy/nll", "perf/update_tokens_per_s"):
        assert key in m and torch.isfinite(torch.tensor(m[key]))
    assert stats.tokens == int(rollout_batch.rows.mask.sum())
    assert stats.forward_passes == -(-n // 4)


class RecordingSGD(torch.optim.SGD):
    """SGD that keeps a copy of every gradient it steps with."""

    def __init__(self, params, lr):
        super().__init__(params, lr=lr)
        self.grads = []

    def step(self, closure=None):
        self.grads.append(torch.cat([p.grad.flatten().clone() for g in self.param_groups for p in g["params"]]))
        return super().step(closure)


@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean"])
def test_micro_batching_does_not_change_the_update(make_policy, rollout_batch, agg):
    adv = torch.linspace(-1, 1, rollout_batch.num_rows)
    results, grads = [], []
    for micro in (1, 5, 64):
        cfg = PPOConfig(lr=1e-3, num_minibatches=2, micro_batch_size=micro, loss_agg=agg)
        policy = make_policy()
        ppo_update(policy, make_optimizer(policy, cfg), rollout_batch, adv, cfg,
                   generator=torch.Generator().manual_seed(3))
        results.append(flat(policy))
        policy = make_policy()
        sgd = RecordingSGD(list(policy.trainable_parameters()), lr=1e-3)
        ppo_update(policy, sgd, rollout_batch, adv, cfg, generator=torch.Generator().manual_seed(3))
        grads.append(torch.stack(sgd.grads))
    # each minibatch's gradient is the same however it is cut into micro-batches (float32 rounding only)
    assert grads[0].shape[0] == 2
    for g in grads[1:]:
        torch.testing.assert_close(g, grads[0], rtol=1e-4, atol=1e-7)
    # so are AdamW's updates; Adam divides by |g|, which magnifies the rounding of near-zero gradients
    assert torch.allclose(results[0], results[1], atol=2e-5)
    assert torch.allclose(results[0], results[2], atol=2e-5)
    assert not torch.allclose(results[0], flat(make_policy()))


def test_kl_to_reference_costs_one_extra_forward_per_micro_batch(make_policy, rollout_batch):
    policy = make_policy()
    adv = torch.linspace(-1, 1, rollout_batch.num_rows)
    cfg = PPOConfig(lr=1e-2, epochs=2, num_minibatches=2, micro_batch_size=3, kl_coef=0.1)
    stats = ppo_update(policy, make_optimizer(policy, cfg), rollout_batch, adv, cfg,
                       generator=torch.Generator().manual_seed(0))
    n = rollout_batch.num_rows
    micro = sum(-(-len(c) // 3) for c in torch.tensor_split(torch.arange(n), 2))
    assert stats.forward_passes == 2 * 2 * micro
    # the first minibatch starts at the reference, later ones have moved away from it
    assert stats.metrics["loss/kl"] > 0
    assert stats.metrics["policy/updates"] == 4.0


def test_gaca_costs_no_model_call_beyond_grpo_and_reads_the_rollouts_logprobs(make_policy):
    # A whole iteration (rollout, advantages, update) from the same seed: GACA's criticality must come
    # from the rollout's own log-probs, so the iteration's model calls equal GRPO's exactly.
    calls, nlls = {}, {}
    for name in ("grpo", "gaca"):
        policy = make_policy()
        rng = torch.Generator().manual_seed(0)
        batch = collect_rollouts(policy, pool_of(6, max_steps=3), [0, 1],
                                 RolloutConfig(group_size=3, tasks_per_iter=2, max_new_tokens=8), generator=rng)
        adv = compute_advantages(batch.steps, name)
        cfg = PPOConfig(micro_batch_size=4)
        ppo_update(policy, make_optimizer(policy, cfg), batch, adv.advantage, cfg, generator=rng)
        calls[name], nlls[name] = policy.forward_calls, adv.nll
        rollout_nll = -(batch.steps.logprobs * batch.steps.mask).sum(1) / batch.steps.mask.sum(1)
    assert calls["gaca"] == calls["grpo"] > 0
    torch.testing.assert_close(nlls["gaca"], rollout_nll)
    assert torch.all(nlls["grpo"] == 0)  # GRPO does not look at the log-probs at all


def test_non_finite_loss_skips_the_update_and_stops_after_three(make_policy, rollout_batch, caplog):
    policy = make_policy()
    before = flat(policy)
    adv = torch.full((rollout_batch.num_rows,), float("nan"))
    cfg = PPOConfig(num_minibatches=2)
    guard = NonFiniteGuard(limit=3)
    opt = make_optimizer(policy, cfg)
    with caplog.at_level(logging.WARNING):
        stats = ppo_update(policy, opt, rollout_batch, adv, cfg, guard=guard)
    assert stats.skipped == 2 and guard.streak == 2 and "update skipped" in caplog.text
    assert torch.equal(flat(policy), before)
    # a finite update resets the streak
    ppo_update(policy, opt, rollout_batch, torch.zeros(rollout_batch.num_rows), cfg, guard=guard)
    assert guard.streak == 0 and guard.total == 2
    with pytest.raises(NonFiniteLossError, match="3 consecutive"):
        ppo_update(policy, opt, rollout_batch, adv, PPOConfig(num_minibatches=3), guard=guard)


def test_advantage_shape_is_checked(make_policy, rollout_batch):
    policy = make_policy()
    with pytest.raises(ValueError, match="advantages must have shape"):
        ppo_update(policy, make_optimizer(policy, PPOConfig()), rollout_batch, torch.zeros(2), PPOConfig())


def test_warmup_ramps_lr_and_continues_from_the_optimizer_state(make_policy, rollout_batch):
    policy = make_policy()
    cfg = PPOConfig(lr=1e-3, warmup_steps=4, num_minibatches=2, micro_batch_size=64)
    opt = make_optimizer(policy, cfg)
    adv = torch.linspace(-1.0, 1.0, rollout_batch.num_rows)
    lrs = []
    for _ in range(3):  # 2 optimizer steps per call
        stats = ppo_update(policy, opt, rollout_batch, adv, cfg, generator=torch.Generator().manual_seed(0))
        lrs.append(stats.metrics["policy/lr"])
    # steps 1..6 use lr · min(1, k/4): the calls end on steps 2, 4 and 6
    assert lrs == pytest.approx([0.5e-3, 1e-3, 1e-3])
    assert optimizer_steps_taken(opt) == 6
    # a fresh optimizer that loads this one's state (a resumed run) continues the ramp where it was
    again = make_optimizer(policy, cfg)
    again.load_state_dict(opt.state_dict())
    assert optimizer_steps_taken(again) == 6
    assert set_warmup_lr(make_optimizer(policy, cfg), cfg) == pytest.approx(0.25e-3)


def test_choose_mode_update_is_action_level_starts_on_policy_and_follows_the_advantage(make_policy):
    rcfg = RolloutConfig(group_size=3, tasks_per_iter=2, action_mode="choose", temperature=3.0)

    def fresh():
        policy = make_policy()
        batch = collect_rollouts(policy, pool_of(6, max_steps=3), [0, 1], rcfg,
                                 generator=torch.Generator().manual_seed(0))
        return policy, batch

    policy, batch = fresh()
    n = batch.num_rows
    with torch.no_grad():
        before = batch.rows.score(policy, temperature=3.0).logprobs[:, 0]
    torch.testing.assert_close(before, batch.rows.old_logprobs[:, 0], atol=1e-5, rtol=0)
    cfg = PPOConfig(lr=1e-3, num_minibatches=1, micro_batch_size=4, kl_coef=0.1, entropy_coef=0.01)
    stats = ppo_update(policy, make_optimizer(policy, cfg), batch, torch.randn(n, generator=torch.Generator()
                       .manual_seed(1)), cfg, generator=torch.Generator().manual_seed(0))
    m = stats.metrics
    # one minibatch of one epoch: on-policy, so the ratio is 1 and the KL to the (initial) reference 0
    assert m["policy/ratio_mean"] == pytest.approx(1.0, abs=1e-5) and m["policy/approx_kl"] < 1e-10
    assert m["loss/kl"] == pytest.approx(0.0, abs=1e-6)
    # the entropy term is the action-level one: the mean over rows of H(π(·|s)) over the candidates
    assert m["loss/entropy"] == pytest.approx(float(batch.steps.entropy.mean()), abs=1e-5)
    assert stats.tokens == n  # one action-level term per row

    # direction: credit "go forward" wherever it was chosen, blame every other choice
    policy, batch = fresh()
    forward = torch.tensor([a == "go forward" for a in batch.actions])
    assert forward.any() and not forward.all()
    adv = torch.where(forward, 1.0, -1.0)
    cfg = PPOConfig(lr=1e-2, num_minibatches=1, micro_batch_size=4)
    ppo_update(policy, make_optimizer(policy, cfg), batch, adv, cfg, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        after = batch.rows.score(policy, temperature=3.0).logprobs[:, 0]
    assert after[forward].mean() > before[forward].mean() and after[~forward].mean() < before[~forward].mean()
