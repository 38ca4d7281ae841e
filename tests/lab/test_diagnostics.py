"""``gaca lab dynamics|credit|anchors|diff`` on real tiny runs of a small matrix.

Every number a diagnostic computes is checked against an independent computation: the window means
from the record files and metrics.jsonl read as plain JSON; the credit rows against the metrics the
training iteration logged on the same rollout, and the credit tables against loops over those rows;
the anchors' step groups by counting texts; the run diff against what two arms of one warm start must
share.
"""

from __future__ import annotations

import dataclasses
import json
import math
import shutil
from collections import defaultdict

import numpy as np
import pytest
import torch

from gaca.advantage import compute_advantages
from gaca.cli import main
from gaca.lab.compare import load_matrix
from gaca.lab.compare.worker import train_and_evaluate
from gaca.lab.diagnostics import DiagnosticError, training_dynamics
from gaca.lab.diagnostics.anchors import anchor_peers
from gaca.lab.diagnostics.common import train_pool
from gaca.lab.diagnostics.credit import measure_credit
from gaca.lab.diagnostics.diff import MACHINE_KEYS, diff_runs
from gaca.lab.diagnostics.dynamics import METRICS, RECORD
from gaca.persist import read_json
from gaca.rollout import anchor_text, collect_rollouts
from gaca.train import train
from gaca.train.checkpoint import CHECKPOINT_NAME, load_checkpoint
from gaca.train.run import load_checkpoint_policy
from tests.small_run import small_config, small_overrides

#: On top of ``small_overrides``: 2 groups of 4 per iteration, and a warm start strong enough that some
#: actions are valid and some not (a 64-wide model, 50 SFT steps at a high rate).
EXTRA = ("iterations=4", "rollout.group_size=4", "rollout.tasks_per_iter=2", "rollout.max_new_tokens=16",
         "policy.tiny_hidden=64", "sft.episodes=4", "sft.steps=50", "sft.batch_size=8", "sft.lr=5e-3")


@pytest.fixture(scope="module")
def lab(tmp_path_factory, cache):
    """A matrix (arms grpo and gaca, seeds 0 and 1) with: gaca seed 0 finished (record and run
    directory); grpo seed 0 finished, its run directory deleted (record only, a copy kept aside for the
    diff); gaca seed 1 cut after 2 of 4 iterations (run directory only); grpo seed 1 not run."""
    tmp = tmp_path_factory.mktemp("diagnostics")
    overrides = [o for o in small_overrides(tmp / "unused", cache, *EXTRA) if not o.startswith("out_dir=")]
    path = tmp / "exp" / "matrix.toml"
    path.parent.mkdir()
    path.write_text('seeds = [0, 1]\neval_splits = ["valid_seen"]\nparallel = 1\n'
                    '[[arms]]\nname = "grpo"\nestimator = "grpo"\n[[arms]]\nname = "gaca"\nestimator = "gaca"\n'
                    '[[settings]]\nname = "small"\npreset = "tiny-alfworld"\n'
                    f"overrides = [{', '.join(json.dumps(o) for o in overrides)}]\n")
    matrix = load_matrix(path, root=str(tmp / "runs"))
    runs = {(r.arm.name, r.seed): r for r in matrix.runs()}
    for arm in ("gaca", "grpo"):
        assert train_and_evaluate(runs[arm, 0]) is not None
    shutil.copytree(runs["grpo", 0].out_dir, tmp / "grpo0")
    shutil.rmtree(runs["grpo", 0].out_dir)
    train(dataclasses.replace(runs["gaca", 1].config(), iterations=2))
    return tmp, path, matrix, runs


def _metrics(run_dir) -> dict[int, dict]:
    """metrics.jsonl as plain JSON, by iteration."""
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return {r["iteration"]: r for r in map(json.loads, lines)}


# -- dynamics ---------------------------------------------------------------------------------------

