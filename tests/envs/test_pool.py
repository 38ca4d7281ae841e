"""EnvPool: episode groups on worker processes, fault tolerance."""

from __future__ import annotations

import pytest

pytest.importorskip("alfworld")

from gaca.envs.pool import EnvPool


def _drive(pool, seeds, n_steps=6):
    """Reset with seeds, then follow each env's expert plan; the full transcript."""
    first = pool.reset(seeds)
    out = [[obs] for obs, _ in first]
    infos = [info for _, info in first]
    done = [False] * len(seeds)
    for _ in range(n_steps):
        actions = [None if d else (i["expert_plan"] or ["look"])[0] for d, i in zip(done, infos, strict=True)]
        res = pool.step(actions)
        for k, r in enumerate(res):
            if r is None:
                assert actions[k] is None
                continue
            obs, _, term, trunc, infos[k] = r
            out[k].append(obs)
            done[k] = term or trunc
    return out, infos, done


def test_groups_in_process(alf_kwargs):
    with EnvPool("alfworld", alf_kwargs, num_envs=4, num_workers=0) as pool:
        out, infos, done = _drive(pool, [1, 1, 4, 4], n_steps=12)
        assert out[0] == out[1] and out[2] == out[3] and out[0][0] != out[2][0]
        assert all(done) and all(i["won"] for i in infos)
        # None for finished envs; an action for a finished env is an error.
        assert pool.step([None] * 4) == [None] * 4
        with pytest.raises(RuntimeError):
            pool.step(["look", None, None, None])


def test_workers_match_in_process(alf_kwargs):
    seeds = [0, 0, 5, 5]
    with EnvPool("alfworld", alf_kwargs, num_envs=4, num_workers=0) as pool:
        ref = _drive(pool, seeds)[0]
    with EnvPool("alfworld", alf_kwargs, num_envs=4, num_workers=2) as pool:
        got = _drive(pool, seeds)[0]
        again = _drive(pool, seeds)[0]  # a second round on the same workers
    assert got == ref == again


@pytest.mark.parametrize("num_workers", [0, 2])
def test_planted_crash_leaves_others_intact(alf_kwargs, num_workers):
    kwargs = [{"inner": "alfworld", "inner_kwargs": alf_kwargs} for _ in range(4)]
    kwargs[1]["crash_at_step"] = 2
    with EnvPool("gaca.envs.pool:FaultyEnv", kwargs, num_envs=4, num_workers=num_workers) as pool:
        ref_pool = EnvPool("alfworld", alf_kwargs, num_envs=4, num_workers=0)
        ref = _drive(ref_pool, [3] * 4, n_steps=10)[0]
        ref_pool.close()
        out, infos, done = _drive(pool, [3] * 4, n_steps=10)
        assert done[1] and infos[1]["won"] is False and "planted crash" in infos[1]["error"]
        assert infos[1]["task_id"] == infos[0]["task_id"]
        assert len(out[1]) == 3  # reset text, step 1, the failed step 2
        for k in (0, 2, 3):
            assert out[k] == ref[k] and infos[k]["won"]
        # The failed env is rebuilt at the next reset (and crashes again at its step 2).
        first = pool.reset([3] * 4)
        assert all("error" not in info for _, info in first)


def test_crash_in_reset_ends_episode(alf_kwargs):
    kwargs = [{"inner": "alfworld", "inner_kwargs": alf_kwargs, "crash_at_step": None} for _ in range(2)]
    kwargs[0]["crash_at_step"] = 0
    with EnvPool("gaca.envs.pool:FaultyEnv", kwargs, num_envs=2, num_workers=0) as pool:
        (_, info0), (_, info1) = pool.reset([2, 2])
        assert "error" in info0 and "error" not in info1
        r0, r1 = pool.step(["look", "look"])
        assert r0[2] is True and r0[4]["won"] is False and "error" in r0[4]
        assert r1[4]["valid"] is True


def test_dead_worker_fails_its_envs_only(alf_kwargs):
    kwargs = [{"inner": "alfworld", "inner_kwargs": alf_kwargs} for _ in range(4)]
    kwargs[0]["crash_at_step"], kwargs[0]["mode"] = 1, "exit"  # env 0 kills worker 0 (envs 0, 1)
    with EnvPool("gaca.envs.pool:FaultyEnv", kwargs, num_envs=4, num_workers=2) as pool:
        pool.reset([0] * 4)
        res = pool.step(["look"] * 4)
        for k in (0, 1):
            assert res[k][2] is True and res[k][4]["won"] is False and "worker died" in res[k][4]["error"]
        for k in (2, 3):
            assert res[k][0] == res[3][0] and "error" not in res[k][4]
        # Worker 0 is restarted at the next reset.
        first = pool.reset([0] * 4)
        assert all("error" not in info for _, info in first)


def test_argument_checks(alf_kwargs):
    with pytest.raises(ValueError):
        EnvPool("alfworld", [alf_kwargs], num_envs=2, num_workers=0)
    pool = EnvPool("alfworld", alf_kwargs, num_envs=2, num_workers=0)
    with pytest.raises(ValueError):
        pool.reset([0])
    pool.close()
    with pytest.raises(RuntimeError):
        pool.reset([0, 0])


def test_workers_generate_missing_games(tmp_path, alf_kwargs):
    # An EnvPool worker is a daemonic process, which may not start the planner's child process:
    # games missing from the cache are then planned in the worker itself, with the same result.
    kwargs = {**alf_kwargs, "num_games": 1, "cache_dir": str(tmp_path / "in_worker")}
    with EnvPool("alfworld", kwargs, num_envs=1, num_workers=1) as pool:
        [(obs_worker, info_worker)] = pool.reset([0])
    with EnvPool("alfworld", {**kwargs, "cache_dir": str(tmp_path / "in_main")}, num_envs=1, num_workers=0) as pool:
        [(obs_main, info_main)] = pool.reset([0])
    assert obs_worker == obs_main
    assert info_worker["expert_plan"] == info_main["expert_plan"] and info_worker["expert_plan"]
