"""Test-session settings shared by every test package.

Hypothesis profiles: ``dev`` (the default) explores new random examples on every run; ``ci``
(``HYPOTHESIS_PROFILE=ci``, set by ``.ci/run``) derandomizes them, so that a red CI run is a real
defect that reproduces, never a new random draw.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import settings

from gaca.policy import PolicyConfig, fit_tiny_tokenizer, load_policy
from gaca.rollout import format_response, render_prompt
from gaca.testing.fakes import CorridorEnv

settings.register_profile("dev")
settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


@pytest.fixture(scope="session")
def cache(tmp_path_factory) -> str:
    """One game/tokenizer cache for the whole test session (``tests/small_run.py``'s runs use it)."""
    path = tmp_path_factory.getbasetemp() / "gaca_shared_cache"
    path.mkdir(exist_ok=True)
    return str(path)


@pytest.fixture(scope="session")
def corridor_tokenizer(tmp_path_factory):
    texts = [render_prompt(f"reach room {t}", f"You are in room {k}.", list(CorridorEnv.ACTIONS), [],
                           history_length=2, step=0) for t in range(1, 4) for k in range(3)]
    texts += [format_response(a, "x") for a in CorridorEnv.ACTIONS]
    return fit_tiny_tokenizer(texts * 3, 400, cache_dir=str(tmp_path_factory.mktemp("tok")))


@pytest.fixture
def make_policy(corridor_tokenizer):
    """Factory: a very small real tiny policy whose tokenizer was fitted to the toy corridor's text."""

    def make(seed: int = 0, **kw):
        cfg = PolicyConfig(model="tiny", tiny_hidden=32, tiny_layers=1, tiny_heads=2, seed=seed, **kw)
        return load_policy(cfg, tokenizer=corridor_tokenizer)

    return make
