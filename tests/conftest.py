"""Test-session settings shared by every test package.

Hypothesis profiles: ``dev`` (the default) explores new random examples on every run; ``ci``
(``HYPOTHESIS_PROFILE=ci``, set by ``.ci/run``) derandomizes them, so that a red CI run is a real
defect that reproduces, never a new random draw.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import settings

settings.register_profile("dev")
settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


@pytest.fixture(scope="session")
def cache(tmp_path_factory) -> str:
    """One game/tokenizer cache for the whole test session (``tests/small_run.py``'s runs use it)."""
    path = tmp_path_factory.getbasetemp() / "gaca_shared_cache"
    path.mkdir(exist_ok=True)
    return str(path)
