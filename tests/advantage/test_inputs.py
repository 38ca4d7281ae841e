"""Bad inputs raise a ValueError that names the field (and the first bad row)."""

import math

import pytest
import torch

from gaca.advantage import StepBatch, compute_advantages


def good(n=4, length=3):
    return dict(
        group_id=torch.zeros(n, dtype=torch.int64), traj_id=torch.tensor([0, 0, 1, 1][:n]),
        step=torch.tensor([0, 1, 0, 1][:n]), anchor=torch.tensor([1, 2, 1, 3][:n]),
        reward=torch.tensor([0.0, 10.0, 0.0, 0.0][:n]), logprobs=-torch.ones(n, length),
        mask=torch.ones(n, length, dtype=torch.bool),
    )


def with_(**changes):
    fields = good()
    fields.update(changes)
    return fields


@pytest.mark.parametrize(
    "changes, pattern",
    [
        (dict(group_id=torch.zeros(4)), r"group_id must be int64"),
        (dict(traj_id=torch.zeros(3, dtype=torch.int64)), r"traj_id must have shape \[N\]"),
        (dict(step=torch.zeros(4, 1, dtype=torch.int64)), r"step must have shape"),
        (dict(anchor=[1, 2, 3, 4]), r"anchor must be a torch.Tensor"),
        (dict(reward=torch.zeros(4, dtype=torch.int64)), r"reward must be a float tensor"),
        (dict(reward=torch.zeros(5)), r"reward must have shape"),
        (dict(reward=torch.tensor([0.0, math.nan, 0.0, 0.0])), r"reward has a non-finite value at row 1"),
        (dict(reward=torch.tensor([0.0, 0.0, math.inf, 0.0])), r"reward has a non-finite value at row 2"),
        (dict(logprobs=-torch.ones(4)), r"logprobs must have shape \[N, L\]"),
        (dict(logprobs=torch.zeros(4, 3, dtype=torch.int64)), r"logprobs must be a float tensor"),
        (dict(mask=torch.ones(4, 3)), r"mask must be bool"),
        (dict(mask=torch.ones(4, 2, dtype=torch.bool)), r"mask must have the shape of logprobs"),
        (dict(step=torch.tensor([0, -1, 0, 1])), r"step must be >= 0; row 1"),
        (dict(anchor_text=["a", "b"]), r"anchor_text must have N = 4"),
        (dict(entropy=torch.ones(4, dtype=torch.int64)), r"entropy must be a float tensor or None"),
        (dict(entropy=[0.1, 0.2, 0.3, 0.4]), r"entropy must be a float tensor or None"),
        (dict(entropy=torch.ones(4, 1)), r"entropy must have shape \[N\] = \(4,\)"),
        (dict(entropy=torch.tensor([0.1, 0.2, math.nan, 0.4])), r"entropy has a non-finite value at row 2"),
        (dict(penalty=torch.tensor([0.0, math.inf, 0.0, 0.0])), r"penalty has a non-finite value at row 1"),
    ],
)
def test_bad_fields_raise(changes, pattern):
    with pytest.raises(ValueError, match=pattern):
        StepBatch(**with_(**changes))


def test_empty_mask_row_is_named():
    mask = torch.ones(4, 3, dtype=torch.bool)
    mask[2] = False
    with pytest.raises(ValueError, match=r"mask: row 2 has an empty response"):
        StepBatch(**with_(mask=mask))


def test_non_finite_logprob_on_a_response_token_is_named_but_padding_may_hold_anything():
    logprobs = -torch.ones(4, 3)
    mask = torch.ones(4, 3, dtype=torch.bool)
    mask[:, 2] = False
    logprobs[:, 2] = math.nan  # padding: ignored
    StepBatch(**with_(logprobs=logprobs, mask=mask))
    logprobs[3, 0] = -math.inf
    with pytest.raises(ValueError, match=r"logprobs has a non-finite value on a response token at row 3"):
        StepBatch(**with_(logprobs=logprobs, mask=mask))


def test_empty_batch_raises():
    empty = {k: v[:0] for k, v in good().items()}
    with pytest.raises(ValueError, match="empty"):
        StepBatch(**empty)


