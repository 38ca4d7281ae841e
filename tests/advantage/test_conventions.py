"""``conventions="verl-agent"`` against a loop written from verl-agent's published conventions; the
invalid-action penalty's placement under both conventions; classic RLOO."""

from __future__ import annotations

import random

import pytest
import torch

from gaca.advantage import StepBatch, compute_advantages

from .verl_agent_reference import verl_agent_gigpo

LONG = ("you arrive at {}. on it, you see {}. you are carrying nothing, and around you are a cabinet 1, a "
        "cabinet 2, a coffeemachine 1, a drawer 1, a drawer 2, a fridge 1, a garbagecan 1, a microwave 1, a shelf 1, "
        "a sinkbasin 1, a stoveburner 1, and a toaster 1.")


ITEMS = ["a mug 1", "a apple 2", "a knife 3", "a bowl 1", "a spatula 2", "a peppershaker 1", "a potato 1"]


def penalised_batch(seed, *, groups=4, trajs=5, max_steps=7, all_failed=(0, 1), long_text=False):
    """Sparse rewards, invalid steps with a 0.1 penalty, some groups where every trajectory fails;
    rows shuffled (a verl batch after ``balance_batch``)."""
    rng = random.Random(seed)
    rows = []
    for g in range(groups):
        for t in range(rng.randint(1, trajs)):
            length = rng.randint(1, max_steps)
            won = g not in all_failed and rng.random() < 0.5
            for s in range(length):
                place = rng.randint(0, 3)
                text = LONG.format(f"countertop {place}", ", ".join(rng.sample(ITEMS, rng.randint(2, 5)))) \
                    if long_text else f"state {place}"
                reward = 10.0 if won and s == length - 1 else 0.0
                rows.append((g, t, s, text, reward, 0.1 if rng.random() < 0.35 else 0.0))
    rng.shuffle(rows)
    return [list(col) for col in zip(*rows, strict=True)]


def to_batch(group, traj, step, text, reward, penalty):
    n = len(group)
    return StepBatch(group_id=torch.tensor(group), traj_id=torch.tensor(traj), step=torch.tensor(step),
                     anchor=torch.tensor([hash(t) % 2**62 for t in text]), reward=torch.tensor(reward),
                     logprobs=-torch.rand(n, 3, generator=torch.Generator().manual_seed(n)),
                     mask=torch.ones(n, 3, dtype=torch.bool), anchor_text=text, penalty=torch.tensor(penalty))


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("norm", ["mean_std", "mean"])
def test_gigpo_reproduces_verl_agent_with_penalties_in_failed_groups(seed, norm):
    cols = penalised_batch(seed)
    gamma, omega = 0.95, 0.7
    out = compute_advantages(to_batch(*cols), "gigpo", conventions="verl-agent", gamma=gamma, omega=omega, norm=norm)
    expected, episode, _ = verl_agent_gigpo(*cols, gamma=gamma, omega=omega, norm=norm)
    torch.testing.assert_close(out.advantage, torch.tensor(expected, dtype=torch.float32), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out.episode, torch.tensor(episode, dtype=torch.float32), rtol=1e-5, atol=1e-5)
    # In an all-failed group only the penalties differ; the two conventions place them differently
    gaca = compute_advantages(to_batch(*cols), "gigpo", gamma=gamma, omega=omega, norm=norm)
    failed = torch.tensor([g in (0, 1) for g in cols[0]])
    assert (gaca.advantage[failed] - out.advantage[failed]).abs().max() > 0.05


def test_fixed_mix_and_gaca_share_the_conventions():
    cols = penalised_batch(7)
    batch = to_batch(*cols)
    gigpo = compute_advantages(batch, "gigpo", conventions="verl-agent")
    for name in ("gaca", "fixed_mix"):
        out = compute_advantages(batch, name, conventions="verl-agent", mixture="additive", kappa=0.0)
        torch.testing.assert_close(out.advantage, gigpo.advantage)  # κ = 0, additive: GiGPO exactly


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("threshold", [0.9, 0.95])
def test_similarity_grouping_reproduces_verl_agent_on_long_near_identical_observations(seed, threshold):
    cols = penalised_batch(seed, groups=3, trajs=6, all_failed=(), long_text=True)
    out = compute_advantages(to_batch(*cols), "gigpo", conventions="verl-agent", similarity=threshold)
    expected, _, step_level = verl_agent_gigpo(*cols, gamma=0.95, similarity=threshold)
    torch.testing.assert_close(out.advantage, torch.tensor(expected, dtype=torch.float32), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out.step_level, torch.tensor(step_level, dtype=torch.float32), rtol=1e-5, atol=1e-5)


