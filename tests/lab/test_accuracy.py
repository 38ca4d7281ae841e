"""``gaca lab accuracy --quick`` end to end: a real tiny checkpoint, real ALFWorld games, real report."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gaca.cli import main
from gaca.lab import AccuracyConfig, estimator_grid, measure_accuracy
from gaca.train import train
from tests.small_run import small_config


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory, cache):
    run_dir = tmp_path_factory.mktemp("lab") / "run"
    train(small_config(run_dir, cache, "env.max_steps=5", "threads=1"))
    return run_dir


def test_quick_accuracy_writes_the_report(checkpoint, tmp_path, capsys):
    out = tmp_path / "report"
    assert main(["lab", "accuracy", str(checkpoint), "--quick", "progress=false", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "steps scored against Monte-Carlo truth" in printed and "gigpo" in printed
    for name in ("report.md", "correlation.png", "mixture.png", "scatter.png", "result.json"):
        assert (out / name).stat().st_size > 0, name
    raw = json.loads((out / "result.json").read_text())
    data, analysis = raw["data"], raw["analysis"]
    assert data["counts"]["mismatches"] == 0  # every replayed prefix restored the recorded ALFWorld state
    assert data["counts"]["continuations"] == len(data["steps"]["step"]) * 2 * 4
    assert set(data["estimates"]) == {s.label for s in estimator_grid()}
    scored = analysis["steps_scored"]
    assert scored == len(data["steps"]["step"]) > 0
    assert analysis["undiscounted"]["scores"]["all"]["_steps"]["count"]["value"] == scored
    report = (out / "report.md").read_text()
    for label in ("gaca zscore clip κ=0.25", "empg", "empg nll", "hgpo K=2", "hgpo K=2 base"):
        assert f"| {label} |" in report, label


def test_same_seed_same_numbers(checkpoint):
    cfg = AccuracyConfig(groups=2, steps=8, continuations=2, bootstrap=10, num_envs=8, progress=False, threads=1)
    first, second = measure_accuracy(checkpoint, cfg), measure_accuracy(checkpoint, cfg)
    assert first.steps == second.steps and first.estimates == second.estimates
    assert np.isfinite(np.asarray(first.steps["truth"])).all()


def test_bad_lab_options_are_one_line_errors(checkpoint, capsys):
    assert main(["lab", "accuracy", str(checkpoint), "continuations=1"]) == 2
    assert "continuations" in capsys.readouterr().err
