"""Fuzzed option values: every option set that AdvantageOptions accepts gives finite advantages on
finite input; every value it refuses is refused with a message naming the option."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gaca.advantage import ESTIMATORS, AdvantageOptions, StepBatch, compute_advantages

from .test_properties import step_tables

#: Edge values every numeric option is tried with, besides ordinary ones.
EDGES = [0, 3, 17, 0.0, -0.0, 1e-300, 1e-12, 1e-6, 0.5, 1.0, 1.0 + 1e-9, 2.0, -1.0, 1e6, 1e300, math.inf, -math.inf,
         math.nan]
NUMERIC = ("gamma", "eps", "omega", "w0", "kappa", "w_min", "w_max", "similarity", "empg_k", "empg_k_future",
           "empg_zeta", "hgpo_alpha", "hgpo_history")
CHOICES = {"norm": ["mean_std", "mean", "std"], "episode_stats": ["trajectory", "step"],
           "criticality": ["zscore", "ratio", "rank"], "weight_map": ["clip", "sigmoid"],
           "mixture": ["convex", "additive"], "no_peer": ["episode", "zero"],
           "uncertainty": ["auto", "entropy", "nll", "variance"], "empg_scope": ["batch", "group"],
           "hgpo_base": [True, False, "true", 1], "hgpo_zero_levels": ["skip", "keep"]}


@st.composite
def option_sets(draw):
    opts = {}
    for name in NUMERIC:
        if draw(st.booleans()):
            opts[name] = draw(st.one_of(st.sampled_from(EDGES), st.floats(allow_nan=True, allow_infinity=True),
                                        st.sampled_from(["0.5", None, True])))
    for name, choices in CHOICES.items():
        if draw(st.booleans()):
            opts[name] = draw(st.sampled_from(choices))
    return opts


@st.composite
def finite_batches(draw):
    """Step tables with big-but-finite rewards and log-probs, and anchor texts for similarity."""
    batch = draw(step_tables())
    scale = draw(st.sampled_from([1.0, 1e3, 1e6]))
    fields = {k: getattr(batch, k) for k in ("group_id", "traj_id", "step", "anchor", "reward", "logprobs", "mask")}
    fields["reward"] = fields["reward"] * scale
    texts = [f"room {a % 5} door {a % 3}" for a in batch.anchor.tolist()]
    entropy = torch.rand(len(batch), generator=torch.Generator().manual_seed(len(batch))) * scale
    return StepBatch(**fields, anchor_text=texts, entropy=entropy if draw(st.booleans()) else None)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(finite_batches(), option_sets(), st.sampled_from(sorted(ESTIMATORS)))
def test_accepted_options_give_finite_advantages(batch, opts, estimator):
    try:
        AdvantageOptions.from_kwargs(**opts)
    except ValueError as e:
        bad = [k for k in opts if k in str(e)]
        assert bad, f"the error names no option: {e}"
        return
    if opts.get("uncertainty") == "entropy" and batch.entropy is None and estimator == "empg":
        with pytest.raises(ValueError, match=r"uncertainty='entropy' needs StepBatch\.entropy"):
            compute_advantages(batch, estimator, **opts)
        return
    out = compute_advantages(batch, estimator, **opts)
    for name in ("advantage", "episode", "step_level", "weight", "criticality"):
        values = getattr(out, name)
        assert torch.isfinite(values).all(), (name, opts)


def test_every_edge_value_of_every_option_is_refused_or_finite():
    # A batch where every signal is live: unequal returns, step-level peers, NLL spread.
    batch = StepBatch(
        group_id=torch.zeros(6, dtype=torch.int64), traj_id=torch.tensor([0, 0, 1, 1, 2, 2]),
        step=torch.tensor([0, 1, 0, 1, 0, 1]), anchor=torch.tensor([5, 6, 5, 7, 5, 6]),
        reward=torch.tensor([0.0, 1e6, 0.0, -1e6, 0.0, 3.0]),
        logprobs=torch.tensor([[-0.1, -5.0], [-3.0, -0.2], [-9.0, -1.0], [-0.5, -0.5], [-2.0, -7.0], [-1.0, -4.0]]),
        mask=torch.ones(6, 2, dtype=torch.bool), anchor_text=["a", "b", "a", "c", "a", "b"])
    accepted = 0
    for name in NUMERIC:
        for value in EDGES:
            for base in ({}, {"mixture": "additive"}, {"weight_map": "sigmoid"}, {"norm": "mean"}):
                opts = {**base, name: value}
                try:
                    AdvantageOptions.from_kwargs(**opts)
                except ValueError as e:
                    assert name in str(e), (opts, str(e))
                    continue
                accepted += 1
                for estimator in sorted(ESTIMATORS):
                    out = compute_advantages(batch, estimator, **opts)
                    assert torch.isfinite(out.advantage).all(), (estimator, opts, out.advantage)
    assert accepted > 50  # the grid reaches far into the accepted ranges, not only refusals
