"""``gaca lab accuracy --quick`` end to end: a real tiny checkpoint, real ALFWorld games, real report."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from gaca.cli import main
from gaca.lab.accuracy import AccuracyConfig, analyze_accuracy, estimator_grid, load_accuracy_result, measure_accuracy
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
    data, command = load_accuracy_result(out / "result.json")
    assert command.startswith("gaca lab accuracy") and data.counts.mismatches == 0  # every prefix restored its state
    assert data.counts.continuations == len(data.steps) * 2 * 4
    assert set(data.estimates) == {s.label for s in estimator_grid()}
    analysis = analyze_accuracy(data)
    assert analysis.steps_scored == len(data.steps) > 0
    assert analysis.undiscounted.scores["all"].steps == analysis.steps_scored
    # the stratified sample's inverse inclusion probabilities: every step stands for at least itself
    assert (data.steps.inclusion >= 1).all() and analysis.undiscounted.population is not None
    raw = json.loads((out / "result.json").read_text())
    assert raw["analysis"]["steps_scored"] == analysis.steps_scored  # what the report says is what it measured
    report = (out / "report.md").read_text()
    for label in ("gaca zscore clip κ=0.25", "empg", "empg nll", "hgpo K=2", "hgpo K=2 base"):
        assert f"| {label} |" in report, label
    # measured once, analysed again from the result file alone
    again = tmp_path / "again"
    assert main(["lab", "accuracy", str(out / "result.json"), "--from-json", "--out", str(again)]) == 0
    assert (again / "report.md").read_text() == report


def test_same_seed_same_numbers(checkpoint):
    cfg = AccuracyConfig(groups=2, steps=8, continuations=2, bootstrap=10, num_envs=8, progress=False, threads=1)
    first, second = measure_accuracy(checkpoint, cfg), measure_accuracy(checkpoint, cfg)
    assert first.steps.to_json() == second.steps.to_json()
    assert all(np.array_equal(first.estimates[k], second.estimates[k]) for k in first.estimates)
    assert np.isfinite(first.steps.truth).all() and (first.steps.truth_se > 0).all()  # floored where all agree


def test_bad_lab_options_are_one_line_errors(checkpoint, capsys):
    assert main(["lab", "accuracy", str(checkpoint), "continuations=1"]) == 2
    assert "continuations" in capsys.readouterr().err


ACCURACY_RESULTS = sorted((Path(__file__).resolve().parents[2] / "experiments").glob("*accuracy*/*/result.json"))


@pytest.mark.parametrize("path", ACCURACY_RESULTS, ids=lambda p: f"{p.parents[1].name}/{p.parent.name}")
def test_every_committed_accuracy_record_loads_as_the_report_describes_it(path):
    data, command = load_accuracy_result(path)
    assert command.startswith("gaca lab accuracy") and len(data.steps) > 0
    raw = json.loads(path.read_text())
    assert raw["analysis"]["steps_scored"] <= len(data.steps)
    assert f"{len(data.steps)} steps scored" in (path.parent / "report.md").read_text()


def test_the_committed_failure_logs_match_the_evaluations_they_came_from():
    """experiments/2026-12-main-job-ceiling: the episode logs classify to the counts its README quotes."""
    import importlib.util

    folder = Path(__file__).resolve().parents[2] / "experiments" / "2026-12-main-job-ceiling"
    spec = importlib.util.spec_from_file_location("failures", folder / "failures.py")
    failures = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(failures)
    for name, won, wrong in (("warm-start", 118, 60), ("after-100-iterations", 141, 44)):
        counts = failures.classify(failures.read(folder / f"{name}.jsonl.gz"))
        assert counts["episodes"] == 256 and counts["won"] == won and counts["took a wrong object"] == wrong
        lost = ("never took an object", "took a wrong object", "took the right object, did not finish")
        assert sum(counts[k] for k in lost) == 256 - won