def test_dynamics_from_records_and_run_directories(lab, capsys):
    tmp, path, matrix, runs = lab
    assert main(["lab", "dynamics", str(path), "small", "--window", "2", "--root", str(tmp / "runs")]) == 0
    out = capsys.readouterr().out
    written = read_json(tmp / "exp" / "dynamics" / "small.json")
    assert (tmp / "exp" / "dynamics" / "small.png").stat().st_size > 0
    assert written["command"] == f"gaca lab dynamics {path} small --window 2 --root {tmp / 'runs'}"
    # where each series came from: records first; an unfinished run has only its directory
    assert written["arms"]["gaca"]["sources"] == {"0": [RECORD], "1": [METRICS]}
    assert written["arms"]["grpo"]["sources"] == {"0": [RECORD]} and written["missing"] == {"grpo": [1]}
    # independent: the record file and metrics.jsonl as plain JSON
    record = read_json(tmp / "exp" / "records" / "small" / "gaca-seed0.json")["training"]
    cut = [m for _, m in sorted(_metrics(runs["gaca", 1].out_dir).items()) if "env/episodes" in m]
    assert len(record["env/success"]) == 4 and len(cut) == 2
    for key in ("env/success", "env/invalid_ratio", "policy/nll", "adv/nll_mean"):
        full, part = np.array(record[key]), np.array([m[key] for m in cut])
        windows = written["arms"]["gaca"]["windows"][key]
        assert [(w["first"], w["last"], w["seeds"]) for w in windows] == [(1, 2, 2), (3, 4, 1)]
        assert windows[0]["mean"] == pytest.approx((full[:2].mean() + part.mean()) / 2, rel=1e-12)
        assert windows[1]["mean"] == pytest.approx(full[2:].mean(), rel=1e-12)
        assert written["arms"]["gaca"]["per_iteration"][key] == pytest.approx(
            [(full[0] + part[0]) / 2, (full[1] + part[1]) / 2, full[2], full[3]], rel=1e-12)
    grpo = read_json(tmp / "exp" / "records" / "small" / "grpo-seed0.json")["training"]["env/invalid_ratio"]
    assert written["arms"]["grpo"]["per_iteration"]["env/invalid_ratio"] == pytest.approx(grpo, rel=1e-12)
    assert "| gaca | " in out and "No series: grpo seeds 1" in out and "small.png" in out
    # a key the records do not keep: from the run directories that exist (grpo seed 0's is gone)
    loss = training_dynamics(matrix, "small", keys=["loss/policy"], window=4)
    assert list(loss.arms) == ["gaca"] and loss.missing == {"grpo": [0, 1]}
    assert loss.arms["gaca"].sources == {0: [METRICS], 1: [METRICS]}
    first = [m["loss/policy"] for _, m in sorted(_metrics(runs["gaca", 0].out_dir).items()) if "env/episodes" in m]
    assert [(w.mean, w.seeds) for w in loss.arms["gaca"].windows["loss/policy"]] == [(pytest.approx(np.mean(first)), 1)]
    # the seed filter
    only = training_dynamics(matrix, "small", seeds=[1], window=1)
    assert list(only.arms) == ["gaca"] and only.arms["gaca"].per_iteration["env/success"] == [m["env/success"]
                                                                                             for m in cut]


