"""Every estimator against the slow loop reference, on seeded random batches of several sizes."""

import itertools

import pytest
import torch

from gaca.advantage import ESTIMATORS, compute_advantages

from .reference import random_batch, reference_advantages

OPTION_SETS = [
    {},
    {"norm": "mean"},
    {"episode_stats": "step"},
    {"criticality": "ratio", "kappa": 0.5},
    {"criticality": "rank", "kappa": 0.4, "w_min": 0.1, "w_max": 0.9},
    {"weight_map": "sigmoid", "kappa": 1.0, "w0": 0.3},
    {"mixture": "additive", "omega": 0.7},
    {"no_peer": "zero", "gamma": 0.5},
    {"gamma": 1.0, "eps": 1e-3},
    {"gamma": 0.0},
]
#: Options of the peer estimators, each set run on batches with and without a recorded entropy.
PEER_OPTION_SETS = {
    "empg": [
        {"uncertainty": "nll"},
        {"empg_scope": "group", "empg_k": 2.5, "empg_k_future": 0.5, "empg_zeta": 0.7},
        {"empg_k": 0.0, "empg_zeta": 0.0, "norm": "mean"},
        {"episode_stats": "step", "eps": 1e-3},
    ],
    "hgpo": [
        {"hgpo_history": 0},
        {"hgpo_history": 4, "hgpo_alpha": 0.0},
        {"hgpo_base": True},
        {"hgpo_base": True, "hgpo_zero_levels": "keep", "norm": "mean", "hgpo_alpha": 2.5},
        {"hgpo_zero_levels": "keep", "gamma": 1.0, "episode_stats": "step"},
    ],
}
SIZES = [
    dict(groups=1, trajs=1, max_steps=1),
    dict(groups=2, trajs=3, max_steps=4),
    dict(groups=5, trajs=8, max_steps=12),
]


@pytest.mark.parametrize("estimator", sorted(ESTIMATORS))
@pytest.mark.parametrize("options", OPTION_SETS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "defaults")
@pytest.mark.parametrize("size", range(len(SIZES)))
def test_matches_reference(estimator, options, size):
    for seed, dense in itertools.product(range(4), (False, True)):
        batch = random_batch(seed, dense_reward=dense, **SIZES[size])
        out = compute_advantages(batch, estimator, **options)
        expected = reference_advantages(batch, estimator, **options)
        for name, values in expected.items():
            got = getattr(out, name)
            # atol: the library sums float32 log-probs in float32 (the reference in float64), and
            # z-scores with a small eps amplify that rounding.
            want = torch.tensor(values, dtype=got.dtype)
            torch.testing.assert_close(got, want, rtol=1e-4, atol=5e-4, msg=lambda m, n=name: f"{n}: {m}")


@pytest.mark.parametrize(("estimator", "options"), [(e, o) for e, sets in PEER_OPTION_SETS.items() for o in sets],
                         ids=lambda x: x if isinstance(x, str) else ",".join(f"{k}={v}" for k, v in x.items()))
@pytest.mark.parametrize("size", range(len(SIZES)))
def test_peer_estimators_match_reference(estimator, options, size):
    # Two anchors only: long histories repeat, so the deep HGPO levels have peers.
    for seed, dense, entropy in itertools.product(range(3), (False, True), (False, True)):
        batch = random_batch(seed, dense_reward=dense, with_entropy=entropy, anchors=2, **SIZES[size])
        out = compute_advantages(batch, estimator, **options)
        for name, values in reference_advantages(batch, estimator, **options).items():
            got = getattr(out, name)
            torch.testing.assert_close(got, torch.tensor(values, dtype=got.dtype), rtol=1e-4, atol=5e-4,
                                       msg=lambda m, n=name: f"{n}: {m}")


def test_hgpo_with_verl_agent_conventions_takes_the_population_std():
    for seed in range(4):
        batch = random_batch(seed, groups=3, trajs=6, max_steps=8, anchors=2)
        out = compute_advantages(batch, "hgpo", conventions="verl-agent", hgpo_alpha=2.0)
        expected = reference_advantages(batch, "hgpo", conventions="verl-agent", hgpo_alpha=2.0)
        torch.testing.assert_close(out.advantage, torch.tensor(expected["advantage"]), rtol=1e-4, atol=5e-4)
        unbiased = compute_advantages(batch, "hgpo", hgpo_alpha=2.0)
        assert not torch.allclose(out.advantage, unbiased.advantage)


def test_hgpo_similarity_grouping_matches_reference():
    for seed in range(4):
        batch = random_batch(seed, groups=3, trajs=5, max_steps=6, anchors=6, with_text=True)
        out = compute_advantages(batch, "hgpo", similarity=0.9, hgpo_base=True)
        expected = reference_advantages(batch, "hgpo", similarity=0.9, hgpo_base=True)
        torch.testing.assert_close(out.advantage, torch.tensor(expected["advantage"]), rtol=1e-4, atol=5e-4)


def test_similarity_grouping_matches_reference():
    for seed in range(5):
        batch = random_batch(seed, groups=3, trajs=5, max_steps=6, anchors=6, with_text=True)
        for threshold in (0.5, 0.95):
            out = compute_advantages(batch, "gigpo", similarity=threshold)
            expected = reference_advantages(batch, "gigpo", similarity=threshold)
            torch.testing.assert_close(out.advantage, torch.tensor(expected["advantage"], dtype=torch.float32),
                                       rtol=1e-4, atol=1e-4)
            assert out.has_peer.tolist() == expected["has_peer"]


def test_similarity_merges_near_identical_texts():
    batch = random_batch(0, groups=1, trajs=6, max_steps=1, anchors=1, with_text=True)
    # Every anchor is distinct as a key but the texts differ by one character.
    distinct = torch.arange(len(batch), dtype=torch.int64)
    texts = [f"you are in the kitchen. you see a mug {i % 10}." for i in range(len(batch))]
    fields = {k: getattr(batch, k) for k in ("group_id", "traj_id", "step", "reward", "logprobs", "mask")}
    from gaca.advantage import StepBatch

    distinct_batch = StepBatch(anchor=distinct, anchor_text=texts, **fields)
    exact = compute_advantages(distinct_batch, "gigpo")
    similar = compute_advantages(distinct_batch, "gigpo", similarity=0.9)
    assert not exact.has_peer.any()
    assert similar.has_peer.all()
