"""verl's own ``compute_advantage`` on DataProto batches of both layouts, checked against
``gaca.advantage`` on the equivalent step table; verl's policy loss on the result."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

pytest.importorskip("verl")
omegaconf = pytest.importorskip("omegaconf")

from verl.trainer.ppo import core_algos, ray_trainer  # noqa: E402
from verl.workers.config import ActorConfig  # noqa: E402

import gaca.integrations.verl as gv  # noqa: E402
from gaca.advantage import StepBatch, compute_advantages  # noqa: E402
from gaca.testing.synthetic import synthetic_batch  # noqa: E402
from gaca.testing.verl_batches import expected_tokens, step_rows_batch, trajectory_rows_batch  # noqa: E402

ATOL = 1e-5

CASES = [
    ("gaca", {"kappa": 0.25}),
    ("gaca", {"kappa": 1.0, "w0": 0.3, "criticality": "rank", "weight_map": "sigmoid", "eps": 1e-4}),
    ("gaca", {"mixture": "additive", "omega": 0.7, "no_peer": "zero", "criticality": "ratio"}),
    ("gigpo", {}),
    ("gigpo", {"episode_stats": "step", "omega": 0.5}),
    ("fixed_mix", {"w0": 0.4}),
]


def _dense_rewards(sb, seed):
    """Intermediate step rewards too (the synthetic batch's are sparse), so that where a turn's
    reward sits in a trajectory row is tested."""
    gen = torch.Generator().manual_seed(seed)
    reward = torch.randint(-2, 3, (len(sb),), generator=gen).float() * 0.5
    return replace(sb, reward=reward)


def _algo_config(options: dict, **verl_keys) -> omegaconf.DictConfig:
    return omegaconf.OmegaConf.create({"adv_estimator": "gaca", "gamma": 0.9, **verl_keys, "gaca": options})


def _verl_compute(data, name, options, *, gamma=0.9, norm_adv_by_std_in_grpo=True):
    return ray_trainer.compute_advantage(
        data, adv_estimator=name, gamma=gamma, lam=1.0, num_repeat=1,
        norm_adv_by_std_in_grpo=norm_adv_by_std_in_grpo, config=_algo_config(options),
    )


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize(("name", "options"), CASES)
def test_step_rows_match_library(name, options, seed):
    sb = synthetic_batch(300, group_size=4, tokens=8, seed=seed)
    data, owner = step_rows_batch(sb, seed=seed)
    out = _verl_compute(data, name, options)
    expected = compute_advantages(sb, name, gamma=0.9, **options).advantage
    torch.testing.assert_close(out.batch["advantages"], expected_tokens(expected, owner), atol=ATOL, rtol=0)
    torch.testing.assert_close(out.batch["returns"], out.batch["advantages"])
    assert out.batch["advantages"].dtype == torch.float32


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize(("name", "options"), CASES)
def test_trajectory_rows_match_library(name, options, seed):
    sb = synthetic_batch(300, group_size=4, tokens=8, seed=seed + 10)
    if seed == 1:
        sb = _dense_rewards(sb, seed)
    data, owner = trajectory_rows_batch(sb, seed=seed)
    out = _verl_compute(data, name, options)
    expected = compute_advantages(sb, name, gamma=0.9, **options).advantage
    advantages = out.batch["advantages"]
    torch.testing.assert_close(advantages, expected_tokens(expected, owner), atol=ATOL, rtol=0)
    # Observation tokens and padding get nothing.
    assert bool((advantages[data.batch["response_mask"] == 0] == 0).all())


def test_trajectory_table_structure():
    sb = _dense_rewards(synthetic_batch(200, group_size=4, tokens=6, seed=3), 3)
    data, owner = trajectory_rows_batch(sb, seed=3)
    table = gv.build_step_table(data, gv.VerlSettings())
    assert table.layout == "trajectory"
    assert len(table.batch) == len(sb)
    # Each step row of the table holds exactly one original step: same reward, length, NLL sum.
    mapping = torch.full((len(sb),), -1, dtype=torch.int64)
    mapping[owner[owner >= 0]] = table.token_step[owner >= 0]
    assert bool((mapping >= 0).all()) and len(set(mapping.tolist())) == len(sb)
    torch.testing.assert_close(table.batch.reward[mapping], sb.reward)
    torch.testing.assert_close(table.batch.token_count[mapping], sb.token_count)
    torch.testing.assert_close(table.batch.logprob_sum[mapping], sb.logprob_sum, atol=1e-4, rtol=0)
    torch.testing.assert_close(table.batch.step[mapping], sb.step)
    # Anchors partition each group's steps as the original anchors do.
    for g in sb.group_id.unique().tolist():
        rows = torch.nonzero(sb.group_id == g).flatten()
        ours, theirs = table.batch.anchor[mapping[rows]], sb.anchor[rows]
        assert bool(((ours.unsqueeze(0) == ours.unsqueeze(1)) == (theirs.unsqueeze(0) == theirs.unsqueeze(1))).all())


def test_trajectory_reward_sum_is_preserved():
    sb = _dense_rewards(synthetic_batch(120, group_size=3, tokens=5, seed=4), 4)
    data, _ = trajectory_rows_batch(sb, seed=4)
    table = gv.build_step_table(data, gv.VerlSettings(layout="trajectory"))
    torch.testing.assert_close(table.batch.reward.sum(), data.batch["token_level_rewards"].sum())


def test_verl_gamma_and_norm_are_used_unless_overridden():
    sb = _dense_rewards(synthetic_batch(200, group_size=4, tokens=6, seed=5), 5)
    data, owner = step_rows_batch(sb)
    out = _verl_compute(data, "gaca", {}, gamma=0.5, norm_adv_by_std_in_grpo=False)
    expected = compute_advantages(sb, "gaca", gamma=0.5, norm="mean").advantage
    torch.testing.assert_close(out.batch["advantages"], expected_tokens(expected, owner), atol=ATOL, rtol=0)
    data, owner = step_rows_batch(sb)
    out = _verl_compute(data, "gaca", {"gamma": 0.99, "norm": "mean_std"}, gamma=0.5, norm_adv_by_std_in_grpo=False)
    expected = compute_advantages(sb, "gaca", gamma=0.99, norm="mean_std").advantage
    torch.testing.assert_close(out.batch["advantages"], expected_tokens(expected, owner), atol=ATOL, rtol=0)
    # And the two differ, so the comparison above can fail.
    assert not torch.allclose(compute_advantages(sb, "gaca", gamma=0.5, norm="mean").advantage, expected)


def test_step_rows_without_step_key_use_row_order():
    sb = synthetic_batch(150, group_size=4, tokens=6, seed=6, shuffle=False)  # rows in step order
    data, owner = step_rows_batch(sb, with_step=False)
    out = _verl_compute(data, "gaca", {})
    expected = compute_advantages(sb, "gaca", gamma=0.9).advantage
    torch.testing.assert_close(out.batch["advantages"], expected_tokens(expected, owner), atol=ATOL, rtol=0)


def test_similarity_grouping_reads_text_anchors():
    sb = synthetic_batch(150, group_size=4, tokens=6, seed=7)
    data, owner = step_rows_batch(sb)
    out = _verl_compute(data, "gigpo", {"similarity": 0.9})
    texts = list(data.non_tensor_batch["anchor_obs"])
    expected = compute_advantages(replace(sb, anchor_text=texts), "gigpo", gamma=0.9, similarity=0.9).advantage
    torch.testing.assert_close(out.batch["advantages"], expected_tokens(expected, owner), atol=ATOL, rtol=0)


def test_other_estimators_are_verl_unchanged():
    sb = synthetic_batch(100, group_size=4, tokens=6, seed=8)
    data, _ = step_rows_batch(sb)
    reference = data.select(deepcopy=True)
    out = ray_trainer.compute_advantage(data, adv_estimator="grpo", config=_algo_config({}))
    original = gv.estimator._original_compute_advantage()
    assert original is not gv.compute_advantage
    want = original(reference, adv_estimator="grpo", config=_algo_config({}))
    torch.testing.assert_close(out.batch["advantages"], want.batch["advantages"])
    # GRPO gives every step row of this layout the same credit for its own token rewards, which
    # differs from GACA's step-aware credit: the routing matters.
    gaca_out = _verl_compute(step_rows_batch(sb)[0], "gaca", {})
    assert not torch.allclose(gaca_out.batch["advantages"], out.batch["advantages"])


def test_registry_entries_refuse_to_run_blind():
    for name in gv.VERL_ESTIMATORS:
        fn = core_algos.get_adv_estimator_fn(name)
        with pytest.raises(RuntimeError, match="VERL_USE_EXTERNAL_MODULES"):
            fn(token_level_rewards=torch.zeros(2, 3), response_mask=torch.ones(2, 3), index=np.array(["a", "a"]))
    assert gv.is_installed()
    gv.install()  # idempotent
    assert gv.is_installed()


def test_bad_settings_are_reported_by_name():
    data, _ = step_rows_batch(synthetic_batch(40, group_size=2, tokens=4, seed=9))
    with pytest.raises(ValueError, match="kapa"):
        _verl_compute(data, "gaca", {"kapa": 0.3})
    with pytest.raises(ValueError, match="criticality"):
        _verl_compute(data, "gaca", {"criticality": "entropy"})
    with pytest.raises(ValueError, match="layout"):
        _verl_compute(data, "gaca", {"layout": "rows"})
    with pytest.raises(KeyError, match="anchor_obs"):
        _verl_compute(data, "gaca", {"layout": "step"}) if data.non_tensor_batch.pop("anchor_obs") is not None else None


def test_verl_policy_loss_on_gaca_advantages():
    sb = synthetic_batch(200, group_size=4, tokens=8, seed=11)
    data, _ = trajectory_rows_batch(sb, seed=11)
    out = _verl_compute(data, "gaca", {"kappa": 0.5})
    advantages = out.batch["advantages"]
    mask = out.batch["response_mask"]
    old = out.batch["rollout_log_probs"]
    config = ActorConfig(strategy="fsdp", rollout_n=4, ppo_micro_batch_size_per_gpu=1)
    loss_fn = core_algos.get_policy_loss_fn("vanilla")

    # On-policy (ratio 1, nothing clipped): loss = −Σ A·m / Σ m, d loss / d logp = −A·m / Σ m.
    log_prob = old.clone().requires_grad_(True)
    loss, metrics = loss_fn(old_log_prob=old, log_prob=log_prob, advantages=advantages,
                            response_mask=mask, loss_agg_mode="token-mean", config=config)
    denominator = mask.sum()
    torch.testing.assert_close(loss, -(advantages * mask).sum() / denominator, atol=1e-6, rtol=0)
    loss.backward()
    torch.testing.assert_close(log_prob.grad, -(advantages * mask) / denominator, atol=1e-7, rtol=0)
    assert metrics["actor/pg_clipfrac"] == 0.0
    assert float(loss.abs()) > 0 or float(advantages.abs().sum()) == 0

    # Off-policy: PPO's clipped surrogate computed here from its definition.
    gen = torch.Generator().manual_seed(0)
    log_prob = (old + 0.3 * torch.randn(old.shape, generator=gen)).requires_grad_(True)
    loss, metrics = loss_fn(old_log_prob=old, log_prob=log_prob, advantages=advantages,
                            response_mask=mask, loss_agg_mode="token-mean", config=config)
    ratio = torch.exp((log_prob - old).clamp(-20, 20)).detach()
    clipped = torch.maximum(-advantages * ratio, -advantages * ratio.clamp(0.8, 1.2))
    dual = torch.where(advantages < 0, torch.minimum(clipped, -advantages * 3.0), clipped)
    torch.testing.assert_close(loss.detach(), (dual * mask).sum() / denominator, atol=1e-5, rtol=0)
    assert 0.0 < metrics["actor/pg_clipfrac"] < 1.0
    loss.backward()
    assert bool(torch.isfinite(log_prob.grad).all())
    assert bool((log_prob.grad[mask == 0] == 0).all())


def test_v1_trainer_batch_gets_an_actionable_error():
    """verl's v1 trainer hands compute_advantage only these fields (trainer_base._compute_advantage)."""
    from verl import DataProto

    data = DataProto.from_dict(
        tensors={"response_mask": torch.ones(4, 3, dtype=torch.int64), "token_level_rewards": torch.zeros(4, 3),
                 "old_log_probs": -torch.ones(4, 3)},
        non_tensors={"uid": np.array(["a", "a", "b", "b"], dtype=object)},
    )
    with pytest.raises(KeyError, match="use_v1=False"):
        _verl_compute(data, "gaca", {})


def test_rloo_by_default_is_verls_rloo():
    # One row per trajectory (verl's outcome layout), groups of 2 to 6: classic RLOO, unscaled.
    gen = torch.Generator().manual_seed(0)
    sizes = torch.randint(2, 7, (40,), generator=gen)
    group = torch.repeat_interleave(torch.arange(40), sizes)
    n = len(group)
    score = torch.randn(n, generator=gen) * 3
    batch = StepBatch(group_id=group, traj_id=torch.arange(n), step=torch.zeros(n, dtype=torch.int64),
                      anchor=torch.zeros(n, dtype=torch.int64), reward=score, logprobs=-torch.rand(n, 2),
                      mask=torch.ones(n, 2, dtype=torch.bool))
    token_rewards = torch.zeros(n, 4)
    token_rewards[:, -1] = score
    verl_adv, _ = core_algos.compute_rloo_outcome_advantage(token_rewards, torch.ones(n, 4),
                                                           np.array([f"g{g}" for g in group.tolist()], dtype=object))
    torch.testing.assert_close(compute_advantages(batch, "rloo").advantage, verl_adv[:, 0], rtol=1e-5, atol=1e-5)
    scaled = compute_advantages(batch, "rloo", norm="mean_std").advantage
    assert (scaled - verl_adv[:, 0]).abs().max() > 0.1  # the std-scaled variant is not RLOO
