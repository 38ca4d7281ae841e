"""The training-series view of a comparison (``gaca.lab.compare.dynamics``) against direct computations."""

from __future__ import annotations

import numpy as np
import pytest

from gaca.lab.compare import load_matrix
from gaca.lab.compare.analysis import SettingRecords
from gaca.lab.compare.dynamics import series_drift, within_seed_correlation
from gaca.lab.compare.records import RunRecord, SplitEvaluation, WarmStartRecord
from gaca.lab.compare.report import build_report, markdown
from gaca.train.evaluate import GameOutcome
from gaca.train.timing import ITERATION_TIMES


def _evaluation(wins: int, games: int = 20) -> dict[str, SplitEvaluation]:
    outcomes = [GameOutcome(seed=i, task_id=f"t{i}", family="f", won=i < wins, env_return=float(i < wins),
                            length=3, invalid=0, crashed=False) for i in range(games)]
    return {"eval": SplitEvaluation(outcomes, {})}


def _run(wins: int, training: dict[str, list[float]]) -> RunRecord:
    return RunRecord(config={}, warm_start=None, final=_evaluation(wins), training=training, iterations=20,
                     timing={k: 1.0 for k in ITERATION_TIMES}, complete=True)


def test_within_seed_correlation_is_the_correlation_of_residuals_after_seed_means():
    rng = np.random.default_rng(0)
    seeds = np.repeat([0, 1, 2, 3], 3)
    x = rng.normal(size=12) + 5 * seeds
    y = 0.5 * x - 8 * seeds + rng.normal(scale=0.3, size=12)  # across seeds y falls with x, within it rises
    dummies = (seeds[:, None] == np.unique(seeds)[None, :]).astype(float)
    rx = x - dummies @ np.linalg.lstsq(dummies, x, rcond=None)[0]
    ry = y - dummies @ np.linalg.lstsq(dummies, y, rcond=None)[0]
    r, n = within_seed_correlation(x, y, seeds)
    assert r == pytest.approx(np.corrcoef(rx, ry)[0, 1]) and n == 12
    assert r > 0.8 and np.corrcoef(x, y)[0, 1] < 0
    # a seed with one run carries nothing once centred: dropped, and counted out
    r1, n1 = within_seed_correlation(np.append(x, 100.0), np.append(y, -100.0), np.append(seeds, 9))
    assert (r1, n1) == (pytest.approx(r), 12)
    assert np.isnan(within_seed_correlation(np.ones(3), np.arange(3.0), np.array([0, 1, 2]))[0])


def test_series_drift_per_arm_and_its_correlation_with_the_gain(tmp_path):
    path = tmp_path / "m.toml"
    path.write_text('seeds = [0, 1, 2]\n[[arms]]\nname = "up"\nestimator = "gaca"\n[[arms]]\nname = "down"\n'
                    'estimator = "fixed_mix"\n[[settings]]\nname = "alf"\npreset = "tiny-alfworld"\n'
                    'eval_splits = ["eval"]\n')
    matrix = load_matrix(path)
    ramp = np.linspace(0.0, 1.0, 20)
    runs: dict[str, dict[int, RunRecord]] = {"up": {}, "down": {}}
    for seed in range(3):
        # "up"'s NLL rises by 1 + seed/10 and it gains 4 + seed games over the warm start; "down" falls and gains 1
        runs["up"][seed] = _run(8 + seed + 4 + seed, {"policy/nll": list(1.0 + (1 + seed / 10) * ramp),
                                                      "adv/nll_mean": list(1.0 + ramp),
                                                      "env/invalid_ratio": [0.0] * 20})
        runs["down"][seed] = _run(8 + seed + 1, {"policy/nll": list(1.0 - 0.5 * ramp), "adv/nll_mean": [0.0] * 20,
                                                 "env/invalid_ratio": [0.0] * 20})
    runs["down"][3] = _run(5, {"policy/nll": [1.0] * 12})  # too short for a start and an end: left out
    warm = {seed: WarmStartRecord("fp", _evaluation(8 + seed)) for seed in range(3)}
    records = SettingRecords(runs=runs, warm=warm)
    drifts = {d.key: d for d in series_drift(matrix, records, matrix.settings[0])}
    assert set(drifts) == {"policy/nll", "adv/nll_mean"}  # invalid ratio never off zero
    assert set(drifts["adv/nll_mean"].arms) == {"up"}  # fixed_mix does not measure it
    nll = drifts["policy/nll"]
    assert set(nll.arms["down"]) == {0, 1, 2}
    for seed in range(3):
        start, end = nll.arms["up"][seed]
        assert start == pytest.approx(np.mean(1.0 + (1 + seed / 10) * ramp[:5]))
        assert end == pytest.approx(np.mean(1.0 + (1 + seed / 10) * ramp[-10:]))
    changes = [nll.arms[a][s][1] - nll.arms[a][s][0] for a in ("up", "down") for s in range(3)]
    gains = [(4 + s) / 20 for s in range(3)] + [1 / 20] * 3
    expected, n = within_seed_correlation(np.array(changes), np.array(gains), np.array([0, 1, 2] * 2))
    assert nll.gain_r == pytest.approx(expected) and nll.gain_runs == n == 6 and nll.gain_r > 0.9
    text = markdown(build_report(matrix, "cmd", {"alf": records}))
    assert "training series (descriptive, not declared)" in text
    assert "| policy/nll | up | 3 | " in text and f"{nll.gain_r:+.2f} (6 runs)" in text
