"""A verl-agent batch through the plugin: its penalised scores, its rows reordered without a step key,
its GiGPO keywords; ``conventions=verl-agent`` reproduces its GiGPO."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("verl")

from gaca.advantage import StepBatch, compute_advantages
from gaca.integrations.verl import compute_advantage
from gaca.integrations.verl.tables import recover_step_order
from gaca.testing.synthetic import synthetic_batch
from gaca.testing.verl_batches import expected_tokens, verl_agent_batch


def all_failed_with_invalid_actions(seed):
    """A synthetic batch where half the groups fail entirely and a third of the steps are invalid."""
    sb = synthetic_batch(240, group_size=4, tokens=6, seed=seed)
    failed = (sb.group_id % 2) == 0
    reward = torch.where(failed, 0.0, sb.reward)
    sb = StepBatch(**{k: getattr(sb, k) for k in ("group_id", "traj_id", "step", "anchor", "logprobs", "mask")},
                   reward=reward)
    invalid = torch.rand(len(sb), generator=torch.Generator().manual_seed(seed)) < 0.33
    return sb, invalid


@pytest.mark.parametrize("seed", range(3))
def test_gigpo_on_a_verl_agent_batch_equals_the_library_with_its_conventions(seed):
    sb, invalid = all_failed_with_invalid_actions(seed)
    data, owner, expected_batch = verl_agent_batch(sb, invalid, coef=0.1, gamma=0.9, seed=seed)
    config = {"gaca": {"conventions": "verl-agent"}}
    compute_advantage(data, "gigpo", gamma=0.9, config=config, step_advantage_w=0.5, gigpo_mode="mean_norm")
    want = compute_advantages(expected_batch, "gigpo", conventions="verl-agent", gamma=0.9, omega=0.5, norm="mean")
    torch.testing.assert_close(data.batch["advantages"], expected_tokens(want.advantage, owner), rtol=1e-5, atol=1e-5)


def test_the_penalty_is_read_back_and_gaca_can_be_switched_on_by_configuration():
    sb, invalid = all_failed_with_invalid_actions(5)
    data, owner, expected_batch = verl_agent_batch(sb, invalid, coef=0.25, gamma=0.95)
    config = {"gaca": {"conventions": "verl-agent", "estimator": "gaca", "kappa": 0.5}}
    compute_advantage(data, "gigpo", gamma=0.95, config=config)
    want = compute_advantages(expected_batch, "gaca", conventions="verl-agent", gamma=0.95, kappa=0.5)
    torch.testing.assert_close(data.batch["advantages"], expected_tokens(want.advantage, owner), rtol=1e-5, atol=1e-5)
    # gaca's own conventions put the penalty into the step rewards, so where it sits in a trajectory
    # matters; a reordered verl-agent batch does not say it in all-failed groups: refused, not guessed
    with pytest.raises(ValueError, match=r"cannot recover the step order"):
        compute_advantage(data, "gigpo", gamma=0.95, config={"gaca": {}})
    data.non_tensor_batch["step"] = expected_batch.step.numpy()  # with the step index recorded: fine
    compute_advantage(data, "gigpo", gamma=0.95, config={"gaca": {}})
    gaca_conv = compute_advantages(expected_batch, "gigpo", gamma=0.95)
    torch.testing.assert_close(data.batch["advantages"], expected_tokens(gaca_conv.advantage, owner),
                               rtol=1e-5, atol=1e-5)


def test_step_order_is_recovered_from_the_returns():
    sb, invalid = all_failed_with_invalid_actions(2)
    data, _, expected_batch = verl_agent_batch(sb, invalid, gamma=0.8, seed=9)
    from gaca.integrations.verl.config import VerlSettings
    from gaca.integrations.verl.tables import step_rows_table

    table = step_rows_table(data, VerlSettings(), gamma=0.8, penalty_in_returns=False)
    # the same position in each trajectory as the true steps (steps may be interchangeable only where
    # rows are identical in reward and return, which leaves every return unchanged)
    torch.testing.assert_close(
        compute_advantages(table.batch, "gigpo", gamma=0.8, conventions="verl-agent").advantage,
        compute_advantages(expected_batch, "gigpo", gamma=0.8, conventions="verl-agent").advantage)
    # in successful trajectories every return differs, so the order comes back exactly
    won = torch.tensor(data.non_tensor_batch["episode_rewards"]) > 0
    assert won.sum() > 20 and torch.equal(table.batch.step[won], expected_batch.step[won])


def test_dense_rewards_are_ordered_by_the_general_search():
    # rewards mid-episode: |G| does not grow along the episode, so the sorted shortcut does not apply
    gamma, reward = 0.9, [5.0, 0.0, 1.0, 0.0, 2.0]
    returns, acc = [0.0] * 5, 0.0
    for t in reversed(range(5)):
        acc = reward[t] + gamma * acc
        returns[t] = acc
    perm = [3, 0, 4, 1, 2]
    step = recover_step_order(torch.zeros(5, dtype=torch.int64), torch.tensor([reward[i] for i in perm]),
                              torch.tensor([returns[i] for i in perm], dtype=torch.float64), gamma)
    assert step.tolist() == perm


def test_unrecoverable_order_is_a_clear_error():
    traj = torch.tensor([0, 0, 0])
    reward = torch.tensor([0.0, 0.0, 10.0])
    returns = torch.tensor([8.1, 9.0, 10.0], dtype=torch.float64)  # γ = 0.9
    assert recover_step_order(traj, reward, returns, 0.9).tolist() == [0, 1, 2]
    with pytest.raises(ValueError, match=r"cannot recover the step order of trajectory 0 .* record each row's step"):
        recover_step_order(traj, reward, returns, 0.5)  # returns of another discount fit no chain


def test_rewards_that_are_not_verl_agent_scores_are_refused():
    sb, invalid = all_failed_with_invalid_actions(1)
    data, _, expected = verl_agent_batch(sb, invalid)
    data.batch["token_level_rewards"] = data.batch["token_level_rewards"] * 3  # no longer its episode scores
    with pytest.raises(ValueError, match=r"not verl-agent's episode scores; set algorithm\.gaca\.penalty=none"):
        compute_advantage(data, "gigpo", gamma=0.95, config={"gaca": {"conventions": "verl-agent"}})
    data.non_tensor_batch["step"] = expected.step.numpy()
    compute_advantage(data, "gigpo", gamma=0.95, config={"gaca": {"conventions": "verl-agent", "penalty": "none"}})


class _VerlAgentTrainer:
    """Stands for verl-agent's ``RayPPOTrainer``: it keeps its hydra config as ``self.config`` and calls
    ``compute_advantage`` with these keywords and no ``config`` (its ray_trainer.py, ``fit``)."""

    def __init__(self, config):
        self.config = config

    def advantage(self, data):
        algorithm = self.config.algorithm
        return compute_advantage(
            data, adv_estimator=algorithm.adv_estimator, gamma=algorithm.gamma, lam=1.0, num_repeat=8,
            norm_adv_by_std_in_grpo=True, multi_turn=False, use_pf_ppo=False, pf_ppo_reweight_method="pow",
            pf_ppo_weight_pow=2.0, step_advantage_w=algorithm.gigpo.step_advantage_w,
            gigpo_mode=algorithm.gigpo.mode, gigpo_enable_similarity=False, gigpo_similarity_thresh=0.95,
        )


def test_a_trainer_that_passes_no_config_is_read_through_its_constructor():
    from omegaconf import OmegaConf

    from gaca.integrations.verl import estimator

    config = OmegaConf.create({"algorithm": {
        "adv_estimator": "gigpo", "gamma": 0.95, "gigpo": {"step_advantage_w": 1.0, "mode": "mean_norm"},
        "gaca": {"conventions": "verl-agent", "estimator": "gaca", "kappa": 0.5}}})
    trainer_class = type("RayPPOTrainer", (_VerlAgentTrainer,), {})
    estimator._remember_trainer_config(trainer_class)  # what install() does to verl's RayPPOTrainer
    assert trainer_class.__init__._gaca_wrapped
    sb, invalid = all_failed_with_invalid_actions(4)
    data, owner, expected_batch = verl_agent_batch(sb, invalid, coef=0.1, gamma=0.95)
    previous = estimator._trainer_algorithm
    try:
        trainer_class(config).advantage(data)
    finally:
        estimator._trainer_algorithm = previous
    want = compute_advantages(expected_batch, "gaca", conventions="verl-agent", gamma=0.95, kappa=0.5, norm="mean")
    torch.testing.assert_close(data.batch["advantages"], expected_tokens(want.advantage, owner), rtol=1e-5, atol=1e-5)


def test_installed_integration_wraps_verls_trainer_constructor():
    from verl.trainer.ppo import ray_trainer

    from gaca.integrations.verl import is_installed, with_setup_hook

    assert is_installed() and ray_trainer.RayPPOTrainer.__init__._gaca_wrapped
    env = with_setup_hook({"env_vars": {"TOKENIZERS_PARALLELISM": "true"}})
    assert env == {"env_vars": {"TOKENIZERS_PARALLELISM": "true"},
                   "worker_process_setup_hook": "gaca.integrations.verl.setup_worker"}
    with pytest.raises(ValueError, match="already has worker_process_setup_hook"):
        with_setup_hook({"worker_process_setup_hook": "mine.setup"})
