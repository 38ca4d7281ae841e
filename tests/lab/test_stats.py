"""The lab's statistics against slow obvious references, scipy's own tests, worked examples and simulations.

Accuracy: weighted statistics against the expanded rows, w* on known a, b, the Monte-Carlo SE, the noise
ceiling, population weights. Comparison over seeds: paired t, sign and sign-flip tests, Holm, TOST, power,
the crossed seed × game bootstrap.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats as scipy_stats

from gaca.lab import stats
from gaca.lab.accuracy.select import position_bins, stratified_sample
from gaca.lab.stats import quantile_bins


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
    from gaca.lab.accuracy.score import score_settings

    rng = np.random.default_rng(0)
    truth = rng.normal(size=200)
    estimates = {"good": truth + 0.5 * rng.normal(size=200), "bad": truth + 2.0 * rng.normal(size=200)}
    groups = np.repeat(np.arange(40), 5)
    out = score_settings(estimates, truth, np.full(200, 0.1), groups, {"all": np.ones(200, bool)},
                         replicates=300, rng=np.random.default_rng(1), reference="good")["all"].settings
    assert out["good"].delta_pearson == stats.Estimate(0.0, 0.0, 0.0)
    d = out["bad"].delta_pearson
    assert d.value == pytest.approx(out["bad"].pearson.value - out["good"].pearson.value)
    assert d.hi < 0  # paired: clearly worse, although the two correlations' own intervals are wide


# ---- paired comparisons over seeds ----

# A worked example: 8 paired seeds, Σd = 1.8, d̄ = 0.225, Σd² = 0.96, Σ(d − d̄)² = 0.96 − 8·0.225² = 0.555,
# s² = 0.555/7, s = 0.2815772, se = s/√8 = 0.0995526, t = 0.225/0.0995526 = 2.260112, df = 7.
WORKED = np.array([0.3, -0.1, 0.5, 0.2, 0.4, -0.2, 0.1, 0.6])


def test_paired_t_worked_example():
    r = stats.paired_t(WORKED)
    assert (r.n, r.df) == (8, 7)
    assert r.mean == pytest.approx(0.225) and r.sd == pytest.approx(np.sqrt(0.555 / 7))
    assert r.se == pytest.approx(np.sqrt(0.555 / 7) / np.sqrt(8)) and r.t == pytest.approx(2.260112, abs=1e-6)


@pytest.mark.parametrize("n", [2, 3, 5, 20])
@pytest.mark.parametrize("alternative", ["greater", "less"])
def test_paired_t_matches_scipy(n, alternative):
    d = np.random.default_rng(n).normal(0.3, 1.0, size=n)
    r = stats.paired_t(d, alternative=alternative, alpha=0.1)
    ref = scipy_stats.ttest_1samp(d, 0.0, alternative=alternative)
    assert r.t == pytest.approx(ref.statistic) and r.p == pytest.approx(ref.pvalue)
    assert r.p_two_sided == pytest.approx(scipy_stats.ttest_1samp(d, 0.0).pvalue)
    ci = scipy_stats.ttest_1samp(d, 0.0).confidence_interval(0.9)
    assert (r.lo, r.hi) == pytest.approx((ci.low, ci.high)) and r.level == pytest.approx(0.9)


def test_paired_t_degenerate_inputs_are_nan():
    one = stats.paired_t(np.array([0.4]))
    assert one.n == 1 and one.mean == 0.4 and all(np.isnan([one.sd, one.se, one.t, one.p, one.lo, one.hi]))
    flat = stats.paired_t(np.full(5, 0.1))  # 0.1 is not exact in binary: the sd is rounding noise
    assert flat.sd == 0.0 and all(np.isnan([flat.se, flat.t, flat.p, flat.p_two_sided, flat.lo]))
    with pytest.raises(ValueError, match=r"d\[2\]"):
        stats.paired_t(np.array([0.1, 0.2, np.nan]))


def test_sign_test_worked_example_and_ties():
    # 6 of 8 positive: P(K ≥ 6 | n = 8, ½) = (C(8,6) + C(8,7) + C(8,8))/2^8 = (28 + 8 + 1)/256
    r = stats.sign_test(WORKED)
    assert (r.n, r.ties, r.positive) == (8, 0, 6) and r.p == pytest.approx(37 / 256)
    tied = stats.sign_test(np.r_[WORKED, 0.0, 0.0], alternative="two-sided")
    assert (tied.n, tied.ties) == (8, 2) and tied.p == pytest.approx(scipy_stats.binomtest(6, 8).pvalue)
    assert stats.sign_test(np.array([1.0, 1.0, 1.0]), alternative="less").p == pytest.approx(1.0)
    assert np.isnan(stats.sign_test(np.zeros(4)).p)


def _slow_sign_flip(d, alternative):
    """Every sign vector, one at a time, from the docstring's definition."""
    sums = np.array([np.dot(s, d) for s in itertools.product([1.0, -1.0], repeat=d.size)])
    t, tol = d.sum(), 1e-10 * np.abs(d).sum()
    greater, less = np.mean(sums >= t - tol), np.mean(sums <= t + tol)
    return {"greater": greater, "less": less, "two-sided": min(1.0, 2 * min(greater, less))}[alternative]


