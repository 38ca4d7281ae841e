"""Environment families by name: each one a config class and a factory, registered together.

    make_env("alfworld", split="train", num_games=60, max_steps=10)   # fields of AlfworldConfig
    spec = EnvSpec(AlfworldConfig(max_steps=10), split="train", num_games=60)
    env = spec.build()                                                  # what a pool worker does

A family's factory is named as ``"package.module:function"`` and imported on first use, so that a
user without ALFWorld installed can still play WebShop. ``EnvSpec`` is the picklable recipe a worker
process receives: it carries the resolved factory itself (pickled by reference), so a family
registered at run time from an importable module works in worker processes too.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gaca.envs.base import TextEnv
from gaca.envs.config import EnvConfig
from gaca.registry import Registry

#: ``factory(config, *, split, num_games, expert) -> TextEnv``.
EnvFactory = Callable[..., TextEnv]


@dataclass(frozen=True)
class EnvFamily:
    """One registered environment family."""

    name: str
    config: type[EnvConfig]
    """Its settings (a subclass of ``EnvConfig``)."""
    factory: str | EnvFactory
    """``factory(config, *, split, num_games, expert)``, or ``"module:function"`` naming it."""
    prepare: str | Callable[..., None] | None = None
    """Optional ``prepare(config, *, split, num_games)``: build what every environment of a split
    shares (ALFWorld: generate the games), once, in the main process, before workers start."""
    names: str | Callable[..., list[str]] | None = None
    """Optional ``names(config)``: the names of the things the environment's pages show and its
    actions repeat (WebShop: product ids, as the pages write them), which a tokenizer fitted from
    scratch may keep whole (``policy.tiny_whole_names``)."""

    def prepare_split(self, config: EnvConfig, *, split: str, num_games: int) -> None:
        """Run ``prepare`` if the family has one."""
        if self.prepare is not None:
            _resolve(self.prepare)(config, split=split, num_games=num_games)

    def entity_names(self, config: EnvConfig) -> list[str]:
        """``names(config)``, or none if the family has no ``names``."""
        return list(_resolve(self.names)(config)) if self.names is not None else []

    def resolved_factory(self) -> EnvFactory:
        return _resolve(self.factory)


ENVIRONMENTS: Registry[EnvFamily] = Registry("environment")


def _resolve(target: str | Callable[..., Any]) -> Callable[..., Any]:
    if callable(target):
        return target
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


def register_env(name: str, config: type[EnvConfig], factory: str | EnvFactory, *,
                 prepare: str | Callable[..., None] | None = None,
                 names: str | Callable[..., list[str]] | None = None, replace: bool = False) -> EnvFamily:
    """Register environment family ``name`` (see ``EnvFamily``); its config's ``name`` default must be ``name``."""
    if not (isinstance(config, type) and issubclass(config, EnvConfig)):
        raise TypeError(f"environment {name!r}: config must be a subclass of EnvConfig, got {config!r}")
    default = next(f.default for f in dataclasses.fields(config) if f.name == "name")
    if default != name:
        raise ValueError(f"environment {name!r}: {config.__name__}.name must default to {name!r}, got {default!r}")
    family = EnvFamily(name, config, factory, prepare, names)
    ENVIRONMENTS.register(name, family, replace=replace)
    return family


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


__all__ = ["ENVIRONMENTS", "EnvFactory", "EnvFamily", "EnvSpec", "env_spec", "make_env", "named_spec", "prepare_envs",
           "register_env"]
