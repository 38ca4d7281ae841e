"""The trainer end to end on real ALFWorld games with a real (tiny) model; resume equivalence."""

from __future__ import annotations

import json
import os
import signal

import pytest
import torch

from gaca.config import ConfigError
from gaca.train.checkpoint import load_checkpoint
from gaca.train.loop import train
from gaca.train.plot import plot_run
from gaca.train.run import evaluate_checkpoint
from tests.small_run import small_config

pytest.importorskip("alfworld")
pytest.importorskip("textworld")


def records(run_dir):
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_one_real_iteration_end_to_end(tmp_path, cache):
    out = tmp_path / "run"
    result = train(small_config(out, cache, "eval.temperature=1.0"))
    assert result.iterations == 1 and not result.interrupted
    assert result.eval_before is not None and result.eval_after is not None
    assert 0.0 <= result.eval_after["eval/success"] <= 1.0
    recs = records(out)
    assert [r["iteration"] for r in recs] == [0, 1]
    m = recs[1]
    for key in ("env/success", "env/invalid_ratio", "adv/weight_mean", "adv/criticality_std", "adv/has_peer",
                "adv/nll_mean", "loss/policy", "policy/clip_frac", "perf/forward_passes", "time/rollout_s",
                "eval/success", "hist/weight", "hist/criticality"):
        assert key in m, key
    # every model call of the iteration is the rollout's or the update's: the advantages make none
    assert m["perf/forward_passes"] == m["perf/forward_passes_rollout"] + m["perf/forward_passes_update"]
    assert m["env/step_rows"] >= 2 and torch.isfinite(torch.tensor(m["loss/total"]))
    assert recs[0]["sft/loss_final"] < recs[0]["sft/loss_initial"]
    # the update changed the weights relative to the warm-started reference
    state = load_checkpoint(out)["policy"].state
    moved = any(not torch.equal(state["model"][k], state["reference"][k]) for k in state["reference"])
    assert moved
    assert (out / "config.json").is_file() and (out / "tokenizer").is_dir() and any((out / "tb").iterdir())
    for png in plot_run(out):
        assert png.stat().st_size > 1000
    # `gaca eval` of the checkpoint replays the run's own final evaluation (same sampling stream)
    stats, _ = evaluate_checkpoint(out)
    assert stats.episodes == 2
    assert stats.metrics() == result.eval_after


def test_one_real_choose_mode_iteration_end_to_end(tmp_path, cache):
    # choose mode on real ALFWorld games: nothing invalid, one action-level log-prob per row, and the
    # checkpoint's evaluation replays the run's own (same sampling stream, same choices)
    out = tmp_path / "run"
    # 3-step games are rarely won and nothing is invalid: the action-level entropy bonus moves the weights
    result = train(small_config(out, cache, "rollout.action_mode=choose", "eval.temperature=1.0",
                                "rollout.invalid_penalty=0.0", "ppo.entropy_coef=0.01"))
    m = records(out)[1]
    assert m["env/invalid_ratio"] == 0.0 and m["eval/invalid_ratio"] == 0.0
    assert m["env/response_length"] == 1.0 and m["perf/generated_tokens"] == m["env/step_rows"]
    assert m["policy/ratio_mean"] == pytest.approx(1.0, abs=0.05) and torch.isfinite(torch.tensor(m["loss/total"]))
    assert m["adv/nll_mean"] > 0  # the decision surprisal −log π(a|s) of a sampled choice
    assert m["loss/entropy"] > 0
    state = load_checkpoint(out)["policy"].state
    assert any(not torch.equal(state["model"][k], state["reference"][k]) for k in state["reference"])
    stats, _ = evaluate_checkpoint(out)
    assert stats.metrics() == result.eval_after


@pytest.mark.parametrize(("estimator", "options"), [
    ("empg", ("advantage.empg_k=2.0", "advantage.uncertainty=nll")),
    ("hgpo", ("advantage.hgpo_history=1", "advantage.hgpo_base=true")),
])
def test_the_peer_estimators_train_by_name(tmp_path, cache, estimator, options):
    # The trainer takes every registered estimator and its [advantage] options by name.
    out = tmp_path / estimator
    cfg = small_config(out, cache, f"estimator={estimator}", *options)
    assert cfg.estimator == estimator
    result = train(cfg)
    assert result.iterations == 1 and not result.interrupted
    m = records(out)[1]
    assert torch.isfinite(torch.tensor([m["loss/total"], m["loss/policy"]])).all()
    state = load_checkpoint(out)["policy"].state
    assert any(not torch.equal(state["model"][k], state["reference"][k]) for k in state["reference"])
    assert json.loads((out / "config.json").read_text())["estimator"] == estimator


def _final_state(run_dir):
    return load_checkpoint(run_dir)["policy"].state["model"]


def _comparable(recs):
    skip = ("time/", "perf/rollout_tokens_per_s", "perf/update_tokens_per_s", "perf/advantage_share",
            "sft/seconds", "sft/tokens_per_s")
    return [{k: v for k, v in r.items() if not k.startswith(skip)} for r in recs]


def test_interrupted_and_killed_runs_resume_to_the_same_numbers(tmp_path, cache):
    iters = ["iterations=3"]
    straight = tmp_path / "straight"
    train(small_config(straight, cache, *iters))

    # Ctrl-C after iteration 1: the loop finishes the iteration, checkpoints and returns
    ctrl_c = tmp_path / "ctrl_c"

    def press_ctrl_c(it, metrics):
        if it == 1:
            os.kill(os.getpid(), signal.SIGINT)

    first = train(small_config(ctrl_c, cache, *iters), on_iteration=press_ctrl_c)
    assert first.interrupted and first.iterations == 1
    resumed = train(small_config(ctrl_c, cache, *iters), resume=True)
    assert resumed.iterations == 3 and not resumed.interrupted

    # a crash (kill) after iteration 2: resume from the periodic checkpoint
    killed = tmp_path / "killed"

    class Killed(Exception):
        pass

    def crash(it, metrics):
        if it == 2:
            raise Killed

    with pytest.raises(Killed):
        train(small_config(killed, cache, *iters), on_iteration=crash)
    train(small_config(killed, cache, *iters), resume=True)

    ref_state = _final_state(straight)
    for run in (ctrl_c, killed):
        state = _final_state(run)
        assert all(torch.equal(ref_state[k], state[k]) for k in ref_state), run.name
        assert _comparable(records(run)) == _comparable(records(straight)), run.name


def test_missing_model_and_bad_configs_are_clear_errors(tmp_path, cache):
    from gaca.policy import ModelNotFoundError

    cfg = small_config(tmp_path / "m", cache, "policy.model=/nonexistent/model", "sft.episodes=0")
    with pytest.raises(ModelNotFoundError, match="local Hugging Face model"):
        train(cfg)
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        train(small_config(tmp_path / "r", cache), resume=True)
    # caught when the config is loaded, before a model, a game or a file is made
    with pytest.raises(ConfigError, match=r"needs sft\.episodes > 0"):
        small_config(tmp_path / "s", cache, "sft.episodes=0")
    with pytest.raises(ConfigError, match=r"^estimator: unknown advantage estimator 'gacaa'; choices: \["):
        small_config(tmp_path / "e", cache, "estimator=gacaa")
    assert not (tmp_path / "s").exists() and not (tmp_path / "e").exists()
