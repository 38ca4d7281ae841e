"""EnvPool: episode groups in this process or on worker processes, fault tolerance."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import time

import pytest

pytest.importorskip("alfworld")

from gaca.envs import EnvPool, env_spec
from gaca.testing.faults import FaultyConfig


def _drive(pool, seeds, n_steps=6):
    """Reset with seeds, then follow each env's expert plan; the full transcript (empty for an env
    that sits out: seed None)."""
    first = pool.reset(seeds)
    out = [[o.observation] if o else [] for o in first]
    infos = [o.info if o else {} for o in first]
    done = [o is None or o.done for o in first]
    for _ in range(n_steps):
        actions = [None if d else (i["expert_plan"] or ["look"])[0] for d, i in zip(done, infos, strict=True)]
        res = pool.step(actions)
        for k, r in enumerate(res):
            if r is None:
                assert actions[k] is None
                continue
            out[k].append(r.observation)
            infos[k] = r.info
            done[k] = r.done
    return out, infos, done


def native(spec):
    """The same games on the native engine (resets in milliseconds, for tests with short timeouts)."""
    return dataclasses.replace(spec, config=dataclasses.replace(spec.config, engine="native"))


def faulty_specs(alf_spec, n, **planted):
    """``n`` faulty-family specs around ``alf_spec``'s environment; ``planted[k]`` = kwargs of env k."""
    specs = []
    for k in range(n):
        config = FaultyConfig(inner=alf_spec.config, **planted.get(f"env{k}", {}))
        specs.append(env_spec(config, alf_spec.split, alf_spec.num_games, expert=True))
    return specs


def test_groups_in_process(alf_spec):
    with EnvPool(alf_spec, num_envs=4, num_workers=0) as pool:
        out, infos, done = _drive(pool, [1, 1, 4, 4], n_steps=12)
        assert out[0] == out[1] and out[2] == out[3] and out[0][0] != out[2][0]
        assert all(done) and all(i["won"] for i in infos)
        # None for finished envs; an action for a finished env is an error.
        assert pool.step([None] * 4) == [None] * 4
        with pytest.raises(RuntimeError):
            pool.step(["look", None, None, None])
        assert pool.max_steps == alf_spec.config.max_steps and pool.intro == alf_spec.config.intro


def test_workers_match_in_process(alf_spec):
    seeds = [0, 0, 5, 5]
    with EnvPool(alf_spec, num_envs=4, num_workers=0) as pool:
        ref = _drive(pool, seeds)[0]
    with EnvPool(alf_spec, num_envs=4, num_workers=2) as pool:
        got = _drive(pool, seeds)[0]
        again = _drive(pool, seeds)[0]  # a second round on the same workers
    assert got == ref == again


@pytest.mark.parametrize("num_workers", [0, 2])
def test_planted_crash_leaves_others_intact(alf_spec, num_workers):
    specs = faulty_specs(alf_spec, 4, env1={"crash_at_step": 2})
    with EnvPool(specs, num_workers=num_workers) as pool:
        with EnvPool(alf_spec, num_envs=4) as ref_pool:
            ref = _drive(ref_pool, [3] * 4, n_steps=10)[0]
        out, infos, done = _drive(pool, [3] * 4, n_steps=10)
        assert done[1] and infos[1]["won"] is False and "planted crash" in infos[1]["error"]
        assert infos[1]["task_id"] == infos[0]["task_id"]
        assert len(out[1]) == 3  # reset text, step 1, the failed step 2
        for k in (0, 2, 3):
            assert out[k] == ref[k] and infos[k]["won"]
        # The failed env is rebuilt at the next reset (and crashes again at its step 2).
        first = pool.reset([3] * 4)
        assert all(o.error is None for o in first)


