"""EMPG and HGPO through verl: by their own names (``algorithm.adv_estimator=empg``/``hgpo``) and
under verl-agent's ``gigpo`` name (``algorithm.gaca.estimator``), options under ``algorithm.gaca``."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("verl")
omegaconf = pytest.importorskip("omegaconf")

from verl.trainer.ppo import core_algos, ray_trainer  # noqa: E402

import gaca.integrations.verl as gv  # noqa: E402
from gaca.advantage import compute_advantages  # noqa: E402
from gaca.testing.synthetic import synthetic_batch  # noqa: E402
from gaca.testing.verl_batches import expected_tokens, step_rows_batch, trajectory_rows_batch  # noqa: E402

CASES = [
    ("empg", {}),
    ("empg", {"empg_k": 2.0, "empg_zeta": 0.3, "empg_scope": "group", "uncertainty": "nll"}),
    ("hgpo", {}),
    ("hgpo", {"hgpo_history": 4, "hgpo_alpha": 0.5, "hgpo_base": True, "norm": "mean"}),
]


def _verl_compute(data, name, options):
    config = omegaconf.OmegaConf.create({"adv_estimator": name, "gamma": 0.9, "gaca": options})
    return ray_trainer.compute_advantage(data, adv_estimator=name, gamma=0.9, lam=1.0, num_repeat=1,
                                         norm_adv_by_std_in_grpo=True, config=config)


@pytest.mark.parametrize(("name", "options"), CASES)
@pytest.mark.parametrize("layout", ["step", "trajectory"])
def test_peer_estimators_in_verl_match_the_library(name, options, layout):
    sb = synthetic_batch(300, group_size=4, tokens=8, seed=5)
    make = step_rows_batch if layout == "step" else trajectory_rows_batch
    data, owner = make(sb, seed=5)
    out = _verl_compute(data, name, options)
    expected = compute_advantages(sb, name, gamma=0.9, **options).advantage
    torch.testing.assert_close(out.batch["advantages"], expected_tokens(expected, owner), atol=1e-5, rtol=0)
    assert name in gv.VERL_ESTIMATORS and core_algos.get_adv_estimator_fn(name) is not None


def test_verl_agents_gigpo_name_can_compute_hgpo():
    sb = synthetic_batch(200, group_size=4, tokens=6, seed=6)
    data, owner = step_rows_batch(sb, seed=6)
    out = _verl_compute(data, "gigpo", {"estimator": "hgpo", "hgpo_history": 1})
    expected = compute_advantages(sb, "hgpo", gamma=0.9, hgpo_history=1).advantage
    torch.testing.assert_close(out.batch["advantages"], expected_tokens(expected, owner), atol=1e-5, rtol=0)


def test_peer_options_are_validated_by_name():
    data, _ = step_rows_batch(synthetic_batch(40, group_size=2, tokens=4, seed=9))
    with pytest.raises(ValueError, match="empg_zeta"):
        _verl_compute(data, "empg", {"empg_zeta": -1.0})
    with pytest.raises(ValueError, match="hgpo_history"):
        _verl_compute(data, "hgpo", {"hgpo_history": 99})
    with pytest.raises(ValueError, match=r"uncertainty='entropy' needs StepBatch\.entropy"):
        _verl_compute(data, "empg", {"uncertainty": "entropy"})  # verl's batch carries no step entropy
