"""Named registries: the one mechanism behind every "choose by name" option in gaca.

    ESTIMATORS = Registry("advantage estimator")

    @ESTIMATORS.register("gaca")
    def gaca(batch, layout, options): ...

    ESTIMATORS["gaca"]          # the function
    ESTIMATORS["gacaa"]         # UnknownNameError: unknown advantage estimator 'gacaa'; choices: [...]

Registering a name twice is an error (``replace=True`` says it is meant), so that two plugins cannot
silently shadow each other. Config fields that name a registered object are validated against the
registry when the config is built, so a name registered before loading the config is selectable.
Pure Python: every layer, ``gaca.advantage`` included, may use it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Generic, TypeVar

T = TypeVar("T")


class UnknownNameError(ValueError, KeyError):
    """A name that is not in a registry (a ``ValueError`` for config checks, a ``KeyError`` for lookups)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class Registry(Mapping[str, T], Generic[T]):
    """A read-only mapping name -> object, filled by :meth:`register`."""

    def __init__(self, kind: str) -> None:
        """``kind`` names what is registered, for error messages ("advantage estimator")."""
        self.kind = kind
        self._items: dict[str, T] = {}

    def register(self, name: str, obj: T | None = None, *, replace: bool = False) -> Callable[[T], T] | T:
        """Register ``obj`` under ``name``; without ``obj``, a decorator that registers what it decorates."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"a {self.kind} name must be a non-empty string, got {name!r}")

        def add(item: T) -> T:
            if name in self._items and not replace:
                raise ValueError(f"{self.kind} {name!r} is already registered (pass replace=True to replace it)")
            self._items[name] = item
            return item

        return add if obj is None else add(obj)

    def unregister(self, name: str) -> T:
        """Remove ``name`` and return what it named (tests and plugins that clean up after themselves)."""
        return self._items.pop(self.check(name))

    def check(self, name: object, field: str | None = None) -> str:
        """Return ``name`` if it is registered, else raise ``UnknownNameError`` naming the choices."""
        if isinstance(name, str) and name in self._items:
            return name
        where = f"{field}: " if field else ""
        raise UnknownNameError(f"{where}unknown {self.kind} {name!r}; choices: {sorted(self._items)}")

    def __getitem__(self, name: str) -> T:
        return self._items[self.check(name)]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {sorted(self._items)})"


__all__ = ["Registry", "UnknownNameError"]
