"""``gaca lab compare``: the quick matrix end to end, skipping finished runs, resuming a cut one; paired statistics."""

from __future__ import annotations

import dataclasses
import json
import logging
import shutil
from pathlib import Path

import numpy as np
import pytest

from gaca.cli import main
from gaca.lab.compare import EVAL_FILE, run_finished, run_matrix
from gaca.lab.compare_report import paired_difference, write_compare_report
from gaca.lab.matrix import load_matrix, quick_matrix
from gaca.lab.records import read_json, read_record
from gaca.train import train
from gaca.train.logger import read_metrics


def _starts(log):
    return log.read_text().count("=== ")


def test_quick_compare_runs_resumes_and_reports(tmp_path, capsys):
    root = tmp_path / "cmp"
    matrix = quick_matrix(root)
    grpo, gaca = matrix.runs()
    # a run cut after its first iteration, as Ctrl-C or a crash leaves it
    cut = grpo.config()
    train(type(cut)(**{**vars(cut), "iterations": 1}))
    assert main(["lab", "compare", "--quick", "--root", str(root), "--no-progress"]) == 0
    assert "2 of 2 runs finished" in capsys.readouterr().out
    assert [r["iteration"] for r in read_metrics(grpo.out_dir)] == [0, 1, 2]  # resumed, not restarted
    assert "resuming" in (root / "logs" / "quick__grpo__seed0.log").read_text()
    for run in (grpo, gaca):
        record = json.loads((run.out_dir / EVAL_FILE).read_text())
        assert record["complete"] and set(record["final"]) == {"valid_seen", "unseen_rooms"}
        assert len(record["final"]["unseen_rooms"]["outcomes"]) == 4
    # every estimator of the seed started from the one cached warm start
    assert len(list((root / "warmstart").glob("warmstart-*.pt"))) == 1
    assert read_metrics(gaca.out_dir)[0]["sft/cached"] == 1.0
    warm = json.loads((root / "records" / "quick" / "warmstart-seed0.json").read_text())["warmstart"]
    assert set(warm) == {"valid_seen", "unseen_rooms"}
    report = (root / "report" / "report.md").read_text()
    assert "| grpo | 1 |" in report and "| warm start | 1 |" in report and "held-out split `unseen_rooms`" in report
    for name in ("curves.png", "final.png", "result.json"):
        assert (root / "report" / name).stat().st_size > 0
    # and how it trained, per iteration (what outlives the run directory)
    training = read_record(grpo.record_path)["training"]
    rollouts = [m for m in read_metrics(grpo.out_dir) if "env/episodes" in m]
    assert training["policy/nll"] == [m["policy/nll"] for m in rollouts] and len(rollouts) == 2
    assert training["env/invalid_ratio"] == [m["env/invalid_ratio"] for m in rollouts]
    # every run records the warm start it started from: the seed's
    seeds = json.loads((root / "records" / "quick" / "warmstart-seed0.json").read_text())["fingerprint"]
    assert len(seeds) == 16 and all(read_record(r.record_path)["warm_start"] == seeds for r in (grpo, gaca))
    # called again: nothing left to run, nothing started
    logs = {p: _starts(p) for p in (root / "logs").glob("*.log")}
    assert set(run_matrix(matrix, progress=False).values()) == {"finished"}
    assert logs == {p: _starts(p) for p in (root / "logs").glob("*.log")}
    # --report-only: the report from the records, no run touched, no run count printed
    out = tmp_path / "report-only"
    assert main(["lab", "compare", "--quick", "--root", str(root), "--report-only", "--out", str(out)]) == 0
    assert "runs finished" not in capsys.readouterr().out
    assert (out / "report.md").read_text() == (root / "report" / "report.md").read_text()
    assert logs == {p: _starts(p) for p in (root / "logs").glob("*.log")}