@pytest.mark.parametrize("num_workers", [0, 2])
def test_an_env_sits_a_round_out(alf_spec, num_workers):
    with EnvPool(alf_spec, num_envs=4) as ref_pool:
        ref = _drive(ref_pool, [2, 2, 5, 5], n_steps=12)[0]
    with EnvPool(alf_spec, num_envs=4, num_workers=num_workers) as pool:
        _drive(pool, [2, 2, 5, 5], n_steps=2)  # a first round, left unfinished
        first = pool.reset([2, None, 5, None])
        assert first[1] is None and first[3] is None and first[0].error is None
        with pytest.raises(RuntimeError, match="never started"):
            pool.step([None, "look", None, None])
        assert pool.step([None] * 4) == [None] * 4
        out, infos, done = _drive(pool, [2, None, 5, None], n_steps=12)
        assert out[1] == out[3] == [] and done == [True] * 4
        assert out[0] == ref[0] and out[2] == ref[2] and infos[0]["won"] and infos[2]["won"]
        if num_workers:  # the abandoned episodes are not kept for a replay after a worker restart
            assert pool._backend.episodes == [None] * 4


def test_a_dead_worker_leaves_an_env_that_sits_out_alone(alf_spec):
    specs = faulty_specs(alf_spec, 4, env0={"crash_at_step": 3, "mode": "exit"})  # kills worker 0 (envs 0, 1)
    with EnvPool(alf_spec, num_envs=4) as ref_pool:
        ref = _drive(ref_pool, [3] * 4, n_steps=10)[0]
    with EnvPool(specs, num_workers=2) as pool:
        _drive(pool, [3, 3, 3, 3], n_steps=1)  # env 1 has an unfinished episode ...
        out, infos, done = _drive(pool, [3, None, 3, 3], n_steps=10)  # ... that it abandons here
        assert done[0] and "worker died (exit code 3)" in infos[0]["error"] and out[1] == []
        assert out[2] == ref[2] and out[3] == ref[3] and infos[2]["won"] and infos[3]["won"]
        assert pool._backend.episodes[1] is None
        assert all(o.error is None for o in pool.reset([3] * 4))


def test_crash_in_reset_ends_the_episode_at_once(alf_spec):
    specs = faulty_specs(alf_spec, 2, env0={"crash_at_step": 0})
    with EnvPool(specs) as pool:
        first = pool.reset([2, 2])
        assert first[0].done and first[0].terminated and "planted crash" in first[0].error
        assert first[0].info["won"] is False and first[1].error is None and not first[1].done
        with pytest.raises(RuntimeError, match="already ended"):
            pool.step(["look", "look"])
        r0, r1 = pool.step([None, "look"])
        assert r0 is None and r1.info["valid"] is True


def test_dead_worker_fails_the_culprit_only_and_restores_the_others(alf_spec):
    specs = faulty_specs(alf_spec, 4, env0={"crash_at_step": 2, "mode": "exit"})  # kills worker 0 (envs 0, 1)
    with EnvPool(alf_spec, num_envs=4) as ref_pool:
        ref = _drive(ref_pool, [3] * 4, n_steps=10)[0]
    with EnvPool(specs, num_workers=2) as pool:
        out, infos, done = _drive(pool, [3] * 4, n_steps=10)
        assert done[0] and infos[0]["won"] is False and "worker died (exit code 3)" in infos[0]["error"]
        assert len(out[0]) == 3  # reset text, step 1, the failed step 2
        for k in (1, 2, 3):  # env 1 shared the dead worker: restored by replay, it plays on unharmed
            assert out[k] == ref[k] and infos[k]["won"] and "error" not in infos[k]
        # the worker was restarted: the next round starts clean
        assert all(o.error is None for o in pool.reset([3] * 4))


