"""A verl-agent batch through the plugin: its penalised scores, its rows reordered without a step key,
its GiGPO keywords; ``conventions=verl-agent`` reproduces its GiGPO."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("verl")

from gaca.advantage import StepBatch, compute_advantages
from gaca.integrations.verl import compute_advantage
from gaca.integrations.verl.tables import recover_step_order
from gaca.testing.synthetic import synthetic_batch
from gaca.testing.verl_batches import expected_tokens, verl_agent_batch


@pytest.fixture(autouse=True)
def _keep_trainer_config():
    """The trainer config record_step_index keeps is process state: each test leaves it as it was."""
    from gaca.integrations.verl import estimator

    previous = estimator._trainer_algorithm
    yield
    estimator._trainer_algorithm = previous


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
    """Stands for verl-agent's ``RayPPOTrainer``: it keeps its hydra config as ``self.config``, calls
    ``adjust_batch(self.config, batch)`` right after its rollout and calls ``compute_advantage`` with
    these keywords and no ``config`` (its ray_trainer.py, ``fit``)."""

    def __init__(self, config, adjust_batch):
        self.config = config
        self.adjust_batch = adjust_batch

    def adjust(self, data):
        return self.adjust_batch(self.config, data)

    def advantage(self, data):
        algorithm = self.config.algorithm
        return compute_advantage(
            data, adv_estimator=algorithm.adv_estimator, gamma=algorithm.gamma, lam=1.0, num_repeat=8,
            norm_adv_by_std_in_grpo=True, multi_turn=False, use_pf_ppo=False, pf_ppo_reweight_method="pow",
            pf_ppo_weight_pow=2.0, step_advantage_w=algorithm.gigpo.step_advantage_w,
            gigpo_mode=algorithm.gigpo.mode, gigpo_enable_similarity=False, gigpo_similarity_thresh=0.95,
        )


def _trainer_config(gaca, *, estimator="gigpo", gamma=0.95):
    from omegaconf import OmegaConf

    return OmegaConf.create({"algorithm": {
        "adv_estimator": estimator, "gamma": gamma, "gigpo": {"step_advantage_w": 1.0, "mode": "mean_norm"},
        "gaca": gaca}})


def test_a_trainer_that_passes_no_config_is_read_through_adjust_batch():
    from gaca.integrations.verl import record_step_index
    from gaca.testing.verl_batches import pad_with_copies

    adjust_batch = record_step_index(lambda config, data: pad_with_copies(data, 13, seed=3))  # what install() does
    assert adjust_batch._gaca_wrapped and record_step_index(adjust_batch) is adjust_batch
    trainer = _VerlAgentTrainer(_trainer_config({"conventions": "verl-agent", "estimator": "gaca", "kappa": 0.5}),
                                adjust_batch)
    sb, invalid = all_failed_with_invalid_actions(4)
    data, owner, expected_batch = verl_agent_batch(sb, invalid, coef=0.1, gamma=0.95, adjust=trainer.adjust)
    trainer.advantage(data)
    assert expected_batch.count is not None and int(expected_batch.count.sum()) == len(sb) + 13
    want = compute_advantages(expected_batch, "gaca", conventions="verl-agent", gamma=0.95, kappa=0.5, norm="mean")
    torch.testing.assert_close(data.batch["advantages"], expected_tokens(want.advantage, owner), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("conventions", ["verl-agent", "gaca"])
@pytest.mark.parametrize("dense", [False, True])
def test_copies_and_step_rewards_with_the_recorded_step_index(conventions, dense):
    # verl-agent's adjust_batch copies random rows after the returns; Sokoban-like environments reward
    # intermediate steps. Neither leaves the step order recoverable; the recorded index does.
    from gaca.integrations.verl import record_step_index
    from gaca.testing.verl_batches import pad_with_copies

    sb, invalid = all_failed_with_invalid_actions(6)
    if dense:  # -0.1 per step, +1 / -1 now and then, the episode's end as it was
        gen = torch.Generator().manual_seed(6)
        shaped = -0.1 + torch.where(torch.rand(len(sb), generator=gen) < 0.2, 1.0, 0.0) \
            - torch.where(torch.rand(len(sb), generator=gen) < 0.1, 1.0, 0.0)
        sb = StepBatch(**{k: getattr(sb, k) for k in ("group_id", "traj_id", "step", "anchor", "logprobs", "mask")},
                       reward=sb.reward + shaped)
    gamma, config = 0.95, {"conventions": conventions}
    adjust_batch = record_step_index(lambda cfg, data: pad_with_copies(data, 37, seed=1))
    data, owner, expected = verl_agent_batch(sb, invalid, gamma=gamma, seed=2,
                                             adjust=lambda d: adjust_batch(_trainer_config(config), d))
    assert "step" in data.non_tensor_batch and len(data) == len(sb) + 37
    compute_advantage(data, "gigpo", gamma=gamma, config={"gaca": config})
    want = compute_advantages(expected, "gigpo", conventions=conventions, gamma=gamma)
    torch.testing.assert_close(data.batch["advantages"], expected_tokens(want.advantage, owner), rtol=1e-5, atol=1e-5)
    if conventions == "gaca":  # copies are padding there: the advantages of the steps without them
        plain = StepBatch(**{k: getattr(expected, k) for k in ("group_id", "traj_id", "step", "anchor", "reward",
                                                                "logprobs", "mask", "penalty")})
        torch.testing.assert_close(compute_advantages(plain, "gigpo", gamma=gamma).advantage, want.advantage)


def test_without_the_recorded_index_copies_are_refused_with_the_way_out():
    sb, invalid = all_failed_with_invalid_actions(3)
    data, _, _ = verl_agent_batch(sb, invalid, copies=20)
    with pytest.raises(ValueError, match=r"cannot recover the step order .* the integration records it"):
        compute_advantage(data, "gigpo", gamma=0.95, config={"gaca": {"conventions": "verl-agent"}})


def test_a_repeated_step_that_is_no_copy_is_refused():
    from gaca.integrations.verl import record_step_index
    from gaca.testing.verl_batches import pad_with_copies

    sb, invalid = all_failed_with_invalid_actions(1)
    adjust_batch = record_step_index(lambda cfg, data: pad_with_copies(data, 5))
    data, _, _ = verl_agent_batch(sb, invalid, adjust=lambda d: adjust_batch(_trainer_config({}), d))
    data.non_tensor_batch["step"] = np.zeros(len(data), dtype=np.int64)  # every row "step 0"
    with pytest.raises(ValueError, match=r"hold the same step of one trajectory \(key 'step'\) but differ"):
        compute_advantage(data, "gigpo", gamma=0.95, config={"gaca": {}})


def test_the_step_index_is_recorded_only_for_gacas_estimators_and_never_overwritten():
    from gaca.integrations.verl import record_step_index

    sb, invalid = all_failed_with_invalid_actions(2)
    seen = []
    adjust_batch = record_step_index(lambda cfg, data: seen.append(dict(data.non_tensor_batch)) or data)
    verl_agent_batch(sb, invalid, adjust=lambda d: adjust_batch(_trainer_config({}, estimator="grpo"), d))
    assert "step" not in seen[-1]
    verl_agent_batch(sb, invalid, adjust=lambda d: adjust_batch(_trainer_config({"step_key": "t"}), d))
    assert "t" in seen[-1] and "step" not in seen[-1]
    # each trajectory's rows in rollout order: 0, 1, 2, ...
    traj = seen[-1]["traj_uid"]
    assert all(list(seen[-1]["t"][traj == u]) == list(range((traj == u).sum())) for u in set(traj))
    verl_agent_batch(sb, invalid, adjust=lambda d: adjust_batch(_trainer_config({"layout": "trajectory"}), d))
    assert "step" not in seen[-1]
    with pytest.raises(ValueError, match=r"unknown algorithm.gaca key\(s\) \['kapa'\]"):  # fails before the update
        verl_agent_batch(sb, invalid, adjust=lambda d: adjust_batch(_trainer_config({"kapa": 1}), d))
    from gaca.integrations.verl import estimator

    assert estimator._trainer_algorithm.gaca == {"layout": "trajectory"}  # the refused config is not kept


def test_installed_integration_routes_verls_compute_advantage_and_leaves_the_trainer_class_alone():
    from verl.trainer.ppo import ray_trainer

    from gaca.integrations.verl import is_installed, with_setup_hook

    assert is_installed() and ray_trainer.compute_advantage is compute_advantage
    assert not hasattr(ray_trainer.RayPPOTrainer.__init__, "_gaca_wrapped")
    env = with_setup_hook({"env_vars": {"TOKENIZERS_PARALLELISM": "true"}})
    assert env == {"env_vars": {"TOKENIZERS_PARALLELISM": "true"},
                   "worker_process_setup_hook": "gaca.integrations.verl.setup_worker"}
    with pytest.raises(ValueError, match="already has worker_process_setup_hook"):
        with_setup_hook({"worker_process_setup_hook": "mine.setup"})


def test_install_routes_a_verl_agent_adjust_batch_wherever_it_was_imported(monkeypatch):
    import sys
    import types

    from verl.trainer.ppo import ray_trainer

    from gaca.integrations.verl import install, is_installed

    def adjust_batch(config, data, mode="copy"):
        return data

    holder = types.ModuleType("agent_system_stand_in")
    holder.adjust_batch = adjust_batch
    monkeypatch.setitem(sys.modules, holder.__name__, holder)
    monkeypatch.setattr(ray_trainer, "adjust_batch", adjust_batch, raising=False)
    assert not is_installed()
    install()
    assert is_installed() and ray_trainer.adjust_batch is holder.adjust_batch
    assert ray_trainer.adjust_batch._gaca_wrapped and ray_trainer.adjust_batch.__wrapped__ is adjust_batch
    install()  # idempotent
    assert ray_trainer.adjust_batch.__wrapped__ is adjust_batch
