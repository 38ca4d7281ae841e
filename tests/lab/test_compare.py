"""``gaca lab compare``: the quick matrix end to end (resumable, records outliving the runs), the
declared analysis, and the tables from typed records."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as scipy_stats

from gaca.cli import main
from gaca.config import ConfigError
from gaca.lab import stats
from gaca.lab.compare import (
    CompareMatrix,
    RunRecord,
    SplitEvaluation,
    WarmStartRecord,
    load_matrix,
    quick_matrix,
    run_finished,
    run_matrix,
    write_compare_report,
)
from gaca.lab.compare.analysis import (
    SettingRecords,
    collect,
    contrasts,
    cost,
    left_to_run,
    predicted_seconds,
    run_seconds,
    secondary_contrasts,
    seed_endpoints,
    split_table,
)
from gaca.lab.compare.matrix import load_run, run_spec_json
from gaca.lab.compare.records import CurvePoint
from gaca.lab.compare.report import build_report, markdown, plots
from gaca.lab.compare.scheduler import DEFERRED, ELSEWHERE, parse_deadline, run_lock_path, running_elsewhere
from gaca.lab.compare.worker import EVAL_FILE, RUN_BUSY, WarmStartMismatch, lock_run, run_one
from gaca.lab.compare.worker import main as worker_main
from gaca.persist import read_json
from gaca.train import train
from gaca.train.evaluate import GameOutcome
from gaca.train.logger import read_metrics
from gaca.train.timing import ITERATION_TIMES
from gaca.train.warm_start import warm_start_key

ROOT = Path(__file__).resolve().parents[2]


def _starts(log):
    return log.read_text().count("=== ")


def test_quick_compare_runs_resumes_and_reports(tmp_path, capsys):
    out, root = tmp_path / "quick", tmp_path / "scratch"
    matrix = quick_matrix(out, root)
    grpo, gaca = matrix.runs()
    # a run cut after its first iteration, as Ctrl-C or a crash leaves it
    cut = grpo.config()
    train(dataclasses.replace(cut, iterations=1))
    # under a deadline: nothing finished predicts a run's time yet, so both start (warned)
    assert main(["lab", "compare", "--quick", "--out", str(out), "--root", str(root), "--no-progress",
                 "--deadline", "+10h"]) == 0
    assert "2 of 2 runs finished" in capsys.readouterr().out
    assert [r["iteration"] for r in read_metrics(grpo.out_dir)] == [0, 1, 2]  # resumed, not restarted
    assert "resuming" in (root / "logs" / "quick__grpo__seed0.log").read_text()
    for run in (grpo, gaca):
        evaluations = read_json(run.out_dir / EVAL_FILE)
        assert set(evaluations) == {"valid_seen", "unseen_rooms"} and len(evaluations["unseen_rooms"]["outcomes"]
                                                                             ["seed"]) == 4
    # every arm of the seed started from the one cached warm start
    assert len(list((root / "warm-start").glob("warm-start-*.pt"))) == 1
    assert read_metrics(gaca.out_dir)[0]["sft/cached"] == 1.0
    assert "removed the earlier run's files" not in (root / "logs" / "quick__gaca__seed0.log").read_text()
    warm = matrix.store.warm_start("quick", 0)
    assert set(warm.evaluations) == {"valid_seen", "unseen_rooms"} and len(warm.fingerprint) == 16
    assert warm.sft_seconds == read_metrics(gaca.out_dir)[0]["sft/seconds"] > 0  # what making it took
    report = (out / "report.md").read_text()
    assert "| grpo | 1 |" in report and "| warm start | 1 |" in report and "held-out split `unseen_rooms`" in report
    assert "| quick | gaca − grpo | 1 |" in report  # the declared contrast, over the one seed
    for name in ("curves.png", "final.png", "training.png", "contrasts.png", "result.json"):
        assert (out / name).stat().st_size > 0
    # how it trained, per iteration (what outlives the run directory); the warm start it came from
    record = grpo.record()
    rollouts = [m for m in read_metrics(grpo.out_dir) if "env/episodes" in m]
    assert record.training["policy/nll"] == [m["policy/nll"] for m in rollouts] and len(rollouts) == 2
    assert all(r.record().warm_start == warm.fingerprint for r in (grpo, gaca))
    # called again: nothing left to run, nothing started
    logs = {p: _starts(p) for p in (root / "logs").glob("*.log")}
    assert set(run_matrix(matrix, progress=False).values()) == {"finished"}
    assert logs == {p: _starts(p) for p in (root / "logs").glob("*.log")}
    # --report-only: the report from the records, no run touched, no run count printed
    again = tmp_path / "again"
    shutil.copytree(out / "records", again / "records")
    assert main(["lab", "compare", "--quick", "--out", str(again), "--root", str(root), "--report-only"]) == 0
    assert "runs finished" not in capsys.readouterr().out
    assert (again / "report.md").read_text() == report


def test_records_outlive_the_run_directories(tmp_path):
    """A comparison continues in another sitting from its committed records alone: finished runs are
    not repeated and the report is the same; a lost warm-start record is recomputed, nothing retrained."""
    out = tmp_path / "quick"
    matrix = quick_matrix(out, tmp_path / "scratch")
    _, gaca = matrix.runs()
    assert set(run_matrix(matrix, progress=False).values()) == {"finished"}
    write_compare_report(matrix, tmp_path / "report1", command="cmd")
    saved = gaca.record()
    assert saved.complete and saved.iterations == 2 and len(saved.curve) == 3
    assert {s: e.to_json() for s, e in saved.final.items()} == read_json(gaca.out_dir / EVAL_FILE)
    shutil.rmtree(tmp_path / "scratch")  # the records alone
    later = quick_matrix(out, tmp_path / "elsewhere")
    assert set(run_matrix(later, progress=False).values()) == {"finished"}
    assert not (tmp_path / "elsewhere" / "logs").exists()
    write_compare_report(later, tmp_path / "report2", command="cmd")
    assert (tmp_path / "report2" / "report.md").read_text() == (tmp_path / "report1" / "report.md").read_text()
    # a seed's warm-start record lost too (its SFT cache is gone with the scratch root): recomputed and
    # evaluated, no run trained again, and the same record (same seed, same machine)
    warm_path = later.store.warm_start_path("quick", 0)
    warm = read_json(warm_path)
    warm_path.unlink()
    assert not run_finished(later.runs()[0])
    # a deadline the measured runs (seconds each, plus their SFT's measured time) end well before
    deadline = dt.datetime.now() + dt.timedelta(hours=1)
    assert set(run_matrix(later, progress=False, deadline=deadline).values()) == {"finished"}
    logs = "".join(p.read_text() for p in (tmp_path / "elsewhere" / "logs").glob("*.log"))
    assert "SFT warm start" in logs and "training" not in logs and "resuming" not in logs
    again = read_json(warm_path)
    assert {s: e["outcomes"] for s, e in again["evaluations"].items()} == \
        {s: e["outcomes"] for s, e in warm["evaluations"].items()}
    assert again["fingerprint"] == warm["fingerprint"] and later.runs()[1].record() == saved


def test_a_run_from_another_warm_start_is_reported_apart_and_refused(tmp_path):
    """A seed whose warm start was recomputed on another machine (other CPU numerics): runs from the
    two starts are not paired; the report lists the odd ones as left to run, and the worker refuses."""
    out = tmp_path / "quick"
    matrix = quick_matrix(out, tmp_path / "scratch")
    _, gaca = matrix.runs()
    assert set(run_matrix(matrix, progress=False).values()) == {"finished"}
    record = gaca.record()
    gaca.save_record(dataclasses.replace(record, warm_start="0123456789abcdef"))  # as if from another machine
    data = collect(matrix)
    assert list(data["quick"].runs) == ["grpo"] and list(data["quick"].not_comparable) == [gaca.name]
    assert left_to_run(matrix, data) == {"quick": {"gaca": [0]}}
    text = markdown(build_report(matrix, "cmd", data))
    assert "## Not comparable" in text and f"- {gaca.name}: warm start 0123456789abcdef" in text
    with pytest.raises(WarmStartMismatch, match="started from warm start 0123456789abcdef, not the seed's"):
        run_one(load_run(run_spec_json(gaca, "", [])))
    # the seed's warm start made again elsewhere, unlike its record: a fresh run is refused before it trains
    matrix.store.run_path("quick", "gaca", 0).unlink()
    shutil.rmtree(gaca.out_dir)
    warm = matrix.store.warm_start("quick", 0)
    matrix.store.save_warm_start("quick", 0, dataclasses.replace(warm, fingerprint="fedcba9876543210"))
    with pytest.raises(WarmStartMismatch, match=r"is not the seed's recorded one \(fedcba9876543210\)"):
        run_one(load_run(run_spec_json(gaca, "", [])))
    assert not (gaca.out_dir / "metrics.jsonl").exists()


def test_the_migrated_matrix_loads_and_bad_matrices_are_one_line_errors(tmp_path):
    matrix = load_matrix(ROOT / "experiments" / "2026-11-compare" / "matrix.toml", ["parallel=1"])
    assert matrix.parallel == 1 and len(matrix.runs()) == 3 * 5 * 5
    assert matrix.root_dir == Path("runs/2026-11-compare")  # scratch: never a path in the file
    assert matrix.store.directory == ROOT / "experiments" / "2026-11-compare" / "records"
    run = matrix.runs()[0]
    assert run.config().sft.cache_dir == "runs/2026-11-compare/warm-start"
    head = '[[settings]]\nname = "a"\npreset = "tiny-alfworld"\n'
    cases = {
        '[[arms]]\nname = "x"\nestimator = "nope"\n': "nope",
        '[[arms]]\nname = "x"\nestimator = "gaca"\noptions = {kappa = "high"}\n': "kappa",
        '[[arms]]\nname = "x"\nestimator = "gaca"\n[analysis]\ncontrasts = [["x", "y"]]\n': r"\['y'\]",
        'root = "/tmp/x"\n[[arms]]\nname = "x"\nestimator = "gaca"\n': "not a matrix-file key",
        '[[arms]]\nname = "x"\nestimator = "gaca"\nseeds = [7]\n': "seeds of the matrix",
        '[[arms]]\nname = "a b"\nestimator = "gaca"\n[[arms]]\nname = "a_b"\nestimator = "grpo"\n': "arm file",
        # an arm's config_overrides: not what its own fields or the lab set, valid values, the seed's warm start
        **{f'[[arms]]\nname = "x"\nestimator = "gaca"\nconfig_overrides = {{ {over} }}\n': message
           for over, message in (
               ('"advantage.kappa" = 1.0', r"may not set \['advantage.kappa'\]"),
               ('estimator = "grpo"', r"may not set \['estimator'\]"),
               ('"sft.cache_dir" = "elsewhere"', r"may not set \['sft.cache_dir'\]"),
               ('"ppo.entropy_coef" = -0.1', r"arm 'x': .*ppo.entropy_coef"),
               ('"ppo.no_such_key" = 1', r"arm 'x': .*no_such_key"))},
        ('[[arms]]\nname = "x"\nestimator = "gaca"\n[[arms]]\nname = "y"\nestimator = "gaca"\n'
         'config_overrides = { "sft.steps" = 7 }\n'): r"setting 'a': the arms' configs give different warm starts",
        **{_TWO_ARMS + f"[[analysis.secondary]]\ntreatment = \"x\"\ncontrol = \"y\"\n{rest}\n": message
           for rest, message in (
               ('seeds = [1]\ndeclared = "d"', r"seeds \[1\] are not run by both arms"),
               ('seeds = [0]\ndeclared = "d"\nendpoint = "loss"', r"secondary\[0\]: endpoint must be one of"),
               ('seeds = [0]\ndeclared = " "', r"secondary\[0\].*when it was declared"),
               ('seeds = [0]\ndeclared = "d"\nalternative = "less"', r"secondary\[0\]\.alternative must be one of"),
               ('seeds = [0]\ndeclared = "d"\n[[analysis.secondary]]\ntreatment = "x"\ncontrol = "y"\nseeds = [0]\n'
                'declared = "later"', r"declares 'x' − 'y' on 'success' with seeds \[0\] twice"))},
    }
    for text, message in cases.items():
        path = tmp_path / "m.toml"
        path.write_text(text + head)
        with pytest.raises(ConfigError, match=message):
            load_matrix(path)
    # an arm is an estimator plus its options; negative κ (the anti-GACA control) is allowed
    path = tmp_path / "m.toml"
    path.write_text('[[arms]]\nname = "anti"\nestimator = "gaca"\noptions = {kappa = -0.5, w0 = 0.75}\n' + head)
    cfg = load_matrix(path).runs()[0].config()
    assert cfg.estimator == "gaca" and cfg.advantage.kappa == -0.5 and cfg.advantage.w0 == 0.75
    # an arm may change the training beyond its credit (an entropy-bonus control), sharing the seed's warm start
    path.write_text('seeds = [0]\n[[arms]]\nname = "fixed"\nestimator = "fixed_mix"\n[[arms]]\nname = "fixed+H"\n'
                    'estimator = "fixed_mix"\nconfig_overrides = { "ppo.entropy_coef" = 0.02 }\n' + head)
    fixed, bonus = (run.config() for run in load_matrix(path).runs())
    assert (fixed.ppo.entropy_coef, bonus.ppo.entropy_coef) == (0.0, 0.02)
    assert warm_start_key(fixed) == warm_start_key(bonus)
    assert "- **fixed+H**: `fixed_mix`  config {'ppo.entropy_coef': 0.02} (seeds [0])" in markdown(
        build_report(load_matrix(path), "cmd", {}))


def _outcomes(returns, invalid=None, family="food"):
    invalid = invalid or [0] * len(returns)
    return [GameOutcome(seed=i, task_id=f"t{i}", family=family, won=r == 1.0, env_return=r, length=4, invalid=k,
                        crashed=False) for i, (r, k) in enumerate(zip(returns, invalid, strict=True))]


def _record(splits: dict[str, list[float]], invalid: float = 0.0) -> RunRecord:
    final = {s: SplitEvaluation(_outcomes(r), {"eval/invalid_ratio": invalid}) for s, r in splits.items()}
    return RunRecord(config={}, warm_start=None, final=final, curve=[CurvePoint(1, 10.0, 0.5)],
                     timing={k: 1.0 for k in ITERATION_TIMES}, iterations=1, complete=True)


def _matrix(tmp_path, text: str) -> CompareMatrix:
    path = tmp_path / "m.toml"
    path.write_text(text)
    return load_matrix(path)


TWO_SETTINGS = ('seeds = [0, 1]\n[[arms]]\nname = "grpo"\nestimator = "grpo"\n[[arms]]\nname = "gaca"\n'
                'estimator = "gaca"\n[[settings]]\nname = "alf"\npreset = "tiny-alfworld"\n'
                '[[settings]]\nname = "shop"\npreset = "tiny-webshop"\neval_splits = ["eval"]\n')


MATRIX_FILES = sorted((ROOT / "experiments").glob("*/matrix.toml"))


@pytest.mark.parametrize("matrix_file", MATRIX_FILES, ids=lambda p: p.parent.name)
def test_every_committed_matrix_loads_and_every_run_has_a_valid_config(matrix_file):
    matrix = load_matrix(matrix_file)
    configs = [run.config() for run in matrix.runs()]  # a config error is raised here
    assert len({run.name for run in matrix.runs()}) == len(configs) > 0
    for run, config in zip(matrix.runs(), configs, strict=True):
        assert config.estimator == run.arm.estimator and config.seed == run.seed
        assert all(getattr(config.advantage, key) == value for key, value in run.arm.options.items())
        for key, value in run.arm.config_overrides.items():
            section, name = key.split(".")
            assert getattr(getattr(config, section), name) == value


def test_the_primary_arms_run_first_over_every_seed_then_the_reference_arms():
    matrix = load_matrix(ROOT / "experiments" / "2026-12-decisive" / "matrix.toml")
    order = [(run.arm.name, run.seed) for run in matrix.runs()]
    primary = [arm.name for arm in matrix.arms if not arm.seeds]
    assert len(primary) == 3 and len(order) == 3 * 16 + 3 * 8
    assert order[:6] == [(primary[0], 0), (primary[1], 0), (primary[2], 0), (primary[0], 1), (primary[1], 1),
                         (primary[2], 1)]
    assert {name for name, _ in order[:48]} == set(primary)  # every reference run after every primary run
    assert [seed for _, seed in order[48:]] == sorted(seed for _, seed in order[48:])  # still seed-major


def test_a_setting_has_its_own_splits_and_a_graded_return_gets_a_score_column(tmp_path):
    matrix = _matrix(tmp_path, TWO_SETTINGS)
    assert {r.setting.name: r.eval_splits for r in matrix.runs()} == {
        "alf": ["valid_seen", "eval", "unseen_rooms"], "shop": ["eval"]}
    records = SettingRecords(runs={"gaca": {0: _record({"eval": [1.0, 0.5, 0.5]}, 0.25),
                                            1: _record({"eval": [1.0, 1.0, 0.0]})},
                                   "grpo": {0: _record({"eval": [0.5, 0.5, 0.5]}),
                                            1: _record({"eval": [1.0, 0.0, 0.0]})}},
                             warm={0: WarmStartRecord("f", {"eval": SplitEvaluation(_outcomes([0.0, 0.5, 0.0]))})})
    table = split_table(matrix, records, "eval")
    assert table.graded and table.common_seeds == [0, 1]
    assert table.rows["gaca"].score == pytest.approx([200 / 3, 200 / 3])
    assert table.rows["grpo"].score == pytest.approx([50.0, 100 / 3])
    assert table.rows["gaca"].invalid == [0.25, 0.0]
    assert table.rows["warm start"].seeds == [0]
    text = markdown(build_report(matrix, "cmd", {"shop": records}))
    assert "| gaca | 2 | 66.7 ± 0.0 | 0.500 ± 0.236 | 0.125 ± 0.177 |" in text and "score (100 × return)" in text
    # ALFWorld's return is a fixed reward for success (10): no score column
    alf = SettingRecords(runs={"gaca": {0: RunRecord({}, None, {"eval": SplitEvaluation(
        [GameOutcome(0, "t", "f", True, 10.0, 3, 0, False), GameOutcome(1, "t", "f", False, 0.0, 3, 0, False)])})}})
    assert not split_table(matrix, alf, "eval").graded


def test_the_report_says_what_is_left_to_run(tmp_path):
    matrix = _matrix(tmp_path, TWO_SETTINGS)
    done = _record({"eval": [1.0]})
    cut = dataclasses.replace(done, complete=False)  # trained, not yet evaluated everywhere
    data = {"shop": SettingRecords(runs={"gaca": {0: done, 1: cut}})}
    assert left_to_run(matrix, data) == {"alf": {"grpo": [0, 1], "gaca": [0, 1]}, "shop": {"grpo": [0, 1], "gaca": [1]}}
    text = markdown(build_report(matrix, "cmd", data))
    assert "1 of 8 runs finished." in text and "- shop: grpo seeds 0, 1; gaca seeds 1" in text


def test_the_cost_is_the_finished_runs_measured_time_and_names_the_warm_starts_to_make(tmp_path):
    """A finished run took its iterations × their mean seconds + its final evaluations; each run left costs
    its arm's mean over finished runs (the setting's mean for an arm with none); seeds without a warm start
    are named."""
    matrix = _matrix(tmp_path, TWO_SETTINGS.replace("seeds = [0, 1]", "seeds = [0, 1, 2]"))

    def timed(per_iteration: float, iterations: int, eval_seconds: float) -> RunRecord:
        record = _record({"eval": [1.0, 0.0]})
        record.final["eval"].seconds = eval_seconds
        return dataclasses.replace(record, timing={**record.timing, "time/iteration_s": per_iteration},
                                   iterations=iterations)

    assert run_seconds(timed(10.0, 40, 60.0)) == 460.0
    warm = {0: WarmStartRecord("f", {"eval": SplitEvaluation(_outcomes([0.0]))})}
    shop = SettingRecords(runs={"gaca": {0: timed(10.0, 40, 60.0), 1: timed(20.0, 40, 40.0)}}, warm=warm)
    costs = cost(matrix, {"shop": shop})
    # gaca seed 2 at gaca's mean (460 + 840) / 2 = 650 s; grpo's three at the setting's mean, 650 s too
    assert (costs["shop"].finished, costs["shop"].spent, costs["shop"].left) == (2, 1300.0, 4)
    assert costs["shop"].left_seconds == pytest.approx(4 * 650.0)
    assert costs["shop"].warm_starts == [1, 2]  # seed 1's run finished, but its warm start has no record
    shop.runs["grpo"] = {0: timed(1.0, 3600, 0.0)}  # an hour: the grpo runs left now cost grpo's own time
    costs = cost(matrix, {"shop": shop})
    assert costs["shop"].left == 3 and costs["shop"].left_seconds == pytest.approx(650.0 + 2 * 3600.0)
    assert math.isnan(costs["alf"].left_seconds) and costs["alf"].left == 6 and costs["alf"].warm_starts == [0, 1, 2]
    text = markdown(build_report(matrix, "cmd", {"shop": shop}))
    assert "- shop: 3 finished runs took ≈ 1.4 core-hours; the 3 left ≈ 2.2 core-hours at their arms' measured " \
           "time (≈ 1.1 hours at 2 at a time), plus the warm starts (SFT) of seeds 1, 2, not timed here." in text
    assert "- alf: 0 finished runs took ≈ 0.0 core-hours; the 6 left: unknown until one of the setting's runs " \
           "finishes, plus the warm starts (SFT) of seeds 0, 1, 2, not timed here." in text
    warm[0].sft_seconds = 840.0  # seed 0's SFT was timed: the ones to make are expected to take as long
    assert "plus the warm starts (SFT) of seeds 1, 2, ≈ 14 min each as measured." in markdown(
        build_report(matrix, "cmd", {"shop": shop}))
    every = {arm: {s: timed(1.0, 3600, 0.0) for s in (0, 1, 2)} for arm in ("gaca", "grpo")}
    done = cost(matrix, {"shop": SettingRecords(runs=every, warm=warm)})["shop"]
    assert (done.finished, done.left, done.left_seconds, done.warm_starts) == (6, 0, 0.0, [])
    assert "- shop: 6 finished runs took ≈ 6.0 core-hours (their warm starts' SFT not included)." in markdown(
        build_report(matrix, "cmd", {"shop": SettingRecords(runs=every, warm=warm)}))


def test_a_deadline_starts_no_run_predicted_to_end_after_it(tmp_path):
    """A run is predicted at its arm's measured time (the setting's where its arm has none), plus the
    setting's measured SFT while its warm start is not made; one that would end after the deadline is left
    for a later call, nothing of it started."""
    matrix = quick_matrix(tmp_path / "quick", tmp_path / "scratch")
    grpo, gaca = matrix.runs()
    hour = _record({s: [1.0, 0.0] for s in grpo.eval_splits})
    hour = dataclasses.replace(hour, timing={**hour.timing, "time/iteration_s": 3600.0})
    matrix.store.save_run("quick", "grpo", 0, hour)
    matrix.store.save_warm_start("quick", 0, WarmStartRecord(None, {s: SplitEvaluation(_outcomes([0.0]))
                                                                     for s in grpo.eval_splits}, 600.0))
    data = collect(matrix)
    assert predicted_seconds(data, gaca, warm_start_made=False) == 3600.0 + 600.0
    assert predicted_seconds(data, gaca, warm_start_made=True) == 3600.0
    assert math.isnan(predicted_seconds({}, gaca, warm_start_made=True))  # nothing measured: unknown
    untimed = {"quick": dataclasses.replace(data["quick"], warm={})}  # no SFT timed yet: the run alone
    assert predicted_seconds(untimed, gaca, warm_start_made=False) == 3600.0
    status = run_matrix(matrix, progress=False, deadline=dt.datetime.now() + dt.timedelta(minutes=60))
    assert status == {grpo.name: "finished", gaca.name: DEFERRED}
    assert not (tmp_path / "scratch" / "logs").exists()


def test_a_second_scheduler_starts_none_of_the_runs_another_worker_is_running(tmp_path):
    """A worker holds its run's lock while it lives, so a scheduler started twice on one scratch root
    starts none of the other's runs (here this test holds the locks, as the other's workers would), and a
    worker that loses the race to one exits at once, nothing done."""
    matrix = quick_matrix(tmp_path / "quick", tmp_path / "scratch")
    grpo, gaca = matrix.runs()
    held = [lock_run(run_lock_path(run)) for run in (grpo, gaca)]
    assert all(h is not None for h in held) and running_elsewhere(grpo)
    assert run_matrix(matrix, progress=False) == {grpo.name: ELSEWHERE, gaca.name: ELSEWHERE}
    assert not list((tmp_path / "scratch" / "logs").glob("*.log"))  # nothing started
    spec = run_lock_path(grpo).with_suffix(".json")
    spec.write_text(json.dumps(run_spec_json(grpo, "", [])))
    assert worker_main([str(spec)]) == RUN_BUSY and not grpo.out_dir.exists()
    held[0].close()  # its holder gone (however it ended), the run is free again
    assert not running_elsewhere(grpo) and running_elsewhere(gaca)


def test_a_deadline_is_a_clock_time_a_date_and_time_or_a_duration(capsys):
    now = dt.datetime(2026, 12, 7, 18, 0, 30)
    assert parse_deadline("20:30", now) == dt.datetime(2026, 12, 7, 20, 30)
    assert parse_deadline("7:15", now) == dt.datetime(2026, 12, 8, 7, 15)  # past today: tomorrow's
    assert parse_deadline("2026-12-09T06:00", now) == dt.datetime(2026, 12, 9, 6, 0)
    utc = dt.datetime(2026, 12, 9, 6, 0, tzinfo=dt.timezone.utc)
    assert parse_deadline("2026-12-09T06:00+00:00", now) == utc.astimezone().replace(tzinfo=None)
    assert parse_deadline("+2h30m", now) == now + dt.timedelta(hours=2, minutes=30)
    assert parse_deadline("+90m", now) == parse_deadline("+1.5h", now) == now + dt.timedelta(minutes=90)
    for bad in ("+", "soon", "25:00", "2h"):
        with pytest.raises(ValueError, match="give a clock time"):
            parse_deadline(bad, now)
    assert main(["lab", "compare", "--quick", "--deadline", "soon"]) != 0
    assert "--deadline 'soon': give a clock time (20:30)" in capsys.readouterr().err


def test_the_report_lists_the_endpoint_per_seed_that_each_difference_is_made_of(tmp_path):
    matrix = _matrix(tmp_path, "seeds = [0, 1, 2]\n" + _TWO_ARMS.replace("seeds = [0]\n", "")
                     + '[[settings]]\nname = "alf"\npreset = "tiny-alfworld"\neval_splits = ["valid_seen", "eval"]\n'
                     '[analysis]\ncontrasts = [["x", "y"]]\n')
    setting = matrix.settings[0]
    both = {"valid_seen": [1.0, 0.0], "eval": [1.0, 1.0]}  # pooled 3 of 4
    records = SettingRecords(runs={"x": {0: _record(both), 1: _record({"valid_seen": [1.0, 1.0], "eval": [1.0, 1.0]})},
                                   "y": {0: _record({"valid_seen": [0.0, 0.0], "eval": [1.0, 0.0]}),
                                         2: _record(both)}},
                             warm={0: WarmStartRecord("f", {s: SplitEvaluation(_outcomes([0.0, 0.0]))
                                                            for s in ("valid_seen", "eval")}),
                                   1: WarmStartRecord("f", {"eval": SplitEvaluation(_outcomes([1.0]))})})
    per_seed = seed_endpoints(matrix, records, setting)
    # seed 1's warm start lacks a split: no warm-start value for it
    assert per_seed == {0: {"warm start": 0.0, "x": 0.75, "y": 0.25}, 1: {"x": 1.0}, 2: {"y": 0.75}}
    text = markdown(build_report(matrix, "cmd", {"alf": records}))
    assert "| seed | warm start | x | y | d: x − y |" in text
    assert "| 0 | 0.000 | 0.750 | 0.250 | +0.500 |" in text and "| 1 | – | 1.000 | – | – |" in text
    assert "| 2 | – | – | 0.750 | – |" in text


def test_the_table_averages_over_the_seeds_every_arm_finished(tmp_path):
    """A seed finished by grpo alone stays out of the means (seeds differ more than arms), and the
    report says so; with no seed in common each row keeps its own seeds."""
    matrix = _matrix(tmp_path, TWO_SETTINGS.replace('[[settings]]\nname = "alf"\npreset = "tiny-alfworld"\n', ""))
    warm = {s: WarmStartRecord("f", {"eval": SplitEvaluation(_outcomes(r))}) for s, r in ((0, [0.0, 1.0]),
                                                                                         (1, [0.0, 0.0]))}
    data = SettingRecords(runs={"grpo": {0: _record({"eval": [1.0, 0.0]}), 1: _record({"eval": [0.0, 0.0]})},
                                "gaca": {0: _record({"eval": [1.0, 1.0]})}}, warm=warm)
    table = split_table(matrix, data, "eval")
    assert table.rows["grpo"].seeds == [0] and table.rows["grpo"].success == [0.5]
    assert table.rows["warm start"].seeds == [0] and table.left_out == {"grpo": [1]}
    text = markdown(build_report(matrix, "cmd", {"shop": data}))
    assert "Left out of this table's means (their seed not yet finished by every arm): grpo seed 1." in text
    del data.runs["gaca"]
    table = split_table(matrix, data, "eval")
    assert table.rows["grpo"].seeds == [0, 1] and table.rows["warm start"].seeds == [0, 1] and table.left_out == {}


def test_the_table_ignores_arms_not_started_and_seeds_an_arm_was_not_declared_on():
    """Mid-matrix: reference arms not started yet do not let the other arms' seeds run apart; half run or
    finished, a reference arm declared on fewer seeds does not take the primary arms' other seeds out of
    the means."""
    matrix = load_matrix(ROOT / "experiments" / "2026-12-decisive" / "matrix.toml")
    primary = [arm.name for arm in matrix.arms if not arm.seeds]
    fixed, gaca, anti = primary
    data = SettingRecords(runs={fixed: {s: _record({"eval": [1.0, 0.0]}) for s in (0, 1, 2)},
                                gaca: {0: _record({"eval": [1.0, 1.0]})}, anti: {0: _record({"eval": [0.0, 0.0]})}},
                          warm={})
    table = split_table(matrix, data, "eval")
    assert table.common_seeds == [0] and table.left_out == {fixed: [1, 2]} and table.rows[fixed].seeds == [0]
    assert table.rows["grpo"].seeds == []  # declared, not started: an empty row, not a reason to mix seeds
    reference = [arm.name for arm in matrix.arms if arm.seeds]
    every = {name: {s: _record({"eval": [1.0, 0.0]}) for s in matrix.seeds_of(matrix.arm(name))}
             for name in primary + reference}
    table = split_table(matrix, SettingRecords(runs=every, warm={}), "eval")
    assert table.common_seeds == list(range(16)) and table.left_out == {}
    assert table.rows[fixed].seeds == list(range(16)) and table.rows["grpo"].seeds == list(range(8))
    # half way through the reference arms: grpo has seeds 0 and 1 of its 0-7; the primary arms keep all 16
    every["grpo"] = {s: every["grpo"][s] for s in (0, 1)}
    table = split_table(matrix, SettingRecords(runs=every, warm={}), "eval")
    assert table.common_seeds == list(range(16)) and table.left_out == {}
    assert table.rows[fixed].seeds == list(range(16)) and table.rows["grpo"].seeds == [0, 1]
    # a reference seed whose primary arms are not all finished stays out of every row, the reference's too
    del every[anti][1]
    table = split_table(matrix, SettingRecords(runs=every, warm={}), "eval")
    assert 1 not in table.common_seeds and table.rows["grpo"].seeds == [0]
    assert table.left_out == {name: [1] for name in (fixed, gaca, "grpo", *reference[1:])}


def test_the_declared_contrasts_are_tested_over_seeds_with_holm_and_tost(tmp_path):
    seeds = list(range(8))
    matrix = _matrix(tmp_path, f"seeds = {seeds}\n" + '[[arms]]\nname = "a"\nestimator = "gaca"\n[[arms]]\n'
                     'name = "b"\nestimator = "fixed_mix"\n[[arms]]\nname = "c"\nestimator = "grpo"\n'
                     '[[settings]]\nname = "alf"\npreset = "tiny-alfworld"\neval_splits = ["valid_seen", "eval"]\n'
                     '[analysis]\ncontrasts = [["a", "b"], ["a", "c"]]\nmargin = 0.2\n'
                     'equivalent_by_construction = [["b", "c"]]\n')
    rng = np.random.default_rng(3)

    def run(p):  # 40 games per split, success probability p
        return _record({s: list((rng.random(40) < p).astype(float)) for s in ("valid_seen", "eval")})

    records = SettingRecords(runs={"a": {s: run(0.7) for s in seeds}, "b": {s: run(0.4) for s in seeds},
                                   "c": {s: run(0.68) for s in seeds}})
    results = contrasts(matrix, {"alf": records})
    assert [(c.treatment, c.control) for c in results] == [("a", "b"), ("a", "c")]
    ab = results[0]
    pooled = [np.mean([o.won for s in ("valid_seen", "eval") for o in r.final[s].outcomes])
              for r in (records.runs["a"][k] for k in seeds)]
    control = [np.mean([o.won for s in ("valid_seen", "eval") for o in r.final[s].outcomes])
               for r in (records.runs["b"][k] for k in seeds)]
    d = np.array(pooled) - np.array(control)
    assert ab.differences == pytest.approx(d.tolist()) and ab.mean == pytest.approx(d.mean())
    assert ab.t_p == pytest.approx(scipy_stats.ttest_1samp(d, 0.0, alternative="greater").pvalue)
    assert ab.holm_p >= ab.permutation_p and ab.verdict == "ahead"  # 0.7 against 0.4 over 8 seeds
    assert ab.crossed[0] < ab.mean < ab.crossed[1] and ab.detectable > 0
    assert results[1].verdict in ("inconclusive", "level (equivalent within ±0.2)")
    assert results[1].tost is not None and results[1].tost.margin == 0.2
    report = build_report(matrix, "cmd", {"alf": records})
    assert [(f.first, f.second, len(f.seeds)) for f in report.noise_floors] == [("b", "c", 8)]
    assert "Equivalent by construction" in markdown(report) and "**ahead**" in markdown(report)


_TWO_ARMS = '[[arms]]\nname = "x"\nestimator = "gaca"\n[[arms]]\nname = "y"\nestimator = "grpo"\nseeds = [0]\n'


def test_secondary_contrasts_use_their_own_seeds_endpoint_and_holm_family(tmp_path):
    """A secondary contrast is tested on its declared seeds only (other seeds' runs ignored), on its own
    endpoint (a training series: the mean of the last 10 iterations), Holm-adjusted apart from the primary."""
    matrix = _matrix(tmp_path, "seeds = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]\n" + '[[arms]]\nname = "a"\nestimator = "gaca"\n'
                     '[[arms]]\nname = "b"\nestimator = "fixed_mix"\n[[settings]]\nname = "alf"\n'
                     'preset = "tiny-alfworld"\neval_splits = ["valid_seen"]\n[analysis]\ncontrasts = [["a", "b"]]\n'
                     '[[analysis.secondary]]\ntreatment = "a"\ncontrol = "b"\nendpoint = "policy/nll"\n'
                     'seeds = [3, 4, 5, 6, 7, 8]\ndeclared = "after seeds 0-2"\n'
                     '[[analysis.secondary]]\ntreatment = "b"\ncontrol = "a"\nseeds = [3, 4, 5, 6, 7, 8]\n'
                     'declared = "after seeds 0-2"\nalternative = "two-sided"\n'
                     # the first again on a seed none of whose runs exist: it differs in its seeds only
                     '[[analysis.secondary]]\ntreatment = "a"\ncontrol = "b"\nendpoint = "policy/nll"\n'
                     'seeds = [9]\ndeclared = "after seeds 0-8"\n')
    rng = np.random.default_rng(7)

    def run(p, nll_end):
        record = _record({"valid_seen": list((rng.random(50) < p).astype(float))})
        record.training = {"policy/nll": [9.0] * 30 + [nll_end] * 10}  # only the last 10 count
        return record

    seeds = list(range(9))
    records = SettingRecords(runs={"a": {s: run(0.6, 1.0 + 0.1 * s) for s in seeds},
                                   "b": {s: run(0.5, 0.5 + 0.05 * s) for s in seeds}})
    nll, success = secondary_contrasts(matrix, {"alf": records})
    assert nll.seeds == [3, 4, 5, 6, 7, 8] and nll.declared == "after seeds 0-2" and nll.endpoint == "policy/nll"
    assert nll.differences == pytest.approx([0.5 + 0.05 * s for s in (3, 4, 5, 6, 7, 8)])
    assert nll.permutation_p == pytest.approx(1 / 64) and math.isnan(nll.crossed[0]) and nll.per_split == {}
    expected = stats.holm([nll.permutation_p, success.permutation_p])
    assert [nll.holm_p, success.holm_p] == pytest.approx(list(expected))
    assert success.t_p == pytest.approx(scipy_stats.ttest_1samp(success.differences, 0.0).pvalue)  # two-sided
    assert nll.holm_p < 0.05 and nll.verdict == "ahead" and success.tost is None
    (primary,) = contrasts(matrix, {"alf": records})
    assert primary.seeds == seeds  # the primary family is untouched by the secondary one
    report = build_report(matrix, "cmd", {"alf": records})
    text = markdown(report)
    assert "| alf | a − b | policy/nll | after seeds 0-2 | 6 |" in text
    # contrasts.png: the declared contrasts' panel, then one per secondary endpoint
    assert (tmp_path / "figures" / "contrasts.png") in plots(matrix, {"alf": records}, report, tmp_path / "figures")
    # before any declared seed finished, the declaration is listed all the same
    early = SettingRecords(runs={arm: {s: r for s, r in runs.items() if s < 3} for arm, runs in records.runs.items()})
    assert secondary_contrasts(matrix, {"alf": early}) == []
    assert "| alf | a − b | policy/nll | after seeds 0-2 | 0 | no seed of [3, 4, 5, 6, 7, 8]" in \
        markdown(build_report(matrix, "cmd", {"alf": early}))
    # two declarations that differ in their seeds only are two rows: one tested, one waiting
    assert "| alf | a − b | policy/nll | after seeds 0-8 | 0 | no seed of [9] finished" in text


def test_the_verdict_waits_for_every_declared_seed(tmp_path):
    """An interim look (fewer seeds finished than declared) gives the tests but no verdict, however
    clear; an arm declared on fewer seeds bounds its contrast's declared seeds."""
    matrix = _matrix(tmp_path, "seeds = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]\n" + '[[arms]]\nname = "a"\nestimator = "gaca"\n'
                     '[[arms]]\nname = "b"\nestimator = "fixed_mix"\n[[arms]]\nname = "c"\nestimator = "grpo"\n'
                     'seeds = [0, 1, 2, 3, 4, 5]\n[[settings]]\nname = "alf"\npreset = "tiny-alfworld"\n'
                     'eval_splits = ["valid_seen"]\n[analysis]\ncontrasts = [["a", "b"], ["a", "c"]]\n')
    rng = np.random.default_rng(5)

    def run(p):
        return _record({"valid_seen": list((rng.random(60) < p).astype(float))})

    seeds = list(range(6))
    records = SettingRecords(runs={"a": {s: run(0.9) for s in seeds}, "b": {s: run(0.1) for s in seeds},
                                   "c": {s: run(0.1) for s in seeds}})
    ab, ac = contrasts(matrix, {"alf": records})
    assert ab.declared_seeds == list(range(10)) and ac.declared_seeds == seeds
    assert ab.interim and ab.holm_p < 0.05 and ab.verdict == "none yet (6 of 10 seeds)"
    assert not ac.interim and ac.holm_p < 0.05 and ac.verdict == "ahead"
    assert "**none yet (6 of 10 seeds)**" in markdown(build_report(matrix, "cmd", {"alf": records}))


def test_running_some_seeds_now_leaves_the_declared_matrix_alone(tmp_path, capsys):
    """``--seeds``: only those seeds' runs are started (none here), a seed outside the matrix is a
    one-line error, and the declaration, arm seed subsets included, is untouched."""
    matrix = quick_matrix(tmp_path / "quick", tmp_path / "scratch")
    assert run_matrix(matrix, progress=False, seeds=[]) == {}
    assert not (tmp_path / "scratch" / "logs").exists()
    with pytest.raises(ValueError, match=r"--seeds \[7\] are not seeds of the matrix \[0\]"):
        run_matrix(matrix, progress=False, seeds=[0, 7])
    with pytest.raises(SystemExit):
        main(["lab", "compare", "--quick", "--seeds", "zero"])
    assert "invalid int value: 'zero'" in capsys.readouterr().err
