"""Environments built from a registered family: the recipe of one (``EnvSpec``), and builders by name.

    make_env("alfworld", split="train", num_games=60, max_steps=10)   # fields of AlfworldConfig
    spec = env_spec(AlfworldConfig(max_steps=10), "train", num_games=60)
    env = spec.build()                                                  # what a pool worker does

``EnvSpec`` is the picklable recipe a worker process receives: it carries the family's factory,
resolved (``gaca.envs.config.ENVIRONMENTS``) and pickled by reference, so a family registered at
run time from an importable module works in worker processes too.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from gaca.envs.base import TextEnv
from gaca.envs.config import ENVIRONMENTS, EnvConfig, EnvFactory


@dataclass(frozen=True)
class EnvSpec:
    """A picklable recipe for one environment: its settings, split, game count and expert flag."""

    config: EnvConfig
    split: str
    num_games: int
    expert: bool = False
    factory: EnvFactory | None = None
    """The family's factory, resolved by ``env_spec`` (so worker processes need no registry lookup)."""

    @property
    def max_steps(self) -> int:
        return self.config.max_steps

    @property
    def intro(self) -> str:
        return self.config.intro

    def build(self) -> TextEnv:
        """Build the environment (in whichever process calls it)."""
        factory = self.factory or ENVIRONMENTS[self.config.name].resolved_factory()
        return factory(self.config, split=self.split, num_games=self.num_games, expert=self.expert)


def env_spec(config: EnvConfig, split: str, num_games: int | None = None, *, expert: bool = False) -> EnvSpec:
    """The ``EnvSpec`` of ``config`` on ``split`` (``num_games`` defaults to ``config.num_games(split)``)."""
    if split not in config.SPLITS:
        raise ValueError(f"{config.name} has splits {list(config.SPLITS)}, got {split!r}")
    family = ENVIRONMENTS[config.name]
    return EnvSpec(config, split, config.num_games(split) if num_games is None else num_games, expert,
                   family.resolved_factory())


def prepare_envs(spec: EnvSpec) -> None:
    """Build what the environments of ``spec`` share, once, here (see ``EnvFamily.prepare``)."""
    ENVIRONMENTS[spec.config.name].prepare_split(spec.config, split=spec.split, num_games=spec.num_games)


def named_spec(name: str, *, split: str = "train", num_games: int | None = None, expert: bool = False,
               **settings: Any) -> EnvSpec:
    """The ``EnvSpec`` of family ``name`` with ``settings`` (fields of its config class) on ``split``.

    An unknown setting is an error that lists the family's fields.
    """
    config_cls = ENVIRONMENTS[name].config
    known = {f.name for f in dataclasses.fields(config_cls)}
    unknown = sorted(set(settings) - known)
    if unknown:
        raise ValueError(f"unknown {name} setting(s) {unknown}; valid: {sorted(known - {'name'})}")
    return env_spec(config_cls(**settings), split, num_games, expert=expert)


def make_env(name: str, *, split: str = "train", num_games: int | None = None, expert: bool = False,
             **settings: Any) -> TextEnv:
    """Build one environment of family ``name`` (see ``named_spec``)."""
    return named_spec(name, split=split, num_games=num_games, expert=expert, **settings).build()


__all__ = ["EnvSpec", "env_spec", "make_env", "named_spec", "prepare_envs"]
