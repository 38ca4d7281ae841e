"""The ``[env]`` settings and the environment families they select, registered by name.

``EnvConfig`` holds what every family has (which games, how many, the one step limit, the worker
processes, the prompt's introduction); each family subclasses it with its own typed, documented
settings (``gaca.envs.alfworld.AlfworldConfig``, ``gaca.envs.webshop.WebShopConfig``) and registers
it with its factory (``register_env``, into ``ENVIRONMENTS``). A config file's ``[env]`` table is
read into the class of the family its ``name`` selects, so an unknown key is an error that lists the
family's own keys. A family's factory is named as ``"package.module:function"`` and imported on
first use, so that a user without ALFWorld installed can still play WebShop: nothing here imports
an environment's dependencies. (The settings and the registry live together because each checks
the other: a config's ``name`` must be a registered family, a family's config an ``EnvConfig``.)
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from gaca import validate
from gaca.envs.base import TextEnv
from gaca.registry import Registry

#: The family an ``[env]`` table without a ``name`` selects.
DEFAULT_ENV = "alfworld"

#: Every registered environment family by name (``register_env``; ``gaca.envs`` registers alfworld and webshop).
ENVIRONMENTS: Registry[EnvFamily] = Registry("environment")


@dataclass(frozen=True)
class EnvConfig:
    """Settings every environment family has; subclass it for a family's own (see module docstring)."""

    SPLITS: ClassVar[tuple[str, ...]] = ("train", "eval")
    """The split names this family accepts."""

    name: str = ""
    """The environment family, a name registered in ``ENVIRONMENTS`` (``alfworld``, ``webshop``)."""
    train_split: str = "train"
    """Split the training tasks are drawn from."""
    eval_split: str = "eval"
    """Held-out split every evaluation plays."""
    num_train_games: int = 64
    """Training tasks (games) of the train split: seeds 0 .. num_train_games − 1."""
    num_eval_games: int = 24
    """Held-out tasks; every evaluation plays each of them once."""
    max_steps: int = 50
    """The step limit of one episode: the environment truncates the episode when it is reached."""
    num_workers: int = 2
    """Worker processes that step the environments (0 or 1: in this process)."""
    step_timeout: float | None = 120.0
    """Seconds one ``reset`` or ``step`` of an environment may take; past it the episode ends as failed
    and the environment is restarted (None: no limit). In this process a step stuck inside C code is
    interrupted only when it returns to Python; on workers it is always stopped."""
    intro: str = "You are an expert agent acting in a text-based environment."
    """The first line of every agent prompt: who the agent is and where (each family has its own)."""

    @classmethod
    def config_class(cls, data: dict[str, Any]) -> type[EnvConfig]:
        """The family's config class for a raw ``[env]`` table (the config loader's dispatch hook)."""
        name = data.get("name", cls.name or DEFAULT_ENV)
        ENVIRONMENTS.check(name, "env.name")
        return ENVIRONMENTS[name].config

    def __post_init__(self) -> None:
        ENVIRONMENTS.check(self.name, "env.name")
        validate.literal_fields(self, "env.")
        family = ENVIRONMENTS[self.name].config
        if not isinstance(self, family):
            raise ValueError(f"env.name={self.name!r} needs {family.__name__}, got {type(self).__name__}")
        for field in ("train_split", "eval_split"):
            if getattr(self, field) not in self.SPLITS:
                raise ValueError(f"env.{field} must be one of {list(self.SPLITS)} for {self.name}, "
                                 f"got {getattr(self, field)!r}")
        for field in ("num_train_games", "num_eval_games", "max_steps"):
            if getattr(self, field) < 1:
                raise ValueError(f"env.{field} must be >= 1, got {getattr(self, field)}")
        if self.num_workers < 0:
            raise ValueError(f"env.num_workers must be >= 0, got {self.num_workers}")
        if self.step_timeout is not None:
            validate.number("env.step_timeout", self.step_timeout, 0.0, None, lo_open=True)

    def unlisted_actions(self) -> str | None:
        """Why some admissible actions are not listed as the exact text to send (None: all are), which
        choosing among them (``rollout.action_mode="choose"``) needs; the text says which setting lists them."""
        return None

    def num_games(self, split: str) -> int:
        """Games of ``split`` the trainer plays: ``num_train_games`` for the train split, else ``num_eval_games``."""
        return self.num_train_games if split == self.train_split else self.num_eval_games


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


__all__ = ["DEFAULT_ENV", "ENVIRONMENTS", "EnvConfig", "EnvFactory", "EnvFamily", "register_env"]
