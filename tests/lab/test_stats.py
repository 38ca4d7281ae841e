"""Weighted statistics against slow obvious references on the expanded rows, and w* on known a, b."""

from __future__ import annotations

import numpy as np
import pytest

from gaca.lab import stats
from gaca.lab.select import position_bins, quantile_bins, stratified_sample


def _expand(x, w):
    return np.repeat(x, w.astype(int))


def _ranks(values):
    """Mid-ranks, the slow way: 1 + number smaller + (number equal − 1)/2."""
    return np.array([1 + np.sum(values < v) + (np.sum(values == v) - 1) / 2 for v in values])


def _pearson(x, y):
    x, y = x - x.mean(), y - y.mean()
    return float((x * y).sum() / np.sqrt((x * x).sum() * (y * y).sum()))


@pytest.mark.parametrize("seed", range(5))
def test_integer_weights_equal_the_statistic_of_repeated_rows(seed):
    rng = np.random.default_rng(seed)
    n = 40
    x = np.round(rng.normal(size=n), 1)  # rounding makes ties, as GRPO's equal episode advantages do
    y = 0.5 * x + rng.normal(size=n)
    w = rng.integers(0, 4, size=(6, n)).astype(float)
    w[:, :3] += 1
    for b in range(6):
        xe, ye = _expand(x, w[b]), _expand(y, w[b])
        assert stats.pearson(x, y, w)[b] == pytest.approx(_pearson(xe, ye), abs=1e-10)
        assert stats.spearman(x, y, w)[b] == pytest.approx(_pearson(_ranks(xe), _ranks(ye)), abs=1e-10)
        assert stats.sign_agreement(x, y, w)[b] == pytest.approx(np.mean(np.sign(xe) == np.sign(ye)))
        slope, intercept = np.polyfit(xe, ye, 1)
        rmse = np.sqrt(np.mean((ye - intercept - slope * xe) ** 2))
        assert stats.affine_rmse(x, y, w)[b] == pytest.approx(rmse, abs=1e-10)


def test_undefined_statistics_are_nan():
    x, y = np.ones(5), np.arange(5.0)
    assert np.isnan(stats.pearson(x, y, np.ones(5))[0]) and np.isnan(stats.spearman(x, y, np.ones(5))[0])
    assert np.isnan(stats.sign_agreement(x[:0], y[:0], np.ones(0))[0])


def test_group_bootstrap_draws_whole_groups():
    groups = np.array([0, 0, 0, 1, 1, 2])
    w = stats.group_bootstrap_weights(groups, 500, np.random.default_rng(0))
    assert w.shape == (500, 6)
    assert np.all(w[:, 0] == w[:, 1]) and np.all(w[:, 3] == w[:, 4])  # a group's rows move together
    assert np.all(w[:, [0, 3, 5]].sum(axis=1) == 3)  # three groups drawn each time
    assert 0.9 < w[:, 5].mean() < 1.1


def test_mixture_weight_recovers_a_and_b():
    rng = np.random.default_rng(3)
    episode, step = rng.normal(size=400), rng.normal(size=400)
    for a, b in ((2.0, 1.0), (0.5, 1.5), (1.0, 0.0)):
        truth = a * episode + b * step + 0.05 * rng.normal(size=400)
        assert stats.mixture_weight(truth, episode, step, np.ones(400))[0] == pytest.approx(b / (a + b), abs=0.02)
    assert np.isnan(stats.mixture_weight(episode, episode, episode, np.ones(400))[0])  # collinear: undefined


def test_interval_ignores_nan_replicates():
    assert stats.interval(np.array([np.nan, 1.0, 2.0, 3.0]), 0.5) == (1.5, 2.5)
    assert np.isnan(stats.interval(np.array([np.nan]))[0])


def test_stratified_sample_is_balanced_and_within_budget():
    rng = np.random.default_rng(0)
    cells = np.concatenate([np.zeros(100), np.ones(10), np.full(50, 2)]).astype(int)
    picked = stratified_sample(cells, 60, rng)
    counts = np.bincount(cells[picked], minlength=3)
    assert len(picked) == 60 and len(set(picked.tolist())) == 60
    assert counts[1] == 10 and counts[0] == counts[2] == 25  # the small cell gives its spare share away
    assert np.array_equal(stratified_sample(cells[:30], 60, rng), np.arange(30))  # under budget: every row


def test_bins():
    assert position_bins(np.array([0, 1, 2, 3, 4, 5]), np.full(6, 6)).tolist() == [0, 0, 1, 1, 2, 2]
    assert np.bincount(quantile_bins(np.r_[np.zeros(5), np.arange(5.0)], 5)).tolist() == [2, 2, 2, 2, 2]


def test_paired_deltas_against_a_reference_setting():
    from gaca.lab.score import score_settings

    rng = np.random.default_rng(0)
    truth = rng.normal(size=200)
    estimates = {"good": truth + 0.5 * rng.normal(size=200), "bad": truth + 2.0 * rng.normal(size=200)}
    groups = np.repeat(np.arange(40), 5)
    out = score_settings(estimates, truth, np.full(200, 0.1), groups, {"all": np.ones(200, bool)},
                         replicates=300, rng=np.random.default_rng(1), reference="good")["all"]
    assert out["good"]["delta_pearson"] == {"value": 0.0, "lo": 0.0, "hi": 0.0}
    d = out["bad"]["delta_pearson"]
    assert d["value"] == pytest.approx(out["bad"]["pearson"]["value"] - out["good"]["pearson"]["value"])
    assert d["hi"] < 0  # paired: clearly worse, although the two correlations' own intervals are wide
