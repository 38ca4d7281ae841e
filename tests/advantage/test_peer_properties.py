"""Properties of the peer estimators (EMPG, HGPO) that follow from their definitions: the
reductions to GRPO and GiGPO, EMPG's normalizations, HGPO's nested history groups."""

from __future__ import annotations

import torch
from hypothesis import given
from hypothesis import strategies as st

from gaca.advantage import StepBatch, compute_advantages
from gaca.advantage.hgpo import history_groups
from gaca.advantage.layout import trajectory_layout
from gaca.advantage.segments import segment_all_equal, segment_count

from .test_properties import FIELDS, SETTINGS, step_tables


def _with(batch: StepBatch, **changes) -> StepBatch:
    fields = {k: getattr(batch, k) for k in FIELDS}
    fields["entropy"] = batch.entropy
    return StepBatch(**{**fields, **changes})


# ---------------------------------------------------------------------------------------------- EMPG


@SETTINGS
@given(step_tables(entropy=True), st.sampled_from(["mean_std", "mean"]))
def test_empg_without_modulation_is_grpo_centered(batch, norm):
    # k = 0 makes every scale 1 and ζ = 0 removes the bonus: what is left is A^E minus its mean.
    grpo = compute_advantages(batch, "grpo", norm=norm).advantage.double()
    for scope in ("batch", "group"):
        out = compute_advantages(batch, "empg", empg_k=0.0, empg_zeta=0.0, empg_scope=scope, norm=norm)
        groups = batch.group_id if scope == "group" else torch.zeros_like(batch.group_id)
        centered = grpo.clone()
        for g in groups.unique():
            rows = groups == g
            centered[rows] -= grpo[rows].mean()
        torch.testing.assert_close(out.advantage.double(), centered, atol=1e-5, rtol=1e-5)
        assert torch.all(out.weight == 1)


@SETTINGS
@given(step_tables(entropy=True))
def test_empg_with_step_statistics_and_group_scope_reduces_to_grpo(batch):
    # With A^E over step rows its mean over a group's rows is 0, so the centering is a no-op: EMPG
    # with k = ζ = 0 in group scope is GRPO exactly.
    grpo = compute_advantages(batch, "grpo", episode_stats="step")
    empg = compute_advantages(batch, "empg", empg_k=0.0, empg_zeta=0.0, empg_scope="group", episode_stats="step")
    torch.testing.assert_close(empg.advantage, grpo.advantage, atol=1e-5, rtol=1e-5)


@SETTINGS
@given(step_tables(entropy=True), st.floats(0.0, 10.0), st.floats(0.0, 3.0), st.sampled_from(["batch", "group"]))
def test_empg_scales_average_one_and_advantages_center_per_scope(batch, k, zeta, scope):
    out = compute_advantages(batch, "empg", empg_k=k, empg_zeta=zeta, empg_scope=scope)
    groups = batch.group_id if scope == "group" else torch.zeros_like(batch.group_id)
    for g in groups.unique():
        rows = groups == g
        torch.testing.assert_close(out.weight[rows].double().mean(), torch.tensor(1.0, dtype=torch.float64))
        assert abs(float(out.advantage[rows].double().mean())) < 1e-4
        assert float(out.criticality[rows].min()) == 0.0 and float(out.criticality[rows].max()) < 1.0


@SETTINGS
@given(step_tables(entropy=True), st.floats(0.1, 10.0))
def test_empg_confident_steps_weigh_more(batch, k):
    # g is decreasing in the uncertainty: a more confident step never weighs less.
    out = compute_advantages(batch, "empg", empg_k=k, uncertainty="entropy")
    order = torch.argsort(batch.entropy.double())
    weights = out.weight.double()[order]
    entropies = batch.entropy.double()[order]
    later_is_lighter = weights[1:] <= weights[:-1] + 1e-12
    tie = entropies[1:] == entropies[:-1]
    assert torch.all(later_is_lighter | tie)


@SETTINGS
@given(step_tables(entropy=True), st.floats(0.5, 4.0), st.floats(-3.0, 3.0))
def test_empg_ignores_an_affine_change_of_the_uncertainty_scale(batch, a, b):
    # The batch min-max makes H and a·H + b (a > 0) the same modulation, up to eps's share.
    base = compute_advantages(batch, "empg", uncertainty="entropy", eps=1e-12)
    moved = compute_advantages(_with(batch, entropy=a * batch.entropy + b), "empg", uncertainty="entropy", eps=1e-12)
    torch.testing.assert_close(moved.advantage, base.advantage, atol=1e-4, rtol=1e-4)


@SETTINGS
@given(step_tables(entropy=True))
def test_empg_uncertainty_source(batch):
    nll = compute_advantages(batch, "empg", uncertainty="nll")
    auto = compute_advantages(batch, "empg")  # the batch has an entropy: auto reads it
    entropy = compute_advantages(batch, "empg", uncertainty="entropy")
    torch.testing.assert_close(auto.advantage, entropy.advantage)
    without = _with(batch, entropy=None)
    torch.testing.assert_close(compute_advantages(without, "empg").advantage, nll.advantage)
    torch.testing.assert_close(nll.nll, entropy.nll)  # the diagnostic is the NLL either way


# ---------------------------------------------------------------------------------------------- HGPO


