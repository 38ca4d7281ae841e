"""The estimator registry and the public API surface."""

import pytest
import torch

import gaca.advantage as adv
from gaca.advantage import (
    ESTIMATORS,
    AdvantageOptions,
    AdvantageOutput,
    StepBatch,
    compute_advantages,
    register_estimator,
)
from gaca.advantage.estimators import grpo

from .reference import random_batch
from .test_inputs import good


def test_known_estimators():
    assert {"grpo", "rloo", "gigpo", "fixed_mix", "gaca", "empg", "hgpo"} <= set(ESTIMATORS)


def test_every_estimator_declares_what_it_reads():
    for name in ESTIMATORS:
        info = adv.estimator_info(name)
        assert info.inputs <= adv.estimators.OPTIONAL_INPUTS
        assert info.options <= set(AdvantageOptions.names())
    assert adv.estimator_inputs("grpo") == frozenset()
    assert adv.estimator_inputs("gaca") == {"anchor", "logprobs"}
    assert adv.estimator_inputs("empg") == {"logprobs", "entropy"}
    assert adv.estimator_inputs("hgpo") == {"anchor"}
    assert "kappa" in adv.estimator_options("gaca") and "kappa" not in adv.estimator_options("fixed_mix")


#: A value other than the default for every option, each valid with the others' defaults.
OTHER_VALUES = dict(
    gamma=0.5, eps=1e-3, norm="mean", episode_stats="step", conventions="verl-agent", omega=0.5,
    criticality="rank", weight_map="sigmoid", w0=0.3, kappa=1.0, w_min=0.2, w_max=0.8, mixture="additive",
    no_peer="zero", similarity=0.5, uncertainty="nll", empg_k=3.0, empg_k_future=0.2, empg_zeta=0.7,
    empg_scope="group", hgpo_history=0, hgpo_alpha=3.0, hgpo_base=True, hgpo_zero_levels="keep",
)
FIELDS = ("advantage", "episode", "step_level", "weight", "criticality", "has_peer", "nll")


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_undeclared_options_do_not_change_the_output(name):
    # The declared options are complete: changing any other one leaves every output field as it was.
    assert set(OTHER_VALUES) == set(AdvantageOptions.names())
    batch = random_batch(3, groups=3, trajs=4, max_steps=6, anchors=2, with_text=True, with_entropy=True)
    base = compute_advantages(batch, name)
    declared = adv.estimator_options(name)
    for option, value in OTHER_VALUES.items():
        changed = compute_advantages(batch, name, **{option: value})
        same = all(torch.equal(getattr(changed, f), getattr(base, f)) for f in FIELDS)
        if option not in declared:
            assert same, f"{name} is changed by option {option}, which it does not declare"


def test_registration_validates_its_declarations():
    with pytest.raises(ValueError, match=r"unknown estimator input\(s\) \['tokens'\]"):
        register_estimator("test_bad_inputs", inputs=("tokens",))
    with pytest.raises(ValueError, match=r"unknown estimator option\(s\) \['kapa'\]"):
        register_estimator("test_bad_options", options=("kapa",))
    assert "test_bad_inputs" not in ESTIMATORS and "test_bad_options" not in ESTIMATORS


def test_a_function_registered_without_declarations_reads_everything():
    def plain(batch, layout, options) -> AdvantageOutput:
        return grpo(batch, layout, options)

    ESTIMATORS.register("test_plain", plain)
    try:
        assert adv.estimator_inputs("test_plain") == adv.estimators.OPTIONAL_INPUTS
        assert adv.estimator_options("test_plain") == set(AdvantageOptions.names())
        plain.inputs = frozenset({"anchor"})  # the attribute form older plugins use
        assert adv.estimator_inputs("test_plain") == {"anchor"}
    finally:
        ESTIMATORS.unregister("test_plain")
    # Re-registering a name by another path does not inherit the first function's declarations.
    register_estimator("test_plain", inputs=())(plain)
    try:
        ESTIMATORS.unregister("test_plain")
        ESTIMATORS.register("test_plain", lambda b, lay, o: grpo(b, lay, o))
        assert adv.estimator_inputs("test_plain") == adv.estimators.OPTIONAL_INPUTS
    finally:
        ESTIMATORS.unregister("test_plain")


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
