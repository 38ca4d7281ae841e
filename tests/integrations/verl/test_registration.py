"""The registration reaches processes that only import verl, via VERL_USE_EXTERNAL_MODULES."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("verl")

import gaca

SRC = str(Path(gaca.__file__).resolve().parents[1])
ROOT = str(Path(__file__).resolve().parents[3])

# A process that never imports gaca itself: only verl, the way verl's Ray workers start.
PROBE = r"""
import json, sys
import verl
from verl.trainer.ppo import core_algos, ray_trainer
names = [n for n in ("gaca", "gigpo", "fixed_mix") if n in core_algos.ADV_ESTIMATOR_REGISTRY]
routed = ray_trainer.compute_advantage.__module__
value = None
if names:
    from omegaconf import OmegaConf
    from gaca.testing.synthetic import synthetic_batch
    from gaca.testing.verl_batches import step_rows_batch
    data, _ = step_rows_batch(synthetic_batch(60, group_size=3, min_steps=2, max_steps=8, tokens=4, seed=0))
    cfg = OmegaConf.create({"gaca": {"kappa": 0.5}})
    out = ray_trainer.compute_advantage(data, adv_estimator="gaca", gamma=0.95, config=cfg)
    value = float(out.batch["advantages"].abs().sum())
print("RESULT " + json.dumps({"names": names, "routed": routed, "value": value}))
"""


def _start_probe(external_modules: str | None) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != "VERL_USE_EXTERNAL_MODULES"}
    env["PYTHONPATH"] = os.pathsep.join([SRC, ROOT, env.get("PYTHONPATH", "")])
    if external_modules is not None:
        env["VERL_USE_EXTERNAL_MODULES"] = external_modules
    return subprocess.Popen([sys.executable, "-c", PROBE], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT)


def _result(proc: subprocess.Popen) -> dict:
    stdout, stderr = proc.communicate(timeout=180)
    assert proc.returncode == 0, stderr[-3000:]
    line = next(line for line in stdout.splitlines() if line.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


@pytest.fixture(scope="module")
def probes() -> dict:
    """Both fresh processes, started together (each spends its time importing verl)."""
    started = {"with": _start_probe("gaca.integrations.verl"), "without": _start_probe(None)}
    return {key: _result(proc) for key, proc in started.items()}


def test_fresh_process_with_external_modules_sees_estimators(probes):
    result = probes["with"]
    assert result["names"] == ["gaca", "gigpo", "fixed_mix"]
    assert result["routed"] == "gaca.integrations.verl.estimator"
    # Same number as in this process.
    from omegaconf import OmegaConf
    from verl.trainer.ppo import ray_trainer

    import gaca.integrations.verl  # noqa: F401
    from gaca.testing.synthetic import synthetic_batch
    from gaca.testing.verl_batches import step_rows_batch

    data, _ = step_rows_batch(synthetic_batch(60, group_size=3, min_steps=2, max_steps=8, tokens=4, seed=0))
    out = ray_trainer.compute_advantage(data, adv_estimator="gaca", gamma=0.95,
                                        config=OmegaConf.create({"gaca": {"kappa": 0.5}}))
    assert result["value"] == pytest.approx(float(out.batch["advantages"].abs().sum()), rel=1e-6)
    assert result["value"] > 0


def test_fresh_process_without_external_modules_does_not(probes):
    result = probes["without"]
    assert result["names"] == []
    assert result["routed"] == "verl.trainer.ppo.ray_trainer"


@pytest.mark.slow
def test_ray_worker_sees_estimators():
    """A Ray actor (how verl runs its TaskRunner and workers) started with the env var."""
    ray = pytest.importorskip("ray")
    env = {"VERL_USE_EXTERNAL_MODULES": "gaca.integrations.verl",
           "PYTHONPATH": os.pathsep.join([SRC, ROOT, os.environ.get("PYTHONPATH", "")])}
    ray.init(num_cpus=1, include_dashboard=False, runtime_env={"env_vars": env}, log_to_driver=False)
    try:
        @ray.remote
        def probe() -> list[str]:
            from verl.trainer.ppo import core_algos, ray_trainer

            names = [n for n in ("gaca", "gigpo", "fixed_mix") if n in core_algos.ADV_ESTIMATOR_REGISTRY]
            return [*names, ray_trainer.compute_advantage.__module__]

        assert ray.get(probe.remote(), timeout=300) == [
            "gaca", "gigpo", "fixed_mix", "gaca.integrations.verl.estimator"]
    finally:
        ray.shutdown()


@pytest.mark.slow
def test_ray_runtime_env_hook_installs_without_external_modules(monkeypatch):
    """verl-agent's verl reads no VERL_USE_EXTERNAL_MODULES: RAY_RUNTIME_ENV_HOOK makes Ray run the
    integration's setup hook in every worker (here with verl-agent's own ray.init runtime env)."""
    ray = pytest.importorskip("ray")
    monkeypatch.delenv("VERL_USE_EXTERNAL_MODULES", raising=False)
    monkeypatch.setenv("RAY_RUNTIME_ENV_HOOK", "gaca.integrations.verl.with_setup_hook")
    env = {"TOKENIZERS_PARALLELISM": "true", "NCCL_DEBUG": "WARN",
           "PYTHONPATH": os.pathsep.join([SRC, ROOT, os.environ.get("PYTHONPATH", "")])}
    ray.init(num_cpus=1, include_dashboard=False, runtime_env={"env_vars": env}, log_to_driver=False)
    try:
        @ray.remote
        def probe() -> list:
            import os
            import sys

            from verl.trainer.ppo import ray_trainer

            return [os.environ.get("VERL_USE_EXTERNAL_MODULES"), "gaca.integrations.verl" in sys.modules,
                    ray_trainer.compute_advantage.__module__]

        assert ray.get(probe.remote(), timeout=300) == [None, True, "gaca.integrations.verl.estimator"]
    finally:
        ray.shutdown()
