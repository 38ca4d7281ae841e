"""The trainer end to end on real ALFWorld games with a real (tiny) model; resume equivalence."""

from __future__ import annotations

import json
import os
import signal

import pytest
import torch

from gaca.config import ConfigError
from gaca.train.checkpoint import load_checkpoint
from gaca.train.config import load_config
from gaca.train.loop import train
from gaca.train.plot import plot_run
from gaca.train.run import evaluate_checkpoint

pytest.importorskip("alfworld")
pytest.importorskip("textworld")


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> str:
    """One game/tokenizer cache for the session (tests/test_cli.py uses the same directory)."""
    path = tmp_path_factory.getbasetemp() / "gaca_shared_cache"
    path.mkdir(exist_ok=True)
    return str(path)


def small_config(out_dir, cache, *extra: str):
    """A few-second run: 1-layer tiny model, 2 train and 2 eval games, groups of 2, 3 steps."""
    return load_config(preset="tiny-alfworld", overrides=[
        f"out_dir={json.dumps(str(out_dir))}", f"policy.cache_dir={json.dumps(cache)}",
        "policy.tiny_hidden=32", "policy.tiny_layers=1", "policy.tiny_heads=2", "policy.tiny_vocab=400",
        "env.num_train_games=2", "env.num_eval_games=2", "env.num_workers=1", "env.max_steps=3",
        f"env.cache_dir={json.dumps(cache)}", "env.generator.max_receptacles=4", "env.generator.num_distractors=2",
        "rollout.group_size=2", "rollout.tasks_per_iter=1", "rollout.max_new_tokens=6",
        # the preset trains without it, but 3-step games are rarely won: the penalty gives the update a signal
        "rollout.invalid_penalty=0.1",
        "sft.episodes=2", "sft.steps=2", "sft.batch_size=4", "eval.batch_size=2", "eval.every=0",
        "ppo.micro_batch_size=4", "ppo.lr=1e-3", "iterations=1", "checkpoint_every=1", "progress=false",
        "threads=0", *extra,
    ])


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
    state = load_checkpoint(out)["policy"]
    moved = any(not torch.equal(state["model"][k], state["reference"][k]) for k in state["reference"])
    assert moved
    assert (out / "config.json").is_file() and (out / "tokenizer").is_dir() and any((out / "tb").iterdir())
    for png in plot_run(out):
        assert png.stat().st_size > 1000
    # `gaca eval` of the checkpoint replays the run's own final evaluation (same sampling stream)
    stats, _ = evaluate_checkpoint(out)
    assert stats.episodes == 2
    assert stats.metrics() == result.eval_after


def _final_state(run_dir):
    return load_checkpoint(run_dir)["policy"]["model"]


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