@pytest.mark.parametrize("n", [1, 2, 5, 8, 11])
@pytest.mark.parametrize("alternative", ["greater", "less", "two-sided"])
def test_exact_sign_flip_matches_enumeration_and_scipy(n, alternative):
    d = np.round(np.random.default_rng(n).normal(0.2, 1.0, size=n), 1)  # rounding makes ties of T*
    r = stats.sign_flip_test(d, alternative=alternative)
    assert r.exact and r.resamples == 2**n
    assert r.p == pytest.approx(_slow_sign_flip(d, alternative), abs=1e-12)
    if n == 1:
        return  # scipy's permutation_test wants two observations
    ref = scipy_stats.permutation_test((d,), lambda x, axis: np.mean(x, axis=axis), permutation_type="samples",
                                       alternative=alternative, n_resamples=np.inf)
    assert r.p == pytest.approx(ref.pvalue, abs=1e-12)


def test_sign_flip_worked_example():
    # ±1 ±2 ±3 takes the values 6, 4, 2, 0, 0, −2, −4, −6: only T* = 6 reaches T = 6, so p = 1/8
    assert stats.sign_flip_test(np.array([1.0, 2.0, 3.0])).p == pytest.approx(1 / 8)
    # d = (1, 1): T* ∈ {2, 0, 0, −2}; p_greater = 1/4, p_less = 1, two-sided = 2·1/4
    assert stats.sign_flip_test(np.array([1.0, 1.0]), alternative="two-sided").p == pytest.approx(0.5)
    assert np.isnan(stats.sign_flip_test(np.array([])).p)


def test_monte_carlo_sign_flip_agrees_with_the_exact_count():
    d = np.random.default_rng(4).normal(0.25, 1.0, size=22)
    exact = stats.sign_flip_test(d, exact_max=22)
    mc = stats.sign_flip_test(d, exact_max=20, resamples=100_000, rng=np.random.default_rng(5))
    assert exact.exact and not mc.exact and mc.resamples == 100_000
    assert abs(mc.p - exact.p) < 4 * np.sqrt(exact.p * (1 - exact.p) / 100_000) + 1e-5
    with pytest.raises(ValueError, match="rng"):
        stats.sign_flip_test(d, exact_max=20)


def test_exact_tests_hold_their_level_under_the_null():
    # d symmetric about 0: P(p ≤ α) ≤ α for exact tests (the discreteness makes them conservative)
    rng = np.random.default_rng(6)
    draws = rng.normal(size=(2000, 10))
    flip = np.array([stats.sign_flip_test(d).p for d in draws])
    sign = np.array([stats.sign_test(d).p for d in draws])
    for p in (flip, sign):
        assert np.mean(p <= 0.05) <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / 2000)


def _holm_rejections(p, alpha):
    """Holm's procedure as stated: walk up the sorted p, reject while p_(i) ≤ α/(m − i + 1), stop at the
    first failure."""
    order = np.argsort(p, kind="stable")
    rejected = np.zeros(p.size, bool)
    for i, k in enumerate(order):
        if not p[k] <= alpha / (p.size - i):
            break
        rejected[k] = True
    return rejected


def test_holm_worked_example():
    # sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1 = 0.02, 0.03, 0.06, 0.04; running max 0.02, 0.03, 0.06, 0.06
    assert stats.holm(np.array([0.01, 0.04, 0.03, 0.005])) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert stats.holm(np.array([0.5, 0.9])) == pytest.approx([1.0, 1.0])  # capped at 1


@pytest.mark.parametrize("seed", range(5))
def test_holm_adjusted_p_rejects_exactly_as_the_procedure(seed):
    p = np.random.default_rng(seed).uniform(0, 0.2, size=7) ** 2
    adjusted = stats.holm(p)
    assert np.all(adjusted >= p) and np.all(adjusted <= 1)
    order = np.argsort(p)
    assert np.all(np.diff(adjusted[order]) >= 0)  # monotone in p
    for alpha in np.linspace(0.001, 0.2, 60):
        assert np.array_equal(adjusted <= alpha, _holm_rejections(p, alpha))