def test_records_outlive_the_run_directories(tmp_path):
    """A comparison continues in another sitting from its committed records alone: finished runs
    are not repeated and the report is the same; a run finished before records existed gets one."""
    root = tmp_path / "cmp"
    matrix = quick_matrix(root)
    _, gaca = matrix.runs()
    assert set(run_matrix(matrix, progress=False).values()) == {"finished"}
    command = "gaca lab compare --quick"
    write_compare_report(matrix, tmp_path / "report1", command=command)
    assert gaca.record_path == root / "records" / "quick" / "gaca-seed0.json"
    saved = read_record(gaca.record_path)
    assert saved["complete"] and saved["iterations"] == 2 and len(saved["curve"]) == 3
    assert saved["final"] == json.loads((gaca.out_dir / EVAL_FILE).read_text())["final"]
    # an older run: its directory finished, no record yet -> rebuilt from the directory and saved
    gaca.record_path.unlink()
    assert run_finished(gaca) and read_record(gaca.record_path) == saved
    # the records alone (the run directories deleted): nothing to run, the same report
    shutil.move(root / "records", tmp_path / "kept")
    shutil.rmtree(root)
    later = dataclasses.replace(matrix, root=str(tmp_path / "scratch"), records=str(tmp_path / "kept"))
    assert set(run_matrix(later, progress=False).values()) == {"finished"}
    assert not list((tmp_path / "scratch" / "logs").glob("*.log"))
    write_compare_report(later, tmp_path / "report2", command=command)
    assert (tmp_path / "report2" / "report.md").read_text() == (tmp_path / "report1" / "report.md").read_text()
    # a seed's warm-start record lost too (its SFT cache is gone with the root): the warm start is
    # recomputed and evaluated, no run is trained again, and the record is the same (same seed)
    warm_path = later.warmstart_record_path("quick", 0)
    warm = read_json(warm_path)
    warm_path.unlink()
    assert not run_finished(later.runs()[0])
    assert set(run_matrix(later, progress=False).values()) == {"finished"}
    logs = "".join(p.read_text() for p in (tmp_path / "scratch" / "logs").glob("*.log"))
    assert "SFT warm start" in logs and "training" not in logs and "resuming" not in logs
    assert _outcomes(read_json(warm_path)) == _outcomes(warm)
    assert read_record(later.runs()[1].record_path) == saved


def test_a_run_from_another_warm_start_is_reported_apart(tmp_path, caplog):
    """A seed whose warm start was recomputed on another machine (other CPU numerics): runs from the
    two starts are not paired; the report lists the odd ones and counts them as left to run."""
    from gaca.lab.compare_report import collect, left_to_run, markdown, tables

    root = tmp_path / "cmp"
    matrix = quick_matrix(root)
    _, gaca = matrix.runs()
    assert set(run_matrix(matrix, progress=False).values()) == {"finished"}
    record = read_json(gaca.record_path)
    record["warm_start"] = "0123456789abcdef"  # as if trained on another machine
    gaca.record_path.write_text(json.dumps(record))
    data = collect(matrix)
    assert list(data["quick"]["runs"]) == ["grpo"] and list(data["quick"]["not_comparable"]) == [gaca.name]
    assert left_to_run(matrix, data) == {"quick": {"gaca": [0]}}
    text = markdown(tables(data, matrix), data, matrix, "cmd")
    assert "## Not comparable" in text and f"- {gaca.name}: warm start 0123456789abcdef" in text
    # the run's own process says so in one line when it finds the mismatch
    from gaca.lab.compare import run_one

    with caplog.at_level(logging.ERROR, logger="gaca.lab.compare"):
        run_one(json.loads((root / "logs" / "quick__gaca__seed0.json").read_text()))
    assert [r.getMessage() for r in caplog.records if "not the seed's recorded" in r.getMessage()] == [
        f"{gaca.name} started from warm start 0123456789abcdef, not the seed's recorded "
        f"{read_json(matrix.warmstart_record_path('quick', 0))['fingerprint']} (computed on another machine: CPU "
        "numerics differ); the report leaves it out. To run the seed here, delete its records"]


def _outcomes(warm: dict) -> dict:
    return {split: e["outcomes"] for split, e in warm["warmstart"].items()}


def test_paired_difference():
    ours = [[1, 1, 0, 1], [1, 0, 0, 0], [1, 1, 1, 0]]
    theirs = [[0, 1, 0, 1], [1, 0, 0, 0], [0, 1, 0, 0]]
    p = paired_difference(ours, theirs, replicates=500)
    assert p["mean"] == pytest.approx(np.mean([0.25, 0.0, 0.5]))
    assert p["ahead"] == 2 and p["behind"] == 0 and p["seeds"] == 3
    assert 0.0 <= p["lo"] <= p["mean"] <= p["hi"] <= 0.75
    same = paired_difference(ours, ours, replicates=50)
    assert same["mean"] == same["lo"] == same["hi"] == 0.0