def test_the_two_similarity_conventions_group_long_texts_differently():
    # Over 200 characters, difflib's autojunk ignores the representative's frequent characters:
    # verl-agent's ratio is then far lower than gaca's (no autojunk) for the same two texts.
    import difflib

    a = LONG.format("countertop 1", "a potato 1, a bowl 1, a peppershaker 1")
    b = LONG.format("countertop 1", "a mug 1, a knife 3, a spatula 2")
    assert difflib.SequenceMatcher(None, a, b).ratio() < 0.2  # 0.18: the middle's junk breaks every match
    assert difflib.SequenceMatcher(None, b, a, autojunk=False).ratio() > 0.93
    cols = penalised_batch(3, groups=3, trajs=6, all_failed=(), long_text=True)
    batch = to_batch(*cols)
    verl = compute_advantages(batch, "gigpo", conventions="verl-agent", similarity=0.9)
    gaca = compute_advantages(batch, "gigpo", similarity=0.9)
    assert (verl.step_level - gaca.step_level).abs().max() > 0.1


def test_rows_in_another_order_give_verl_agent_what_verl_agent_gives():
    # verl-agent's clustering follows the batch order, so the same rows reordered are another batch for it
    # too; gaca's conventions do not depend on the order at all.
    cols = penalised_batch(11, groups=2, trajs=6, all_failed=(), long_text=True)
    perm = list(range(len(cols[0])))
    random.Random(1).shuffle(perm)
    moved = [[col[i] for i in perm] for col in cols]
    out = compute_advantages(to_batch(*moved), "gigpo", conventions="verl-agent", similarity=0.9)
    torch.testing.assert_close(out.advantage, torch.tensor(verl_agent_gigpo(*moved, gamma=0.95, similarity=0.9)[0],
                                                           dtype=torch.float32), rtol=1e-5, atol=1e-5)
    a = compute_advantages(to_batch(*cols), "gigpo", similarity=0.9).advantage
    b = compute_advantages(to_batch(*moved), "gigpo", similarity=0.9).advantage
    torch.testing.assert_close(b, a[torch.tensor(perm)])


def test_gaca_conventions_put_the_penalty_into_the_step_rewards():
    cols = penalised_batch(5)
    with_penalty = compute_advantages(to_batch(*cols), "gigpo")
    group, traj, step, text, reward, penalty = cols
    folded = [r - p for r, p in zip(reward, penalty, strict=True)]
    baked = compute_advantages(to_batch(group, traj, step, text, folded, [0.0] * len(group)), "gigpo")
    torch.testing.assert_close(with_penalty.advantage, baked.advantage)


def test_a_lone_row_keeps_its_score_only_under_verl_agent():
    batch = StepBatch(group_id=torch.tensor([0, 1, 1]), traj_id=torch.tensor([0, 0, 1]), step=torch.tensor([0, 0, 0]),
                      anchor=torch.tensor([1, 2, 2]), reward=torch.tensor([3.0, 1.0, 0.0]),
                      logprobs=-torch.ones(3, 1), mask=torch.ones(3, 1, dtype=torch.bool))
    assert compute_advantages(batch, "grpo").advantage[0] == 0.0
    lone = compute_advantages(batch, "grpo", conventions="verl-agent").advantage[0]
    assert lone == pytest.approx(3.0 / (1 + 1e-6))


def test_conventions_refuse_trajectory_statistics():
    with pytest.raises(ValueError, match="episode_stats='trajectory' contradicts conventions='verl-agent'"):
        compute_advantages(to_batch(*penalised_batch(0)), "gigpo", conventions="verl-agent",
                           episode_stats="trajectory")


def with_counts(batch, count):
    return StepBatch(**{k: getattr(batch, k) for k in ("group_id", "traj_id", "step", "anchor", "reward", "logprobs",
                                                       "mask", "anchor_text", "penalty")}, count=torch.tensor(count))


