"""PPO losses, KL estimators and aggregations against hand-computed values."""

from __future__ import annotations

import math

import pytest
import torch

from gaca.train.losses import (
    AGGREGATIONS,
    KL_ESTIMATORS,
    POLICY_LOSSES,
    aggregate,
    kl_k3,
)


def logs(ratios):
    """(logp, old) with exp(logp − old) = ratios (old = 0)."""
    return torch.log(torch.tensor([ratios])), torch.zeros(1, len(ratios))


def test_ppo_clip_hand_values():
    # ε = 0.2. r=0.5,A=+1: max(−0.5, −0.8) = −0.5 (unclipped); r=1,A=−1: 1; r=1.5,A=+1: max(−1.5, −1.2) = −1.2
    # (clipped); r=1.5,A=−1: max(1.5, 1.2) = 1.5; r=0.5,A=−1: max(0.5, 0.8) = 0.8 (clipped)
    logp, old = logs([0.5, 1.0, 1.5, 1.5, 0.5])
    adv = torch.tensor([[1.0, -1.0, 1.0, -1.0, -1.0]])
    out = POLICY_LOSSES["ppo_clip"](logp, old, adv, clip_ratio=0.2)
    assert torch.allclose(out.loss, torch.tensor([[-0.5, 1.0, -1.2, 1.5, 0.8]]), atol=1e-6)
    assert out.clipped.tolist() == [[False, False, True, False, True]]
    assert torch.allclose(out.ratio, torch.tensor([[0.5, 1.0, 1.5, 1.5, 0.5]]), atol=1e-6)


def test_ppo_clip_gradient_zero_on_clipped_tokens():
    logp, old = logs([1.5, 1.1])
    logp.requires_grad_(True)
    out = POLICY_LOSSES["ppo_clip"](logp, old, torch.tensor([[1.0, 1.0]]), clip_ratio=0.2)
    out.loss.sum().backward()
    # d(−A r)/dlogp = −A r: 0 where clipped, −1.1 for the unclipped token
    assert logp.grad[0, 0].item() == 0.0
    assert logp.grad[0, 1].item() == pytest.approx(-1.1, abs=1e-6)


def test_dual_clip_hand_values():
    # c = 3. A=−1: r=5 -> PPO 5, bounded to 3; r=2 -> 2 (< 3); A=+1, r=5 -> −1.2 as in ppo_clip
    logp, old = logs([5.0, 2.0, 5.0])
    adv = torch.tensor([[-1.0, -1.0, 1.0]])
    out = POLICY_LOSSES["dual_clip"](logp, old, adv, clip_ratio=0.2, clip_ratio_c=3.0)
    assert torch.allclose(out.loss, torch.tensor([[3.0, 2.0, -1.2]]), atol=1e-6)
    assert out.clipped.tolist() == [[True, False, True]]
    same = POLICY_LOSSES["ppo_clip"](logp, old, adv.abs(), clip_ratio=0.2)
    assert torch.allclose(POLICY_LOSSES["dual_clip"](logp, old, adv.abs()).loss, same.loss)


def test_kl_estimators_hand_values():
    logp = torch.log(torch.tensor([[0.5, 0.2]]))
    ref = torch.log(torch.tensor([[0.25, 0.2]]))
    # d = log(0.25/0.5) = −ln 2: k3 = 0.5 + ln 2 − 1 = 0.19315; k1 = ln 2; k2 = (ln 2)²/2; all 0 at equal probs
    ln2 = math.log(2)
    assert torch.allclose(KL_ESTIMATORS["k3"](logp, ref), torch.tensor([[0.5 + ln2 - 1, 0.0]]), atol=1e-6)
    assert torch.allclose(KL_ESTIMATORS["k1"](logp, ref), torch.tensor([[ln2, 0.0]]), atol=1e-6)
    assert torch.allclose(KL_ESTIMATORS["k2"](logp, ref), torch.tensor([[ln2**2 / 2, 0.0]]), atol=1e-6)
    assert (kl_k3(torch.randn(50, 7), torch.randn(50, 7)) >= 0).all()


def test_k3_is_unbiased_for_kl():
    # E_{x~p}[k3] = KL(p || q) for categorical p, q
    p = torch.tensor([0.6, 0.3, 0.1])
    q = torch.tensor([0.2, 0.5, 0.3])
    exact = float((p * (p / q).log()).sum())
    g = torch.Generator().manual_seed(0)
    x = torch.multinomial(p, 200_000, replacement=True, generator=g)
    est = float(kl_k3(p.log()[x], q.log()[x]).mean())
    assert est == pytest.approx(exact, rel=0.02)


def test_aggregations_hand_values():
    values = torch.tensor([[1.0, 2.0, 3.0, 9.0], [4.0, 9.0, 9.0, float("nan")]])
    mask = torch.tensor([[True, True, True, False], [True, False, False, False]])
    # token-mean: (1+2+3+4)/4 = 2.5; seq-mean-token-mean: (mean(1,2,3) + 4)/2 = 3; NaN on padding ignored
    assert aggregate(values, AGGREGATIONS["token-mean"](mask)).item() == pytest.approx(2.5)
    assert aggregate(values, AGGREGATIONS["seq-mean-token-mean"](mask)).item() == pytest.approx(3.0)


@pytest.mark.parametrize("name", sorted(AGGREGATIONS))
def test_aggregation_weights_split_over_micro_batches(name):
    g = torch.Generator().manual_seed(1)
    mask = torch.rand(6, 5, generator=g) > 0.3
    mask[:, 0] = True
    values = torch.randn(6, 5, generator=g)
    w = AGGREGATIONS[name](mask)
    whole = aggregate(values, w)
    parts = aggregate(values[:2], w[:2]) + aggregate(values[2:5], w[2:5]) + aggregate(values[5:], w[5:])
    assert whole.item() == pytest.approx(parts.item(), abs=1e-6)
    assert w.sum().item() == pytest.approx(1.0, abs=1e-6)


def test_registries_refuse_a_duplicate_name():
    with pytest.raises(ValueError, match="policy loss 'ppo_clip' is already registered"):
        POLICY_LOSSES.register("ppo_clip", POLICY_LOSSES["dual_clip"])
    assert POLICY_LOSSES["ppo_clip"].__name__ == "ppo_clip_loss"


def test_unknown_names_list_the_registered_ones():
    with pytest.raises(KeyError, match="ppo_clip"):
        POLICY_LOSSES["vanilla"]
    with pytest.raises(KeyError, match="token-mean"):
        AGGREGATIONS["sum"]
