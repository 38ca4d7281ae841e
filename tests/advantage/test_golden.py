"""A few hand-worked values, with the arithmetic in the comments."""

import math
import subprocess
import sys
from dataclasses import replace

import torch

from gaca.advantage import StepBatch, compute_advantages, hash_text, hash_tokens
from gaca.advantage.segments import discounted_returns_sorted


def two_trajectories():
    # One group, two trajectories of two steps. τ0 succeeds (r = 10 at its last step), τ1 fails.
    # Both start from anchor 5; their second steps are in different states (6, 7).
    # τ0's responses: NLL 0.5 then 1.5; τ1's: NLL 1.0 then 1.0 (constant).
    return StepBatch(
        group_id=torch.tensor([0, 0, 0, 0]), traj_id=torch.tensor([0, 0, 1, 1]), step=torch.tensor([0, 1, 0, 1]),
        anchor=torch.tensor([5, 6, 5, 7]), reward=torch.tensor([0.0, 10.0, 0.0, 0.0]),
        logprobs=torch.tensor([[-0.5, -0.5], [-1.0, -2.0], [-1.0, -1.0], [-1.0, -1.0]]),
        mask=torch.ones(4, 2, dtype=torch.bool),
    )


def test_golden_grpo_gigpo_gaca():
    batch = two_trajectories()
    eps = 1e-6
    # R = (10, 0): mean 5, unbiased std sqrt(50) = 7.0711; A^E = ±5/7.0711 = ±0.70711.
    ae = 5 / (math.sqrt(50) + eps)
    grpo = compute_advantages(batch, "grpo")
    torch.testing.assert_close(grpo.advantage, torch.tensor([ae, ae, -ae, -ae]))
    # Step group {row0, row2} (anchor 5): G = (0.95·10, 0) = (9.5, 0), std sqrt(45.125) = 6.7175;
    # A^S = ±4.75/6.7175 = ±0.70711. Rows 1 and 3 have no peer: A^S = 0.
    as_ = 4.75 / (math.sqrt(45.125) + eps)
    gigpo = compute_advantages(batch, "gigpo")
    torch.testing.assert_close(gigpo.advantage, torch.tensor([ae + as_, ae, -ae - as_, -ae]))
    # τ0's NLLs (0.5, 1.5): mean 1, std sqrt(0.5) = 0.70711 -> c = (−0.70711, +0.70711); τ1 constant -> 0.
    # w = clip(0.5 + 0.25·c): row0 0.5 − 0.17678 = 0.32322; row2 0.5; rows 1, 3 have no peer: 0.
    c = 0.5 / (math.sqrt(0.5) + eps)
    gaca = compute_advantages(batch, "gaca")
    torch.testing.assert_close(gaca.criticality, torch.tensor([-c, c, 0.0, 0.0]))
    w0 = 0.5 - 0.25 * c
    torch.testing.assert_close(gaca.weight, torch.tensor([w0, 0.0, 0.5, 0.0]))
    # A = (1 − w)·A^E + w·A^S; A^E = A^S here, so the convex mixture leaves every row at ±0.70711.
    torch.testing.assert_close(gaca.advantage, torch.tensor([ae, ae, -ae, -ae]))
    # RLOO (classic, unscaled): A = R − mean of the others = 10 − 0 = +10, 0 − 10 = −10.
    rloo = compute_advantages(batch, "rloo")
    torch.testing.assert_close(rloo.advantage, torch.tensor([10.0, 10.0, -10.0, -10.0]))
    # Its std-scaled variant, asked for explicitly: ±10 / sqrt(50) = ±1.41421 = GRPO × n/(n−1) = 0.70711 × 2.
    scaled = compute_advantages(batch, "rloo", norm="mean_std")
    torch.testing.assert_close(scaled.advantage, torch.tensor([1, 1, -1, -1]) * 10 / (math.sqrt(50) + eps))
    torch.testing.assert_close(scaled.advantage, grpo.advantage * 2)


def test_long_trajectory_returns_are_stable():
    # T = 3000, γ = 0.99, reward 1 at the end only: G_t = 0.99^(T−1−t), down to 0.99^2999 ≈ 8.2e-14,
    # which a global reverse cumsum of γ^(−t)·r_t would destroy; pointer jumping keeps it exact.
    length, gamma = 3000, 0.99
    reward = torch.zeros(2 * length)
    reward[length - 1] = 1.0
    reward[-1] = 5.0
    is_last = torch.zeros(2 * length, dtype=torch.bool)
    is_last[length - 1] = is_last[-1] = True
    returns = discounted_returns_sorted(reward, is_last, gamma)
    expected = torch.tensor([gamma ** (length - 1 - t) for t in range(length)], dtype=torch.float64)
    torch.testing.assert_close(returns[:length], expected, rtol=1e-12, atol=0)
    torch.testing.assert_close(returns[length:], 5 * expected, rtol=1e-12, atol=0)


def test_hashes_are_stable_across_processes():
    # The key must not depend on PYTHONHASHSEED: compute it in two processes with different seeds.
    code = ("from gaca.advantage import hash_text, hash_tokens; "
            "print(hash_text('You are in the middle of a room.'), hash_tokens([1, 2, 3]))")
    outputs = set()
    for seed in ("1", "2"):
        env = {"PYTHONHASHSEED": seed, "PATH": ""}
        run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
        outputs.add(run.stdout)
    assert len(outputs) == 1
    text_key, token_key = map(int, outputs.pop().split())
    assert text_key == hash_text("You are in the middle of a room.")
    assert token_key == hash_tokens(torch.tensor([1, 2, 3]))
    assert 0 <= text_key < 2**63 and hash_text("a") != hash_text("b")
    # Token keys never collide with text keys of the same bytes (domain-separated).
    assert hash_tokens([1]) != hash_text("\x01\x00\x00\x00\x00\x00\x00\x00")


