"""The ``[env]`` settings: one dataclass per environment family, on a common base.

``EnvConfig`` holds what every family has (which games, how many, the one step limit, the worker
processes, the prompt's introduction); each family subclasses it with its own typed, documented
settings (``gaca.envs.alfworld.AlfworldConfig``, ``gaca.envs.webshop.WebShopConfig``) and registers
it with its factory (``gaca.envs.registry.register_env``). A config file's ``[env]`` table is read
into the class of the family its ``name`` selects, so an unknown key is an error that lists the
family's own keys. Nothing here imports an environment's dependencies.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from gaca import validate

#: The family an ``[env]`` table without a ``name`` selects.
DEFAULT_ENV = "alfworld"


@dataclass(frozen=True)
class EnvConfig:
    """Settings every environment family has; subclass it for a family's own (see module docstring)."""

    SPLITS: ClassVar[tuple[str, ...]] = ("train", "eval")
    """The split names this family accepts."""

    name: str = ""
    """The environment family, a name registered in ``gaca.envs.ENVIRONMENTS`` (``alfworld``, ``webshop``)."""
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
        from gaca.envs.registry import ENVIRONMENTS

        name = data.get("name", cls.name or DEFAULT_ENV)
        ENVIRONMENTS.check(name, "env.name")
        return ENVIRONMENTS[name].config

    def __post_init__(self) -> None:
        from gaca.envs.registry import ENVIRONMENTS

        ENVIRONMENTS.check(self.name, "env.name")
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


__all__ = ["DEFAULT_ENV", "EnvConfig"]
