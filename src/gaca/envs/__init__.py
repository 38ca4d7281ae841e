"""Text environments (no model code here): the protocol, the registry, the worker pool.

Each environment family lives in its own subpackage and exposes ``make(**kwargs) -> TextEnv``;
``make_env`` imports it lazily so that a user without ALFWorld installed can still use WebShop.
"""

from __future__ import annotations

import importlib
from typing import Any

from gaca.envs.base import INFO_KEYS, TextEnv

# name -> module exposing ``make(**kwargs) -> TextEnv``
ENVIRONMENTS: dict[str, str] = {
    "alfworld": "gaca.envs.alfworld",
    "webshop": "gaca.envs.webshop",
}


def make_env(name: str, **kwargs: Any) -> TextEnv:
    """Build environment ``name`` (a key of ``ENVIRONMENTS``) with its keyword options."""
    if name not in ENVIRONMENTS:
        raise ValueError(f"unknown environment {name!r}; known: {sorted(ENVIRONMENTS)}")
    module = importlib.import_module(ENVIRONMENTS[name])
    return module.make(**kwargs)


__all__ = ["ENVIRONMENTS", "INFO_KEYS", "TextEnv", "make_env"]