def test_repeated_step_in_a_trajectory_raises():
    batch = StepBatch(**with_(step=torch.tensor([0, 0, 0, 1])))
    with pytest.raises(ValueError, match=r"step: row 1 repeats step 0"):
        compute_advantages(batch, "grpo")


@pytest.mark.parametrize(
    "options, pattern",
    [
        (dict(norm="std"), r"option norm must be one of \['mean_std', 'mean', None\], got 'std'"),
        (dict(criticality="entropy"), r"option criticality must be one of .*, got 'entropy'"),
        (dict(mixture="max"), r"option mixture must be one of \['convex', 'additive'\], got 'max'"),
        (dict(gamma=1.5), r"gamma must be in \[0, 1\]"),
        (dict(w_min=0.8, w_max=0.2), r"w_min=0.8 must be <= w_max=0.2"),
        (dict(similarity=1.5), r"similarity must be in \(0, 1\), got 1.5"),
        (dict(kapa=0.1), r"unknown advantage option\(s\) \['kapa'\]; valid options: \['gamma'"),
        (dict(mixture="additive", w0=0.0), r"w0=0.0 must be >= 0.001: mixture='additive' divides by w0"),
        (dict(weight_map="sigmoid", w0=1.0), r"sigmoid' needs 0 < w0 < 1"),
    ],
)
def test_bad_options_raise(options, pattern):
    with pytest.raises(ValueError, match=pattern):
        compute_advantages(StepBatch(**good()), "gaca", **options)


def test_entropy_uncertainty_without_an_entropy_raises():
    with pytest.raises(ValueError, match=r"uncertainty='entropy' needs StepBatch\.entropy"):
        compute_advantages(StepBatch(**good()), "empg", uncertainty="entropy")
    out = compute_advantages(StepBatch(**good(), entropy=torch.tensor([0.1, 0.2, 0.3, 0.4])), "empg",
                             uncertainty="entropy")
    assert torch.isfinite(out.advantage).all()


@pytest.mark.parametrize(
    "options, pattern",
    [
        (dict(uncertainty="variance"),
         r"option uncertainty must be one of \['auto', 'entropy', 'nll'\], got 'variance'"),
        (dict(empg_scope="task"), r"option empg_scope must be one of \['batch', 'group'\], got 'task'"),
        (dict(empg_k=-1.0), r"empg_k must be in \[0, 50\]"),
        (dict(empg_k_future=51.0), r"empg_k_future must be in \[0, 50\]"),
        (dict(empg_zeta=-0.1), r"empg_zeta must be in \[0, 1000\]"),
        (dict(hgpo_history=2.0), r"hgpo_history must be an integer, got 2.0"),
        (dict(hgpo_history=17), r"hgpo_history must be in \[0, 16\]"),
        (dict(hgpo_alpha=11.0), r"hgpo_alpha must be in \[0, 10\]"),
        (dict(hgpo_base="yes"), r"hgpo_base must be true or false, got 'yes'"),
        (dict(hgpo_zero_levels="drop"), r"option hgpo_zero_levels must be one of \['skip', 'keep'\], got 'drop'"),
    ],
)
def test_bad_peer_options_raise(options, pattern):
    with pytest.raises(ValueError, match=pattern):
        compute_advantages(StepBatch(**good()), "hgpo", **options)


def test_similarity_without_texts_raises():
    with pytest.raises(ValueError, match=r"needs StepBatch\.anchor_text"):
        compute_advantages(StepBatch(**good()), "gigpo", similarity=0.9)


def test_half_precision_logprobs_sum_without_overflow():
    # 8,192 float16 log-probs of -10 sum to -81,920, beyond float16's range (65,504): accumulated wider
    n, length = 4, 8192
    zeros = torch.zeros(n, dtype=torch.int64)
    batch = StepBatch(group_id=zeros, traj_id=torch.arange(n), step=zeros, anchor=zeros,
                      reward=torch.tensor([0.0, 1.0, 0.0, 1.0]),
                      logprobs=torch.full((n, length), -10.0, dtype=torch.float16),
                      mask=torch.ones(n, length, dtype=torch.bool))
    assert batch.logprob_sum.dtype == torch.float32 and batch.logprob_sum.tolist() == [-81920.0] * n
    out = compute_advantages(batch, "gaca")
    assert torch.isfinite(out.advantage).all() and out.nll.tolist() == [10.0] * n
