"""The estimator registry and the public API surface."""

import pytest
import torch

import gaca.advantage as adv
from gaca.advantage import ESTIMATORS, AdvantageOutput, StepBatch, compute_advantages, register_estimator
from gaca.advantage.estimators import grpo

from .test_inputs import good


def test_known_estimators():
    assert {"grpo", "rloo", "gigpo", "fixed_mix", "gaca"} <= set(ESTIMATORS)


def test_unknown_estimator_lists_known_ones():
    with pytest.raises(ValueError) as error:
        compute_advantages(StepBatch(**good()), "ppo")
    for name in ("fixed_mix", "gaca", "gigpo", "grpo", "rloo"):
        assert name in str(error.value)


def test_register_a_custom_estimator_and_refuse_a_duplicate():
    @register_estimator("test_negated_grpo")
    def negated(batch, layout, options) -> AdvantageOutput:
        out = grpo(batch, layout, options)
        return AdvantageOutput(**{**out.__dict__, "advantage": -out.advantage})

    try:
        batch = StepBatch(**good())
        torch.testing.assert_close(compute_advantages(batch, "test_negated_grpo").advantage,
                                   -compute_advantages(batch, "grpo").advantage)
        with pytest.raises(ValueError, match="already registered"):
            register_estimator("test_negated_grpo")(negated)
    finally:
        ESTIMATORS.unregister("test_negated_grpo")


def test_public_names_are_exported():
    for name in adv.__all__:
        assert hasattr(adv, name)


def test_broadcast_to_tokens():
    values = torch.tensor([1.5, -2.0])
    mask = torch.tensor([[True, True, False], [True, False, False]])
    assert adv.broadcast_to_tokens(values, mask).tolist() == [[1.5, 1.5, 0.0], [-2.0, 0.0, 0.0]]
    with pytest.raises(ValueError, match=r"values \[N\] and mask \[N, L\]"):
        adv.broadcast_to_tokens(values, mask[:1])


def test_advantage_library_imports_only_torch_numpy_and_stdlib():
    import subprocess
    import sys

    code = ("import sys, gaca.advantage; bad = sorted(m for m in sys.modules if m.split('.')[0] in "
            "{'transformers', 'gaca.train', 'gaca.policy', 'gaca.envs', 'gaca.rollout', 'verl', 'ray'} "
            "or m.startswith(('gaca.train', 'gaca.policy', 'gaca.envs', 'gaca.rollout'))); print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