def test_the_shipped_matrix_loads_and_bad_keys_are_one_line_errors(tmp_path):
    matrix = load_matrix(None, ["seeds=[0, 1, 2, 3, 4]"])
    assert matrix.seeds == [0, 1, 2, 3, 4] and [s.name for s in matrix.settings] == [
        "tiny-alfworld", "tiny-alfworld-long", "tiny-webshop"]
    assert len(matrix.runs()) == 3 * 5 * 5
    assert matrix.records_dir == Path("runs/compare/records")  # default: under the scratch root
    kept = tmp_path / "kept.toml"
    kept.write_text('records = "records"\n[[settings]]\nname = "a"\npreset = "tiny-alfworld"\n')
    assert load_matrix(kept).records_dir == tmp_path / "records"  # relative to the matrix file
    bad = tmp_path / "m.toml"
    bad.write_text('estimators = ["grpo", "nope"]\n[[settings]]\nname = "a"\npreset = "tiny-alfworld"\n')
    from gaca.config import ConfigError

    with pytest.raises(ConfigError, match="nope"):
        load_matrix(bad)


def test_a_setting_has_its_own_splits_and_a_graded_return_gets_a_score_column(tmp_path):
    from gaca.lab.compare_report import TIMING, markdown, tables

    path = tmp_path / "m.toml"
    path.write_text('estimators = ["grpo", "gaca"]\nseeds = [0, 1]\n'
                    '[[settings]]\nname = "alf"\npreset = "tiny-alfworld"\n'
                    '[[settings]]\nname = "shop"\npreset = "tiny-webshop"\neval_splits = ["eval"]\n')
    matrix = load_matrix(path)
    assert {r.setting.name: r.eval_splits for r in matrix.runs()} == {
        "alf": ["valid_seen", "eval", "unseen_rooms"], "shop": ["eval"]}

    def record(returns, invalid=(0, 0, 0)):  # one evaluation: WebShop-like partial returns, success = return 1
        return {"outcomes": [{"family": "food", "won": r == 1.0, "return": r, "crashed": False, "length": 4,
                              "invalid": k} for r, k in zip(returns, invalid, strict=True)]}

    runs = {"gaca": {0: {"final": {"eval": record([1.0, 0.5, 0.5], (1, 0, 2))}},
                     1: {"final": {"eval": record([1.0, 1.0, 0.0])}}},
            "grpo": {0: {"final": {"eval": record([0.5, 0.5, 0.5])}}, 1: {"final": {"eval": record([1.0, 0.0, 0.0])}}}}
    for est in runs.values():
        for r in est.values():
            r["timing"] = {k: 1.0 for k in TIMING}
    data = {"shop": {"runs": runs, "warmstart": {0: {"eval": record([0.0, 0.5, 0.0])}}}}
    summary = tables(data, matrix)
    split = summary["shop"]["splits"]["eval"]
    assert list(summary["shop"]["splits"]) == ["eval"] and split["graded"]
    assert split["rows"]["gaca"]["score"] == pytest.approx([200 / 3, 200 / 3])
    assert split["rows"]["grpo"]["score"] == pytest.approx([50.0, 100 / 3])
    assert split["paired_score"]["grpo"]["mean"] == pytest.approx(np.mean([50 / 3, 100 / 3]))
    assert split["paired"]["grpo"]["mean"] == pytest.approx(np.mean([1 / 3, 1 / 3]))
    text = markdown(summary, data, matrix, "cmd")
    # invalid actions over all steps of a seed's games: 3 of 12, then 0 of 12
    assert split["rows"]["gaca"]["invalid"] == pytest.approx([0.25, 0.0])
    assert "| gaca | 2 | 66.7 ± 0.0 | 0.500 ± 0.236 | 0.125 ± 0.177 |" in text and "score (100 × return)" in text
    assert "success: all | invalid-action ratio |" in text
    # ALFWorld's return is a fixed reward for success (10): no score column
    timing = {k: 1.0 for k in TIMING}
    alf = {"outcomes": [{"family": "f", "won": w, "return": 10.0 * w, "crashed": False} for w in (True, False)]}
    data = {"alf": {"runs": {"gaca": {0: {"final": {"eval": alf}, "timing": timing}}}, "warmstart": {}}}
    assert not tables(data, matrix)["alf"]["splits"]["eval"]["graded"]