def test_holm_keeps_a_nan_contrast_in_the_family():
    adjusted = stats.holm(np.array([0.01, np.nan, 0.02]))
    assert np.isnan(adjusted[1]) and adjusted[0] == pytest.approx(0.03) and adjusted[2] == pytest.approx(0.04)


@pytest.mark.parametrize("seed", range(4))
def test_tost_is_two_scipy_one_sided_tests(seed):
    d = np.random.default_rng(seed).normal(0.1 * seed, 0.5, size=12)
    r = stats.tost(d, 0.4, alpha=0.05)
    lower = scipy_stats.ttest_1samp(d, -0.4, alternative="greater")
    upper = scipy_stats.ttest_1samp(d, 0.4, alternative="less")
    assert (r.t_lower, r.p_lower) == pytest.approx((lower.statistic, lower.pvalue))
    assert (r.t_upper, r.p_upper) == pytest.approx((upper.statistic, upper.pvalue))
    assert r.p == max(r.p_lower, r.p_upper)
    ci = scipy_stats.ttest_1samp(d, 0.0).confidence_interval(0.90)  # the (1 − 2α) interval
    assert (r.lo, r.hi) == pytest.approx((ci.low, ci.high))


def test_tost_decision_is_the_interval_inside_the_margin():
    rng = np.random.default_rng(7)
    for _ in range(200):
        d = rng.normal(rng.uniform(-0.5, 0.5), rng.uniform(0.1, 1.0), size=rng.integers(3, 25))
        r = stats.tost(d, 0.3)
        assert r.equivalent == (-0.3 < r.lo and r.hi < 0.3)


def test_tost_degenerate_and_invalid():
    flat = stats.tost(np.zeros(6), 0.1)
    assert np.isnan(flat.p) and not flat.equivalent
    with pytest.raises(ValueError, match="margin"):
        stats.tost(WORKED, 0.0)


def _simulated_rejection(delta, n, sides, alpha=0.05, trials=4000, seed=8):
    """The share of simulated paired-t tests (σ = 1) that reject, computed from the test's definition."""
    d = np.random.default_rng(seed).normal(delta, 1.0, size=(trials, n))
    t = d.mean(1) / (d.std(1, ddof=1) / np.sqrt(n))
    if sides == "one-sided":
        return np.mean(t > scipy_stats.t.ppf(1 - alpha, n - 1))
    return np.mean(np.abs(t) > scipy_stats.t.ppf(1 - alpha / 2, n - 1))


@pytest.mark.parametrize("sides", ["one-sided", "two-sided"])
@pytest.mark.parametrize("n", [5, 12])
def test_minimum_detectable_difference_has_its_power_in_simulation(sides, n):
    mdd = stats.minimum_detectable_difference(n, 1.0, power=0.8, sides=sides)
    assert stats.paired_t_power(mdd.difference, n, 1.0, sides=sides) == pytest.approx(0.8, abs=1e-9)
    assert _simulated_rejection(mdd.difference, n, sides) == pytest.approx(0.8, abs=3 * np.sqrt(0.16 / 4000))
    # the normal approximation ignores the uncertainty of s: its difference is smaller and too optimistic
    assert mdd.normal < mdd.difference
    assert _simulated_rejection(mdd.normal, n, sides) < 0.8 - 3 * np.sqrt(0.16 / 4000)


def test_power_at_zero_is_alpha_and_scales_with_sd():
    assert stats.paired_t_power(0.0, 10, 1.0) == pytest.approx(0.05)
    assert stats.paired_t_power(0.0, 10, 1.0, sides="two-sided") == pytest.approx(0.05)
    # the noncentrality δ√n/σ is all that matters: doubling δ and σ changes nothing
    assert stats.paired_t_power(0.6, 10, 2.0) == pytest.approx(stats.paired_t_power(0.3, 10, 1.0))
    a, b = (stats.minimum_detectable_difference(10, sd) for sd in (1.0, 3.0))
    assert b.difference == pytest.approx(3 * a.difference)
    assert np.isnan(stats.minimum_detectable_difference(1, 1.0).difference)
    assert np.isnan(stats.paired_t_power(0.3, 10, 0.0))


def _two_way(d):
    """Exact bootstrap variance of the crossed mean, from the docstring's decomposition d = m + r_s + c_g + e_sg."""
    m = d.mean()
    rows, cols = d.mean(1) - m, d.mean(0) - m
    e = d - m - rows[:, None] - cols[None, :]
    s, g = d.shape
    return np.mean(rows**2) / s + np.mean(cols**2) / g + np.mean(e**2) / (s * g)


