"""Shared fixtures for the environment tests: a small cached set of generated ALFWorld games.

Games are generated once per test session into a temporary directory (about 2 s per game on one
core); set ``GACA_TEST_CACHE`` to a directory to keep them between runs.
"""

from __future__ import annotations

import os

import pytest

#: Games per split in the default (fast) tests: one per task family.
N_FAST = 6


@pytest.fixture(scope="session")
def alf_cache(tmp_path_factory: pytest.TempPathFactory) -> str:
    pytest.importorskip("alfworld")
    pytest.importorskip("textworld")
    pytest.importorskip("fast_downward")
    from gaca.envs.alfworld import generate_games

    path = os.environ.get("GACA_TEST_CACHE") or str(tmp_path_factory.mktemp("alfworld-cache"))
    for split in ("train", "eval"):
        generate_games(split, N_FAST, seed=0, cache_dir=path)
    return path


@pytest.fixture(scope="session")
def alf_kwargs(alf_cache: str) -> dict:
    """``make_env("alfworld", **alf_kwargs)``: the fast train set on the TextWorld engine, expert on."""
    return {"split": "train", "num_games": N_FAST, "cache_dir": alf_cache, "expert": True, "engine": "textworld"}


@pytest.fixture(scope="session")
def alf_spec(alf_cache: str):
    """The same environments as ``alf_kwargs``, as the ``EnvSpec`` a pool builds them from."""
    from gaca.envs import AlfworldConfig, env_spec

    return env_spec(AlfworldConfig(cache_dir=alf_cache, engine="textworld"), "train", N_FAST, expert=True)