def test_the_report_says_what_is_left_to_run(tmp_path):
    from gaca.lab.compare_report import TIMING, left_to_run, markdown, tables

    path = tmp_path / "m.toml"
    path.write_text('estimators = ["grpo", "gaca"]\nseeds = [0, 1]\n'
                    '[[settings]]\nname = "alf"\npreset = "tiny-alfworld"\n'
                    '[[settings]]\nname = "shop"\npreset = "tiny-webshop"\neval_splits = ["eval"]\n')
    matrix = load_matrix(path)
    outcomes = [{"family": "food", "won": True, "return": 1.0, "crashed": False}]
    done = {"final": {"eval": {"outcomes": outcomes}}, "complete": True, "timing": {k: 1.0 for k in TIMING}}
    cut = {**done, "complete": False}  # trained, not yet evaluated everywhere
    data = {"shop": {"runs": {"gaca": {0: done, 1: cut}}, "warmstart": {}}}
    assert left_to_run(matrix, data) == {"alf": {"grpo": [0, 1], "gaca": [0, 1]}, "shop": {"grpo": [0, 1], "gaca": [1]}}
    text = markdown(tables(data, matrix), data, matrix, "cmd")
    assert "1 of 8 runs finished." in text and "- shop: grpo 0, 1; gaca 1" in text


def test_the_warm_start_cache_can_live_beside_the_records(tmp_path):
    """``warmstart`` in the matrix file: a directory relative to it (to travel with the records when a
    seed spans machines); by default the scratch root's."""
    path = tmp_path / "m.toml"
    text = 'root = "/scratch/cmp"\nrecords = "records"\n[[settings]]\nname = "alf"\npreset = "tiny-alfworld"\n'
    path.write_text(text)
    assert load_matrix(path).runs()[0].config().sft.cache_dir == "/scratch/cmp/warmstart"
    path.write_text('warmstart = "warmstart"\n' + text)
    run = load_matrix(path).runs()[0]
    assert run.config().sft.cache_dir == str(tmp_path / "warmstart")
    assert run.matrix.records_dir == tmp_path / "records"


def test_the_table_averages_over_the_seeds_every_estimator_finished(tmp_path):
    """A seed finished by grpo alone stays out of the means (seeds differ more than estimators), and
    the report says so; with no seed in common each row keeps its own seeds."""
    from gaca.lab.compare_report import TIMING, markdown, tables

    path = tmp_path / "m.toml"
    path.write_text('estimators = ["grpo", "gaca"]\nseeds = [0, 1]\n[[settings]]\nname = "shop"\n'
                    'preset = "tiny-webshop"\neval_splits = ["eval"]\n')
    matrix = load_matrix(path)

    def run(*won):
        outcomes = [{"family": "food", "won": w, "return": float(w), "crashed": False} for w in won]
        return {"final": {"eval": {"outcomes": outcomes}}, "complete": True, "timing": {k: 1.0 for k in TIMING},
                "curve": [[1, 10, sum(won) / len(won)]]}

    data = {"shop": {"runs": {"grpo": {0: run(1, 0), 1: run(0, 0)}, "gaca": {0: run(1, 1)}},
                     "warmstart": {0: {"eval": run(0, 1)["final"]["eval"]}, 1: {"eval": run(0, 0)["final"]["eval"]}}}}
    split = tables(data, matrix)["shop"]["splits"]["eval"]
    assert split["rows"]["grpo"]["seeds"] == [0] and split["rows"]["grpo"]["all"] == [0.5]
    assert split["rows"]["warm start"]["seeds"] == [0] and split["left_out"] == {"grpo": [1]}
    assert split["paired"]["grpo"]["seeds"] == 1 and split["paired"]["grpo"]["mean"] == pytest.approx(0.5)
    text = markdown(tables(data, matrix), data, matrix, "cmd")
    assert "Left out of this table, their seed not yet finished by every estimator: grpo seed 1." in text
    del data["shop"]["runs"]["gaca"]
    split = tables(data, matrix)["shop"]["splits"]["eval"]
    assert split["rows"]["grpo"]["seeds"] == [0, 1] and split["rows"]["warm start"]["seeds"] == [0, 1]
    assert split["left_out"] == {}