def test_crossed_bootstrap_is_the_mean_of_the_drawn_cells():
    d = np.random.default_rng(9).normal(size=(4, 7))
    r = stats.crossed_bootstrap(d, replicates=50, rng=np.random.default_rng(10))
    rng = np.random.default_rng(10)  # the same draws, in the documented order: seeds, then games
    seeds, games = rng.integers(0, 4, size=(50, 4)), rng.integers(0, 7, size=(50, 7))
    slow = [d[np.ix_(seeds[b], games[b])].mean() for b in range(50)]
    assert r.replicates == pytest.approx(slow, abs=1e-12) and r.mean == pytest.approx(d.mean())


def test_crossed_bootstrap_variance_matches_the_two_way_formula():
    rng = np.random.default_rng(11)
    d = rng.normal(size=(6, 1)) + 2 * rng.normal(size=(1, 30)) + rng.normal(size=(6, 30))
    r = stats.crossed_bootstrap(d, replicates=40_000, rng=rng)
    assert np.var(r.replicates) == pytest.approx(_two_way(d), rel=0.03)


def test_crossed_bootstrap_covers_under_crossed_effects():
    # d = a_s + b_g + e_sg with true mean 0, seed sd 0.5, game sd 1, noise 1, 10 seeds × 40 games
    rng = np.random.default_rng(12)
    hits = []
    for _ in range(300):
        d = rng.normal(0, 0.5, (10, 1)) + rng.normal(0, 1.0, (1, 40)) + rng.normal(size=(10, 40))
        r = stats.crossed_bootstrap(d, replicates=1000, rng=rng)
        hits.append(r.lo <= 0 <= r.hi)
    assert 0.95 - 3 * np.sqrt(0.05 * 0.95 / 300) < np.mean(hits)  # about 0.93: 10 seeds make it a bit short


def test_crossed_bootstrap_edges():
    assert np.isnan(stats.crossed_bootstrap(np.ones((1, 5)), replicates=10, rng=np.random.default_rng(0)).lo)
    one_game = np.arange(5.0)[:, None]
    r = stats.crossed_bootstrap(one_game, replicates=20, rng=np.random.default_rng(1))
    seeds = np.random.default_rng(1).integers(0, 5, size=(20, 5))
    assert r.replicates == pytest.approx(one_game[seeds, 0].mean(1))  # G = 1: the bootstrap over seeds
    with pytest.raises(ValueError):
        stats.crossed_bootstrap(np.array([[1.0, np.nan]]), replicates=5, rng=np.random.default_rng(0))


# ---- the Monte-Carlo truth ----


def test_monte_carlo_se_mixed_rows_are_the_sample_se():
    returns = np.random.default_rng(13).integers(0, 2, size=(50, 8)).astype(float) * 2.0
    mixed = np.ptp(returns, axis=1) > 0
    expected = returns.std(axis=1, ddof=1) / np.sqrt(8)
    assert stats.monte_carlo_se(returns, upper=2.0)[mixed] == pytest.approx(expected[mixed])


def test_monte_carlo_se_jeffreys_floor_where_all_agree():
    # M = 4, none or all succeed: p̂ = (0 + ½)/5 = 0.1 or (4 + ½)/5 = 0.9, √(0.1·0.9/4) = 0.15
    returns = np.array([[0, 0, 0, 0], [1, 1, 1, 1], [0.6, 0.6, 0.6, 0.6]], float)
    # a constant discounted return 0.6: the farther bound is 0, at 0.6, so 0.6·0.15 = 0.09
    assert stats.monte_carlo_se(returns) == pytest.approx([0.15, 0.15, 0.09])
    assert stats.monte_carlo_se(2 * returns[:2], upper=2.0) == pytest.approx([0.3, 0.3])  # scales with R
    assert np.all(np.isnan(stats.monte_carlo_se(np.ones((3, 1)))))  # M = 1: no SE
    with pytest.raises(ValueError, match=r"returns\[1, 2\]"):
        stats.monte_carlo_se(np.array([[0, 1, 0], [0, 1, 1.5]]))


def test_monte_carlo_se_from_counts_equals_the_returns_form():
    rng = np.random.default_rng(14)
    returns = (rng.random((200, 6)) < rng.random((200, 1))).astype(float)
    from_counts = stats.monte_carlo_se_from_counts(returns.sum(1), 6)
    assert from_counts == pytest.approx(stats.monte_carlo_se(returns))
    # k = 3 of M = 6: sd = √(3·3/(6·5)) = √0.3, SE = √0.3/√6 = √0.05
    assert stats.monte_carlo_se_from_counts(np.array([3]), 6)[0] == pytest.approx(np.sqrt(0.05))
    with pytest.raises(ValueError, match="successes"):
        stats.monte_carlo_se_from_counts(np.array([7]), 6)