def test_golden_empg():
    # The two trajectories above with a recorded entropy H = (0, 1, 0.5, 0.5); A^E = (a, a, −a, −a),
    # a = 0.70711. Batch min-max: H̃ = H/(1 + eps) ≈ (0, 1, 0.5, 0.5).
    # g ∝ exp(−H̃) = (1, 0.36788, 0.60653, 0.60653), mean 0.64524 -> g = (1.54982, 0.57015, 0.94001, 0.94001).
    # Bonus ζ·exp(−H̃_next): row 0 -> row 1: 0.1·0.36788 = 0.03679; row 2 -> row 3: 0.1·0.60653 = 0.06065.
    # A' = g·A^E + bonus = (1.13268, 0.40316, −0.60404, −0.66469), mean 0.06678;
    # Â = A' − 0.06678 = (1.06590, 0.33638, −0.67081, −0.73147).
    batch = replace(two_trajectories(), entropy=torch.tensor([0.0, 1.0, 0.5, 0.5]))
    out = compute_advantages(batch, "empg")
    torch.testing.assert_close(out.weight, torch.tensor([1.54982, 0.57015, 0.94001, 0.94001]), atol=1e-5, rtol=0)
    torch.testing.assert_close(out.advantage, torch.tensor([1.06590, 0.33638, -0.67081, -0.73147]), atol=1e-5, rtol=0)
    # Without a recorded entropy the NLLs (0.5, 1.5, 1, 1) stand in: min-max (0, 1, 0.5, 0.5), the same H̃.
    torch.testing.assert_close(compute_advantages(two_trajectories(), "empg").advantage, out.advantage)


def test_golden_hgpo():
    # One group, γ = 0.95. τ0: anchors (5, 6), rewards (0, 10); τ1: (5, 6), (0, 0); τ2: (7, 6), (0, 10).
    # Returns G: τ0 (9.5, 10), τ1 (0, 0), τ2 (9.5, 10).
    # Level 1 (anchor): {τ0s0, τ1s0} G (9.5, 0) -> ±4.75/6.71751 = ±0.70711; {τ2s0} alone;
    #   {τ0s1, τ1s1, τ2s1} G (10, 0, 10): mean 6.66667, std 5.77350 -> (0.57735, −1.15470, 0.57735).
    # Level 2 (previous anchor, anchor): {τ0s1, τ1s1} = (5, 6): G (10, 0) -> ±0.70711; {τ2s1} = (7, 6) alone.
    # Weights (j + 1)^1: level 1: 2, level 2: 3.
    #   τ0s0: 2·0.70711/2 = 0.70711;  τ1s0: −0.70711;  τ2s0: no peer -> 0
    #   τ0s1: (2·0.57735 + 3·0.70711)/5 = 0.65520;  τ1s1: (2·(−1.15470) + 3·(−0.70711))/5 = −0.88614
    #   τ2s1: level 1 only: 0.57735.  (GiGPO's A^S gives τ1s1 −1.15470: its (7, 6) peer τ2 inflates the gap.)
    batch = StepBatch(
        group_id=torch.zeros(6, dtype=torch.int64), traj_id=torch.tensor([0, 0, 1, 1, 2, 2]),
        step=torch.tensor([0, 1, 0, 1, 0, 1]), anchor=torch.tensor([5, 6, 5, 6, 7, 6]),
        reward=torch.tensor([0.0, 10.0, 0.0, 0.0, 0.0, 10.0]), logprobs=-torch.ones(6, 1),
        mask=torch.ones(6, 1, dtype=torch.bool))
    out = compute_advantages(batch, "hgpo")
    want = torch.tensor([0.70711, 0.65520, -0.70711, -0.88614, 0.0, 0.57735])
    torch.testing.assert_close(out.advantage, want, atol=1e-5, rtol=0)
    # With A^E as level 0 (weight 1): R = (10, 0, 10) -> A^E = (0.57735, −1.15470, 0.57735);
    #   τ0s0: (2·0.70711 + 0.57735)/3 = 0.66385;  τ2s0: A^E alone = 0.57735.
    based = compute_advantages(batch, "hgpo", hgpo_base=True)
    torch.testing.assert_close(based.advantage[[0, 4]], torch.tensor([0.66385, 0.57735]), atol=1e-5, rtol=0)


def test_golden_choose_mode_uncertainty():
    # Choose mode: one log-prob per row, log π(a|s). Its NLL −log π(a|s) is the step's uncertainty:
    # rows of π(a|s) = (1/2, 1/4, 1, 1/8) have NLL (0.69315, 1.38629, 0, 2.07944).
    logp = torch.log(torch.tensor([[0.5], [0.25], [1.0], [0.125]]))
    batch = replace(two_trajectories(), logprobs=logp, mask=torch.ones(4, 1, dtype=torch.bool))
    out = compute_advantages(batch, "empg", uncertainty="nll")
    torch.testing.assert_close(out.nll, torch.tensor([0.69315, 1.38629, 0.0, 2.07944]), atol=1e-5, rtol=0)
    # Min-max over the batch: (NLL − 0)/(2.07944 + eps) = (1/3, 2/3, 0, 1).
    torch.testing.assert_close(out.criticality, torch.tensor([1 / 3, 2 / 3, 0.0, 1.0]), atol=1e-5, rtol=0)