@SETTINGS
@given(step_tables(), st.sampled_from(["mean_std", "mean"]), st.sampled_from(["skip", "keep"]), st.floats(0.0, 5.0))
def test_hgpo_without_history_is_gigpos_step_level(batch, norm, zero_levels, alpha):
    # K = 0 leaves level 1, GiGPO's step groups: A = A^S·w/(w + eps) where a peer exists, else 0
    # (a flat group's A^S is 0 too, so skipping it changes nothing).
    gigpo = compute_advantages(batch, "gigpo", norm=norm)
    out = compute_advantages(batch, "hgpo", hgpo_history=0, norm=norm, hgpo_zero_levels=zero_levels,
                             hgpo_alpha=alpha)
    torch.testing.assert_close(out.advantage, gigpo.step_level, atol=1e-4, rtol=1e-4)
    assert torch.equal(out.has_peer, gigpo.has_peer)


@SETTINGS
@given(step_tables(max_steps=7), st.integers(0, 6))
def test_hgpo_history_groups_are_nested(batch, depth):
    layout = trajectory_layout(batch)
    levels = history_groups(layout, batch.anchor, depth)
    assert len(levels) == depth + 1
    position = torch.empty_like(batch.step).index_copy_(
        0, layout.order, torch.arange(len(batch)) - (torch.cumsum(layout.traj_len, 0) - layout.traj_len)[
            layout.traj.index_select(0, layout.order)])
    for j, (ids, num) in enumerate(levels, start=1):
        assert torch.equal(ids >= 0, position >= j - 1)  # a level needs j − 1 earlier steps
        present = ids[ids >= 0]
        assert present.numel() == 0 or int(present.max()) + 1 == num
        if j > 1:  # every level-j group lies inside one level-(j−1) group, and one episode group
            parent = levels[j - 2][0]
            rows = ids >= 0
            pairs = torch.unique(torch.stack([ids[rows], parent[rows]]), dim=1)
            assert pairs.shape[1] == num
        rows = ids >= 0
        group_pairs = torch.unique(torch.stack([ids[rows], batch.group_id[rows]]), dim=1)
        assert group_pairs.shape[1] == num


@SETTINGS
@given(step_tables(), st.integers(0, 4), st.booleans())
def test_hgpo_ignores_how_anchors_are_labelled(batch, depth, base):
    relabelled = _with(batch, anchor=batch.anchor * 7919 + 13)
    a = compute_advantages(batch, "hgpo", hgpo_history=depth, hgpo_base=base)
    b = compute_advantages(relabelled, "hgpo", hgpo_history=depth, hgpo_base=base)
    torch.testing.assert_close(a.advantage, b.advantage)


@SETTINGS
@given(step_tables(max_trajs=5), st.integers(1, 4), st.floats(0.0, 3.0))
def test_hgpo_equals_gigpo_step_level_when_every_history_agrees(batch, depth, alpha):
    # One anchor per (group, step index): the trajectories of a group visit the same states in the
    # same order, so every level group of a step is its level-1 group and the mix is A^S itself.
    same = _with(batch, anchor=batch.group_id * 100 + batch.step)
    gigpo = compute_advantages(same, "gigpo")
    out = compute_advantages(same, "hgpo", hgpo_history=depth, hgpo_alpha=alpha)
    torch.testing.assert_close(out.advantage, gigpo.step_level, atol=1e-4, rtol=1e-4)


@SETTINGS
@given(step_tables())
def test_hgpo_base_keeps_episode_credit_where_no_level_has_a_peer(batch):
    # Distinct anchors everywhere: no step has a peer at any level, so the mix is A^E alone
    # (where its group's scores differ; 0 where they are all equal).
    lonely = _with(batch, anchor=torch.arange(len(batch), dtype=torch.int64))
    out = compute_advantages(lonely, "hgpo", hgpo_base=True)
    episode = compute_advantages(lonely, "grpo").advantage
    assert not out.has_peer.any() and torch.all(out.weight == 0)
    torch.testing.assert_close(out.advantage, episode / (1 + 1e-6), atol=1e-6, rtol=1e-6)
    assert torch.all(compute_advantages(lonely, "hgpo").advantage == 0)


def test_hgpo_level_count_matches_trajectory_lengths():
    # A trajectory of T steps has T − j + 1 rows at level j.
    batch = StepBatch(group_id=torch.zeros(5, dtype=torch.int64), traj_id=torch.tensor([0, 0, 0, 1, 1]),
                      step=torch.tensor([0, 1, 2, 0, 1]), anchor=torch.tensor([1, 2, 3, 1, 2]),
                      reward=torch.zeros(5), logprobs=-torch.ones(5, 1), mask=torch.ones(5, 1, dtype=torch.bool))
    levels = history_groups(trajectory_layout(batch), batch.anchor, 3)
    assert [int((ids >= 0).sum()) for ids, _ in levels] == [5, 3, 1, 0]
    # Level 2: (1, 2) is shared by both trajectories' step 1; (2, 3) is τ0's alone.
    ids, num = levels[1]
    assert num == 2 and int(segment_count(ids[ids >= 0], num).max()) == 2


@SETTINGS
@given(st.lists(st.tuples(st.integers(0, 5), st.sampled_from([0.0, 0.1, 9.5, 10.0, -0.1])), min_size=1, max_size=40))
def test_segment_all_equal_is_min_equals_max(rows):
    ids = torch.tensor([r[0] for r in rows])
    values = torch.tensor([r[1] for r in rows], dtype=torch.float64)
    got = segment_all_equal(values, ids, 7)
    for s in range(7):
        members = values[ids == s]
        assert bool(got[s]) == (members.numel() == 0 or bool(members.min() == members.max()))