def test_noise_ceiling_worked_example_and_simulation():
    # truth 0, 1, 2, 3: var = 5/3; SE 0.5 everywhere: √(1 − 0.25/(5/3)) = √0.85
    assert stats.noise_ceiling(np.arange(4.0), np.full(4, 0.5)) == pytest.approx(np.sqrt(0.85))
    rng = np.random.default_rng(15)
    signal, se = rng.normal(size=50_000), rng.uniform(0.2, 1.0, size=50_000)
    truth = signal + se * rng.normal(size=50_000)
    assert stats.noise_ceiling(truth, se) == pytest.approx(np.corrcoef(signal, truth)[0, 1], abs=0.01)
    assert np.isnan(stats.noise_ceiling(np.ones(1), np.ones(1)))  # n < 2
    assert np.isnan(stats.noise_ceiling(np.ones(3), np.ones(3)))  # no variance
    assert stats.noise_ceiling(np.array([0.0, 1.0]), np.full(2, 5.0)) == 0.0  # more noise than variance


def test_inclusion_weights_worked_example():
    population = np.r_[np.zeros(100, int), np.ones(10, int)]
    sample = np.r_[np.zeros(5, int), np.ones(5, int)]
    w = stats.inclusion_weights(sample, population)
    assert w.tolist() == [20.0] * 5 + [2.0] * 5 and w.sum() == 110  # N_h/n_h: 100/5 and 10/5
    with pytest.raises(ValueError, match="cell 1"):
        stats.inclusion_weights(np.ones(11, int), population)


def test_population_weighted_correlation_recovers_the_population_value():
    # Two cells with opposite relations; the sample over-represents the small one 10:1.
    rng = np.random.default_rng(16)
    cells = np.r_[np.zeros(20_000, int), np.ones(2_000, int)]
    x = rng.normal(size=cells.size)
    y = np.where(cells == 0, x, -x) + 0.5 * rng.normal(size=cells.size)
    picked = np.r_[rng.choice(20_000, 500, replace=False), 20_000 + rng.choice(2_000, 500, replace=False)]
    w = stats.inclusion_weights(cells[picked], cells)
    population = np.corrcoef(x, y)[0, 1]
    groups = np.arange(picked.size) // 10
    weighted = stats.bootstrap_correlations(x[picked], y[picked], groups, replicates=200,
                                            rng=np.random.default_rng(17), row_weights=w)
    plain = stats.bootstrap_correlations(x[picked], y[picked], groups, replicates=200, rng=np.random.default_rng(17))
    assert weighted.pearson.value == pytest.approx(population, abs=0.05)
    assert abs(plain.pearson.value - population) > 0.4  # the unweighted sample is a different population
    assert weighted.pearson.lo < population < weighted.pearson.hi
    assert weighted.spearman.value == pytest.approx(stats.spearman(x[picked], y[picked], w)[0])


def test_ratio_identified_rule():
    assert stats.ratio_identified(1.0, np.r_[np.full(975, 0.5), np.full(25, -0.1)]) == (True, 0.025)
    assert stats.ratio_identified(1.0, np.r_[np.full(970, 0.5), np.full(20, -0.1), np.full(10, np.nan)]) == (
        False, 0.03)
    assert stats.ratio_identified(-2.0, np.full(10, -1.0)) == (True, 0.0)
    assert stats.ratio_identified(0.0, np.ones(10)) == (False, 1.0)
    assert stats.ratio_identified(1.0, np.r_[np.ones(9), 0.0], level=0.75) == (True, 0.1)  # 0.1 ≤ 0.125
    assert stats.ratio_identified(1.0, np.r_[np.ones(9), 0.0], level=0.9) == (False, 0.1)  # 0.1 > 0.05


def test_mixture_coefficients_match_least_squares():
    rng = np.random.default_rng(18)
    e, s = rng.normal(size=60), rng.normal(size=60)
    t = 0.7 * e + 0.2 * s + 0.1 * rng.normal(size=60)
    w = rng.integers(1, 4, size=60).astype(float)
    (a,), (b,) = stats.mixture_coefficients(t, e, s, w)
    ref = np.linalg.lstsq(np.sqrt(w)[:, None] * np.stack([e, s], 1), np.sqrt(w) * t, rcond=None)[0]
    assert (a, b) == pytest.approx(tuple(ref))