def padding_counts(n, seed, *, copies):
    """Counts of a batch padded like verl-agent's ``adjust_batch``: ``copies`` distinct random rows copied once."""
    count = [1] * n
    for i in random.Random(seed).sample(range(n), min(copies, n)):
        count[i] = 2
    return count


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize(("norm", "similarity"), [("mean_std", None), ("mean", None), ("mean_std", 0.9)])
def test_padding_copies_count_as_rows_under_verl_agent(seed, norm, similarity):
    cols = penalised_batch(seed, groups=3, trajs=4, long_text=similarity is not None)
    count = padding_counts(len(cols[0]), seed, copies=len(cols[0]) // 3)
    out = compute_advantages(with_counts(to_batch(*cols), count), "gigpo", conventions="verl-agent", norm=norm,
                             similarity=similarity)
    expected, episode, step_level = verl_agent_gigpo(*cols, gamma=0.95, norm=norm, similarity=similarity, count=count)
    torch.testing.assert_close(out.advantage, torch.tensor(expected, dtype=torch.float32), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out.episode, torch.tensor(episode, dtype=torch.float32), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out.step_level, torch.tensor(step_level, dtype=torch.float32), rtol=1e-5, atol=1e-5)
    # the copies move verl-agent's statistics: without them the numbers differ
    plain = compute_advantages(to_batch(*cols), "gigpo", conventions="verl-agent", norm=norm, similarity=similarity)
    assert (plain.advantage - out.advantage).abs().max() > 1e-3


@pytest.mark.parametrize("estimator", ["gigpo", "gaca", "rloo", "grpo"])
def test_padding_copies_change_nothing_under_gaca_conventions(estimator):
    cols = penalised_batch(4)
    batch = to_batch(*cols)
    counted = with_counts(batch, padding_counts(len(batch), 4, copies=len(batch) // 2))
    for options in ({}, {"episode_stats": "step"}):
        torch.testing.assert_close(compute_advantages(counted, estimator, **options).advantage,
                                   compute_advantages(batch, estimator, **options).advantage)


def test_a_copy_is_counted_but_is_no_peer():
    # group 0: one trajectory of one step (score 10), copied once; group 1: scores 10 and 0, the 0 copied once.
    batch = StepBatch(group_id=torch.tensor([0, 1, 1]), traj_id=torch.tensor([0, 0, 1]), step=torch.tensor([0, 0, 0]),
                      anchor=torch.tensor([5, 7, 8]), reward=torch.tensor([10.0, 10.0, 0.0]),
                      logprobs=-torch.ones(3, 1), mask=torch.ones(3, 1, dtype=torch.bool),
                      count=torch.tensor([2, 1, 2]))
    out = compute_advantages(batch, "gigpo", conventions="verl-agent")
    # group 0 is no longer a lone row (verl-agent sees the row twice): (10 − 10) / (0 + eps) = 0.
    # group 1 is the values [10, 0, 0]: mean 10/3, unbiased std sqrt(((20/3)² + 2·(10/3)²) / 2) = 5.7735;
    # A(10) = (20/3) / 5.7735 = 1.1547, A(0) = −(10/3) / 5.7735 = −0.57735. Every step group holds one step
    # (its copy aside): A^S = 0.
    torch.testing.assert_close(out.advantage, torch.tensor([0.0, 1.1547005, -0.5773503]), rtol=1e-5, atol=1e-6)
    assert not out.has_peer.any()
    lone = compute_advantages(with_counts(batch, [1, 1, 2]), "gigpo", conventions="verl-agent")
    assert float(lone.advantage[0]) == pytest.approx(10.0 / (1 + 1e-6))  # without its copy it keeps its score


def test_counts_are_validated():
    batch = to_batch(*penalised_batch(0))
    with pytest.raises(ValueError, match=r"StepBatch.count must be >= 1; row 0 has 0"):
        with_counts(batch, [0] + [1] * (len(batch) - 1))
    with pytest.raises(ValueError, match=r"StepBatch.count must be an int64 tensor"):
        StepBatch(**{k: getattr(batch, k) for k in ("group_id", "traj_id", "step", "anchor", "reward", "logprobs",
                                                    "mask")}, count=torch.ones(len(batch)))