@pytest.mark.parametrize("num_workers", [0, 2])
@pytest.mark.parametrize("mode", ["system_exit", "hang"])
def test_system_exit_and_hangs_end_only_their_episode(alf_spec, num_workers, mode):
    alf_spec = native(alf_spec)
    specs = faulty_specs(alf_spec, 4, env2={"crash_at_step": 1, "mode": mode})
    with EnvPool(alf_spec, num_envs=4) as ref_pool:
        ref = _drive(ref_pool, [1] * 4, n_steps=8)[0]
    with EnvPool(specs, num_workers=num_workers, step_timeout=1.0) as pool:
        out, infos, done = _drive(pool, [1] * 4, n_steps=8)
        assert done[2] and not infos[2]["won"]
        assert ("SystemExit" if mode == "system_exit" else "timed out after 1 s") in infos[2]["error"]
        for k in (0, 1, 3):
            assert out[k] == ref[k] and infos[k]["won"]


def test_a_step_stuck_where_signals_cannot_reach_is_stopped_on_workers(alf_spec):
    specs = faulty_specs(native(alf_spec), 4, env1={"crash_at_step": 1, "mode": "hang_blocked"})
    t0 = time.monotonic()
    with EnvPool(specs, num_workers=2, step_timeout=1.0) as pool:
        _, infos, _ = _drive(pool, [1] * 4, n_steps=8)
        assert "timed out after 1 s" in infos[1]["error"] and all(infos[k]["won"] for k in (0, 2, 3))
    assert time.monotonic() - t0 < 60


def test_an_unpicklable_result_fails_its_episode_only(alf_spec):
    specs = faulty_specs(native(alf_spec), 2, env0={"crash_at_step": 1, "mode": "unpicklable"})
    with EnvPool(specs, num_workers=2) as pool:  # one env per worker
        pool.reset([0, 0])
        r0, r1 = pool.step(["look", "look"])
        assert r0.terminated and "sending its result" in r0.error and r1.error is None


def test_workers_ignore_ctrl_c_and_die_with_the_trainer(alf_spec, tmp_path):
    with EnvPool(alf_spec, num_envs=2, num_workers=2) as pool:
        pool.reset([0, 0])
        for proc in pool._backend._procs:
            os.kill(proc.pid, signal.SIGINT)  # what a terminal sends the whole process group
        time.sleep(0.5)
        assert all(o.error is None for o in pool.step(["look", "look"]))
    # a trainer killed with SIGKILL leaves no worker behind
    script = tmp_path / "trainer.py"
    script.write_text(
        "import os, sys, time\n"
        "from gaca.envs import AlfworldConfig, EnvPool, env_spec\n"
        f"spec = env_spec(AlfworldConfig(cache_dir={alf_spec.config.cache_dir!r}), 'train', 6)\n"
        "pool = EnvPool(spec, 2, num_workers=2)\n"
        "pool.reset([0, 0])\n"
        "print(' '.join(str(p.pid) for p in pool._backend._procs), flush=True)\n"
        "time.sleep(600)\n")
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    pids = [int(p) for p in proc.stdout.readline().split()]
    assert len(pids) == 2 and all(_alive(p) for p in pids)
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(p) for p in pids)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


def test_argument_checks(alf_spec):
    with pytest.raises(ValueError):
        EnvPool([alf_spec], num_envs=2)
    pool = EnvPool(alf_spec, num_envs=2)
    with pytest.raises(ValueError):
        pool.reset([0])
    pool.close()
    with pytest.raises(RuntimeError):
        pool.reset([0, 0])


def test_workers_generate_missing_games(tmp_path, alf_spec):
    # An EnvPool worker is a daemonic process, which may not start the planner's child process:
    # games missing from the cache are then planned in the worker itself, with the same result.
    def spec(cache):
        return dataclasses.replace(alf_spec, config=dataclasses.replace(alf_spec.config, cache_dir=str(cache)),
                                   num_games=1)

    with EnvPool(spec(tmp_path / "in_worker"), num_envs=2, num_workers=2) as pool:
        worker = pool.reset([0, 0])[0]
    with EnvPool(spec(tmp_path / "in_main"), num_envs=1) as pool:
        main = pool.reset([0])[0]
    assert worker.observation == main.observation
    assert worker.info["expert_plan"] == main.info["expert_plan"] and worker.info["expert_plan"]
