"""verl-agent's own trainer-side functions, from a checkout, against the plugin, on every configuration
of its example scripts (``gaca.testing.verl_agent_runs.RUNS``).

    GACA_VERL_AGENT_CHECKOUT=/path/to/verl-agent python -m pytest tests/integrations/verl/test_verl_agent_trainer.py

Skipped without the variable. Each batch goes through verl-agent's rollout layout
(``gather_rollout_data``), its returns, its ``adjust_batch`` (routed through the plugin's
``record_step_index``, as installing the integration does in its trainer's process), a shuffle
(``balance_batch``), its reward manager and its invalid-action penalty, then through the advantage call.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

pytest.importorskip("verl")

CHECKOUT = os.environ.get("GACA_VERL_AGENT_CHECKOUT")
pytestmark = pytest.mark.skipif(not CHECKOUT, reason="set GACA_VERL_AGENT_CHECKOUT to a verl-agent checkout")

from gaca.integrations.verl import estimator, record_step_index  # noqa: E402
from gaca.testing.verl_agent_runs import RUNS, gaca_advantages, trainer_batch, verl_agent_gigpo  # noqa: E402

GROUPS = 4  # episode groups per batch (at least what adjust_batch needs): quick, copies included


@pytest.fixture(scope="module")
def code():
    from gaca.testing.verl_agent import load_verl_agent

    return load_verl_agent(CHECKOUT)


@pytest.fixture(autouse=True)
def _keep_trainer_config():
    previous = estimator._trainer_algorithm
    yield
    estimator._trainer_algorithm = previous


@pytest.mark.parametrize("name", list(RUNS))
def test_the_plugin_computes_verl_agents_gigpo_on_its_trainers_batches(code, name):
    run = RUNS[name].scaled(GROUPS)
    data = trainer_batch(code, run, seed=1, adjust_batch=record_step_index(code.adjust_batch),
                         gaca={"conventions": "verl-agent"})
    pairs = set(zip(data.non_tensor_batch["traj_uid"].tolist(), data.non_tensor_batch["step"].tolist(), strict=True))
    assert len(data) % run.size_divisor == 0 and len(pairs) < len(data)  # padded with copies
    theirs = verl_agent_gigpo(code, data, run)
    theirs64 = verl_agent_gigpo(code, data, run, float64=True)  # its equations without its float32 rounding
    ours = gaca_advantages(data, run)  # no config passed: the trainer's, as record_step_index kept it
    # ours is verl-agent's GiGPO up to float32 output rounding ...
    torch.testing.assert_close(ours.double(), theirs64, rtol=0, atol=5e-6)
    # ... so it is never further from verl-agent's float32 numbers than their own rounding (up to ~2e-5
    # in a narrow step group; 3e-4 in an all-won episode group whose scores differ by a 0.01 penalty)
    assert bool(((ours - theirs).abs() <= (theirs64 - theirs).abs() + 5e-6).all())
    # GACA at κ = 0 with the additive mixture is GiGPO: the switch keeps verl-agent's number
    additive = gaca_advantages(data, run, {"conventions": "verl-agent", "estimator": "gaca", "mixture": "additive",
                                           "kappa": 0.0})
    torch.testing.assert_close(additive.double(), theirs64, rtol=0, atol=5e-6)
    # gaca's own conventions and GACA itself run on the same batch
    for gaca in ({}, {"estimator": "gaca"}, {"conventions": "verl-agent", "estimator": "gaca"}):
        out = gaca_advantages(data, run, gaca)
        assert bool(torch.isfinite(out).all()) and bool((out[data.batch["response_mask"] == 0] == 0).all())


@pytest.mark.parametrize("name", ["alfworld", "sokoban, gamma 1"])
def test_copies_get_their_originals_advantage_and_move_the_statistics(code, name):
    run = RUNS[name].scaled(GROUPS)
    data = trainer_batch(code, run, seed=2, adjust_batch=record_step_index(code.adjust_batch),
                         gaca={"conventions": "verl-agent"})
    ours = gaca_advantages(data, run)
    key = [f"{u}/{s}" for u, s in zip(data.non_tensor_batch["traj_uid"], data.non_tensor_batch["step"], strict=True)]
    _, first, inverse = np.unique(np.array(key), return_index=True, return_inverse=True)
    row_sums = ours.sum(-1)
    torch.testing.assert_close(row_sums, row_sums[torch.from_numpy(first[inverse])], rtol=1e-6, atol=1e-6)
    # the same batch with the copies dropped is another batch for verl-agent too
    kept = torch.from_numpy(np.sort(first))
    assert (verl_agent_gigpo(code, data[kept], run).sum(-1) - row_sums[kept]).abs().max() > 1e-3


def test_without_the_recorded_step_index_the_order_is_unrecoverable(code):
    # verl-agent's trainer as it ships, the plugin's adjust_batch route left out: its copies make
    # the order unrecoverable from the returns, and the error says how to get it
    run = RUNS["alfworld"].scaled(GROUPS)
    data = trainer_batch(code, run, seed=1, gaca={"conventions": "verl-agent"})
    assert "step" not in data.non_tensor_batch
    with pytest.raises(ValueError, match=r"cannot recover the step order .* the integration records it"):
        gaca_advantages(data, run, {"conventions": "verl-agent"})


def test_inside_verl_agents_own_modules_its_trainer_calls_reach_the_plugin():
    # a fresh process whose verl is verl-agent's fork: install as the worker hook does, then its
    # ray_trainer's adjust_batch and compute_advantage, called as its fit calls them
    import subprocess
    import sys
    from pathlib import Path

    src = str(Path(__file__).resolve().parents[3] / "src")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "gaca.testing.verl_agent_process", CHECKOUT], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line.split() for line in done.stdout.splitlines() if line.startswith("PARITY")]
    assert len(lines) == 2 and all(float(line[-1]) < 1e-4 for line in lines), done.stdout