def test_dynamics_bad_input_is_one_line(lab, capsys, tmp_path):
    _, path, matrix, _ = lab
    for argv, message in ((["nope.toml", "small"], "does not exist"),
                          ([str(path), "large"], "has no setting 'large'; its settings: small"),
                          ([str(path), "small", "--seeds", "7"], "not seeds of the matrix"),
                          ([str(path), "small", "--window", "0"], "window must be >= 1"),
                          ([str(path), "small", "--keys", "nope/key", "--out", str(tmp_path / "x.json")],
                           "has ['nope/key'] per iteration")):
        assert main(["lab", "dynamics", *argv]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err
    with pytest.raises(DiagnosticError):
        training_dynamics(matrix, "small", keys=["nope/key"])


# -- credit -----------------------------------------------------------------------------------------

def _reference_within(x, y, state, norm=None):
    """The within-state correlation as its docstring states it, by a loop over states."""
    rows = defaultdict(list)
    for i, s in enumerate(state.tolist()):
        rows[s].append(i)
    num = sx = sn = 0.0
    norm = y if norm is None else norm
    for idx in rows.values():
        if len(idx) < 2:
            continue
        mx = sum(float(x[i]) for i in idx) / len(idx)
        my = sum(float(y[i]) for i in idx) / len(idx)
        mn = sum(float(norm[i]) for i in idx) / len(idx)
        for i in idx:
            num += (float(x[i]) - mx) * (float(y[i]) - my)
            sx += (float(x[i]) - mx) ** 2
            sn += (float(norm[i]) - mn) ** 2
    return num / math.sqrt(sx * sn)


def _check_against_training(rows, metrics: dict, estimator: str) -> None:
    """The rows of one drawn iteration against what training logged for the same rollout."""
    assert len(rows.invalid) == metrics["env/step_rows"]
    assert float(rows.invalid.double().mean()) == pytest.approx(metrics["env/invalid_ratio"], rel=1e-9)
    if estimator == "gaca":  # the estimators that do not read the NLL log 0
        assert float(rows.nll.double().mean()) == pytest.approx(metrics["adv/nll_mean"], rel=1e-6)
    assert float(rows.advantage[estimator].double().mean()) == pytest.approx(metrics["adv/advantage_mean"],
                                                                            rel=1e-5, abs=1e-7)


def test_credit_draws_the_training_rollouts_and_splits_by_validity(lab, capsys):
    tmp, _, _, runs = lab
    gaca = runs["gaca", 0].out_dir
    # from the warm start: iteration 0 is the rollout both arms of seed 0 trained on first
    assert main(["lab", "credit", str(gaca), "--warm-start", "--iterations", "0"]) == 0
    out = capsys.readouterr().out
    written = read_json(gaca / "lab-credit-warm-start.json")
    result, rows = measure_credit(gaca, warm_start=True, iterations=[0])
    # the seed's warm start, which the runs' records pin
    assert result.policy == read_json(tmp / "exp" / "records" / "small" / "gaca-seed0.json")["warm_start"]
    _check_against_training(rows, _metrics(gaca)[1], "gaca")
    _check_against_training(rows, _metrics(tmp / "grpo0")[1], "grpo")
    assert float(rows.weight.double().mean()) == pytest.approx(_metrics(gaca)[1]["adv/weight_mean"], rel=1e-6)
    # the table from the rows, by plain loops
    split = result.validity
    assert split is not None and result.not_applicable == "" and 0 < split.invalid.steps < result.steps
    invalid = rows.invalid.tolist()
    for name, want in (("invalid", True), ("valid", False)):
        cls = getattr(split, name)
        picked = [i for i, v in enumerate(invalid) if v == want]
        assert cls.steps == len(picked)
        assert cls.nll == pytest.approx(sum(float(rows.nll[i]) for i in picked) / len(picked), rel=1e-6)
        for est, mean in cls.advantage.items():
            assert mean == pytest.approx(sum(float(rows.advantage[est][i]) for i in picked) / len(picked),
                                         rel=1e-6, abs=1e-9)
    for est, gap in split.gap_std.items():
        a = rows.advantage[est].double().numpy()
        assert gap == pytest.approx((split.invalid.advantage[est] - split.valid.advantage[est]) / a.std(ddof=1),
                                    rel=1e-6)
        assert result.coupling.within_state[est] == pytest.approx(
            _reference_within(rows.nll, rows.advantage[est], rows.state), rel=1e-6)
        assert result.coupling.overall[est] == pytest.approx(
            np.corrcoef(rows.nll.double().numpy(), a)[0, 1], rel=1e-6)
    parts = result.coupling.gaca_parts
    assert parts is not None and sum(parts.values()) == pytest.approx(result.coupling.within_state["gaca"], rel=1e-6)
    assert parts["gaca_step_part"] == pytest.approx(_reference_within(
        rows.nll, rows.advantage["gaca_step_part"], rows.state, rows.advantage["gaca"]), rel=1e-6)
    assert written["validity"]["invalid"]["steps"] == split.invalid.steps and "| invalid | " in out
    assert written["command"] == f"gaca lab credit {gaca} --warm-start --iterations 0"


def test_credit_from_a_checkpoint_draws_the_next_iteration(lab, tmp_path):
    """gaca seed 1 was cut after 2 iterations: its checkpoint's draw of iteration 2 is the rollout a
    resumed run trains on at its third iteration."""
    _, _, _, runs = lab
    cut = runs["gaca", 1].out_dir
    result, _ = measure_credit(cut, estimators=["gaca", "grpo"])
    assert result.iterations == [2, 3, 4, 5] and list(result.coupling.within_state) == ["gaca", "grpo"]
    assert result.policy == load_checkpoint(cut)["policy"].fingerprint
    _, rows = measure_credit(cut, iterations=[2], estimators=["gaca"])
    resumed = tmp_path / "resumed"
    shutil.copytree(cut, resumed)
    cfg = load_checkpoint_policy(cut)[1]
    train(dataclasses.replace(cfg, out_dir=str(resumed), iterations=3), resume=True)
    _check_against_training(rows, _metrics(resumed)[3], "gaca")


def test_credit_in_choose_mode_says_the_split_does_not_apply(tmp_path, cache, capsys):
    run = tmp_path / "choose"
    train(small_config(run, cache, *EXTRA, "iterations=2", "env.max_steps=10", 'rollout.action_mode="choose"',
                       f"sft.cache_dir={json.dumps(str(tmp_path / 'ws'))}"))
    assert main(["lab", "credit", str(run), "--warm-start", "--iterations", "0", "1"]) == 0
    out = capsys.readouterr().out
    assert "invalid against valid steps: not applicable in choose mode" in out and "no step is ever invalid" in out
    result, rows = measure_credit(run, warm_start=True, iterations=[0])
    assert result.validity is None and "no step is ever invalid" in result.not_applicable
    assert result.nll.startswith("−log π(a|s)") and not rows.invalid.any()
    _check_against_training(rows, _metrics(run)[1], "gaca")
    written = read_json(run / "lab-credit-warm-start.json")
    assert written["validity"] is None and written["iterations"] == [0, 1]
    # the coupling still applies (the advantages vary within states over these two iterations)
    both, rows = measure_credit(run, warm_start=True, iterations=[0, 1])
    assert written["coupling"] == dataclasses.asdict(both.coupling)
    for est, rho in both.coupling.within_state.items():
        assert math.isfinite(rho) and rho == pytest.approx(_reference_within(rows.nll, rows.advantage[est], rows.state),
                                                           rel=1e-6)


def test_credit_bad_input_is_one_line(tmp_path, capsys):
    for argv, message in (([str(tmp_path / "nope")], "no checkpoint at"),
                          ([str(tmp_path), "--warm-start"], "holds no config.json"),
                          ([str(tmp_path), "--estimators", "nope"], "nope")):
        assert main(["lab", "credit", *argv]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err


# -- anchors ----------------------------------------------------------------------------------------

def test_anchor_peers_counts_step_groups(lab, capsys):
    _, _, _, runs = lab
    gaca = runs["gaca", 0].out_dir
    assert main(["lab", "anchors", str(gaca), "--groups", "2", "--seed", "3"]) == 0
    out = capsys.readouterr().out
    written = read_json(gaca / "lab-anchors.json")
    result = anchor_peers(gaca, groups=2, seed=3)
    assert written["anchors"] == {k: dataclasses.asdict(v) for k, v in result.anchors.items()}
    assert set(result.unavailable) == {"state"} and "state_key" in result.unavailable["state"]
    assert "| state | (not measured) |" in out
    # the same rollout, drawn again, and its step groups counted from the texts
    policy, cfg = load_checkpoint_policy(gaca)
    gen = torch.Generator().manual_seed(3)
    seeds = torch.randperm(cfg.env.num_train_games, generator=gen)[:2].tolist()
    with train_pool(cfg, len(seeds)) as pool:
        batch = collect_rollouts(policy, pool, seeds, cfg.rollout, generator=gen)
    assert batch.num_rows == result.rows and result.groups == 2 and result.group_size == 4
    steps = {(s.turn.episode, s.turn.step): s for e in batch.episodes for s in e.steps}
    keys = list(zip(batch.steps.traj_id.tolist(), batch.steps.step.tolist(), strict=True))
    for kind in ("observation", "observation+actions"):
        members = defaultdict(int)
        row_group = []
        for (k, t), g in zip(keys, batch.steps.group_id.tolist(), strict=True):
            turn = steps[k, t].turn
            row_group.append((g, anchor_text(turn.observation, turn.admissible_actions, kind)))
            members[row_group[-1]] += 1
        a = result.anchors[kind]
        assert a.step_groups == len(members)
        assert a.has_peer == pytest.approx(sum(members[r] > 1 for r in row_group) / len(row_group))
        assert a.rows_per_step_group == pytest.approx(len(row_group) / len(members))
    # the run's own anchor kind gives the trainer's own has_peer on this batch
    own = compute_advantages(batch.steps, "gigpo").has_peer.double().mean()
    assert result.anchors[cfg.rollout.anchor].has_peer == pytest.approx(float(own))
    assert main(["lab", "anchors", str(gaca.parent / "nope")]) == 2
    assert "no checkpoint at" in capsys.readouterr().err


# -- diff -------------------------------------------------------------------------------------------

def test_diff_of_a_replay_is_identical_and_of_another_arm_is_not(lab, tmp_path, capsys):
    tmp, _, _, runs = lab
    gaca = runs["gaca", 0].out_dir
    replay = tmp_path / "replay"
    train(dataclasses.replace(runs["gaca", 0].config(), out_dir=str(replay)))  # its warm start from the cache
    assert main(["lab", "diff", str(gaca), str(replay), "--out", str(tmp_path / "same.json")]) == 0
    assert "final weights bit-identical" in capsys.readouterr().out
    same = read_json(tmp_path / "same.json")
    assert same["identical"] and [r["iteration"] for r in same["iterations"]] == [0, 1, 2, 3, 4]
    assert "sft/cached" in _metrics(replay)[0] and "sft/cached" not in _metrics(gaca)[0]  # a machine key
    # grpo against gaca from one warm start: the evaluation before training and the first rollout agree
    result = diff_runs(gaca, tmp / "grpo0")
    a, b = _metrics(gaca), _metrics(tmp / "grpo0")
    assert not result.identical and not result.weights_identical and result.fingerprint_a != result.fingerprint_b
    rows = {r.iteration: r for r in result.iterations}
    assert rows[0].differ == [] and {"env/success", "env/invalid_ratio", "env/step_rows"}.isdisjoint(rows[1].differ)
    for i, r in rows.items():
        keys = [k for k in set(a[i]) & set(b[i]) if not k.startswith(MACHINE_KEYS)]
        assert r.differ == sorted(k for k in keys if a[i][k] != b[i][k])
    assert "adv/advantage_mean" in rows[1].differ and rows[1].shown["env/success"] == a[1]["env/success"]
    assert main(["lab", "diff", str(gaca), str(tmp / "grpo0"), "--iterations", "1"]) == 1
    out = capsys.readouterr().out
    assert "| 2 |" not in out and "final weights differ in" in out


def test_diff_finds_one_changed_weight(lab, tmp_path, capsys):
    _, _, _, runs = lab
    gaca = runs["gaca", 0].out_dir
    changed = tmp_path / "changed"
    shutil.copytree(gaca, changed)
    payload = torch.load(changed / CHECKPOINT_NAME, weights_only=False)
    name = next(k for k in sorted(payload["policy"]["state"]["model"]) if "norm" in k)  # a tensor not tied to another
    payload["policy"]["state"]["model"][name].view(-1)[0] += 1e-3
    torch.save(payload, changed / CHECKPOINT_NAME)
    result = diff_runs(gaca, changed)
    assert result.tensors_differ == [f"model.{name}"] and not result.identical
    assert all(not (r.differ or r.only_a or r.only_b) for r in result.iterations)
    assert main(["lab", "diff", str(gaca), str(tmp_path / "nope")]) == 2
    assert "metrics.jsonl does not exist" in capsys.readouterr().err


def test_every_diagnostic_documents_itself(capsys):
    for command, words in (("dynamics", "windows of iterations"), ("credit", "choose mode"),
                           ("anchors", "rollout.anchor"), ("diff", "bit-identical")):
        with pytest.raises(SystemExit) as exit_:
            main(["lab", command, "--help"])
        assert exit_.value.code == 0
        assert words in capsys.readouterr().out.replace("\n", " ").replace("  ", " ")

