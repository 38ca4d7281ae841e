"""The ``gaca`` command line: presets, config errors, train -> eval -> plot on a tiny real run."""

from __future__ import annotations

import json

import pytest

from gaca.cli import build_parser, main
from tests.small_run import small_overrides


def test_presets_are_listed(capsys):
    assert main(["presets"]) == 0
    out = capsys.readouterr().out
    for name in ("tiny-alfworld", "smollm2-alfworld", "qwen2.5-1.5b-alfworld"):
        assert name in out


def test_config_errors_exit_2_with_the_valid_keys(capsys):
    assert main(["train", "--preset", "tiny-alfworld", "ppo.lrr=1"]) == 2
    err = capsys.readouterr().err
    assert "unknown config key(s) ['ppo.lrr']" in err and "ppo.lr" in err
    assert main(["train", "--preset", "nope"]) == 2
    assert "presets:" in capsys.readouterr().err
    assert main(["eval", "/nonexistent/run"]) == 2
    assert "no checkpoint" in capsys.readouterr().err


def test_config_show_prints_the_resolved_config_with_its_documentation(capsys):
    assert main(["config", "show", "--preset", "tiny-alfworld", "env.max_steps=20", "advantage.kappa=0.5"]) == 0
    out = capsys.readouterr().out
    assert "\n[env]\n" in out and "\nmax_steps = 20\n" in out and "\nkappa = 0.5\n" in out
    assert "# The step limit of one episode" in out  # the field's docstring, above its value
    assert "[env.generator]" in out and "# cache_dir = (none)" in out
    assert main(["config", "show", "env.name=webshop"]) == 0
    out = capsys.readouterr().out
    # the family's own introduction
    assert 'intro = "You are an expert agent shopping on a web store (WebShop). On the search page' in out
    assert "[env.generator]" not in out and "catalogue_seed = 0" in out
    assert main(["config", "show", "env.max_stepz=7"]) == 2
    assert "unknown config key(s) ['env.max_stepz']" in capsys.readouterr().err


def test_config_show_takes_the_peer_estimators_and_documents_their_options(capsys):
    assert main(["config", "show", "estimator=hgpo", "advantage.hgpo_history=4", "advantage.uncertainty=nll"]) == 0
    out = capsys.readouterr().out
    assert '\nestimator = "hgpo"\n' in out and "\nhgpo_history = 4\n" in out and '\nuncertainty = "nll"\n' in out
    assert "# HGPO's history depth K in [0, 16]" in out and "# EMPG's future-clarity bonus weight" in out
    assert main(["config", "show", "estimator=empg", "advantage.empg_k=-1"]) == 2
    assert "empg_k must be in [0, 50]" in capsys.readouterr().err


def test_parser_requires_a_command():
    with pytest.raises(SystemExit):
        build_parser().parse_args([])


def test_plot_writes_pngs(tmp_path, capsys):
    recs = [{"iteration": 0, "eval/success": 0.1, "eval/success/pick": 0.2}]
    for it in range(1, 4):
        recs.append({"iteration": it, "env/success": 0.1 * it, "adv/weight_mean": 0.5, "adv/weight_std": 0.1,
                     "adv/criticality_mean": 0.0, "adv/criticality_std": 1.0, "adv/has_peer": 0.3,
                     "env/invalid_ratio": 0.2, "hist/weight": {"edges": [0, 0.5, 1], "counts": [3, 4]},
                     "hist/criticality": {"edges": [-1, 0, 1], "counts": [2, 5]}})
    recs[-1]["eval/success"] = 0.4
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    assert main(["plot", str(tmp_path)]) == 0
    assert (tmp_path / "success.png").stat().st_size > 1000
    assert (tmp_path / "diagnostics.png").stat().st_size > 1000
    assert main(["plot", str(tmp_path / "missing")]) == 2


def test_train_then_eval_from_the_command_line(tmp_path, cache, capsys):
    pytest.importorskip("alfworld")
    overrides = small_overrides(tmp_path / "run", cache, "trackers=[]")
    assert main(["train", "--preset", "tiny-alfworld", *overrides]) == 0
    out = capsys.readouterr().out
    assert "held-out success before training:" in out and "held-out success after 1 iterations:" in out
    assert (tmp_path / "run" / "checkpoint.pt").is_file() and (tmp_path / "run" / "success.png").is_file()
    assert main(["eval", str(tmp_path / "run"), "--json"]) == 0
    out = capsys.readouterr().out
    assert "held-out success:" in out and '"eval/episodes": 2.0' in out


@pytest.mark.parametrize("mode", ["generate", "choose"])
def test_eval_writes_what_the_agent_did_episode_by_episode(tmp_path, cache, capsys, mode):
    pytest.importorskip("alfworld")
    assert main(["train", "--preset", "tiny-alfworld", *small_overrides(tmp_path / "run", cache, "trackers=[]")]) == 0
    capsys.readouterr()
    log = tmp_path / "episodes.jsonl"
    assert main(["eval", str(tmp_path / "run"), f'rollout.action_mode="{mode}"', "--json", "--episodes", str(log)]) == 0
    out = capsys.readouterr().out
    assert f"wrote 2 episodes (task, actions, outcome) to {log}" in out
    metrics = json.loads(out[out.index("{"):out.rindex("}") + 1])
    episodes = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(episodes) == 2 and len({e["seed"] for e in episodes}) == 2
    assert sum(e["won"] for e in episodes) / 2 == metrics["eval/success"]
    assert sum(e["length"] for e in episodes) / 2 == metrics["eval/episode_length"]
    steps = [step for e in episodes for step in e["steps"]]
    invalid = sum(not step["valid"] for step in steps)
    assert invalid / len(steps) == pytest.approx(metrics["eval/invalid_ratio"])
    for e in episodes:
        assert e["task"] and e["family"] in ("pick_and_place_simple", "look_at_obj_in_light") and e["error"] is None
        assert len(e["steps"]) == e["length"] >= 1
        assert e["env_return"] == pytest.approx(sum(step["reward"] for step in e["steps"]))
    for step in steps:
        assert step["observation"] and isinstance(step["action"], str)
        if mode == "choose":  # an admissible action, chosen with a probability
            assert step["valid"] and step["candidates"] >= 1 and 0.0 < step["p"] <= 1.0
        else:
            assert step["candidates"] is None and step["p"] is None
