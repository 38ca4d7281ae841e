"""Range checks for option values, shared by every config dataclass (pure Python, any layer may use it).

Each check raises ``ValueError`` with one line naming the option, the value and the valid range,
and treats NaN as out of every range (``nan < 1`` and ``nan >= 0`` are both False, so a plain
comparison would let it through).
"""

from __future__ import annotations

import math
import types
import typing


def number(name: str, value: object, lo: float | None = None, hi: float | None = None, *,
           lo_open: bool = False, hi_open: bool = False, integer: bool = False) -> None:
    """Check that ``value`` is a finite number in the interval [lo, hi] (open ends where asked)."""
    kind = "an integer" if integer else "a number"
    if isinstance(value, bool) or not isinstance(value, int if integer else (int, float)):
        raise ValueError(f"{name} must be {kind}, got {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value!r}")
    below = lo is not None and (value <= lo if lo_open else value < lo)
    above = hi is not None and (value >= hi if hi_open else value > hi)
    if below or above:
        left = "(" if lo_open or lo is None else "["
        right = ")" if hi_open or hi is None else "]"
        span = f"{left}{'-inf' if lo is None else f'{lo:g}'}, {'inf' if hi is None else f'{hi:g}'}{right}"
        raise ValueError(f"{name} must be in {span}, got {value!r}")


def integer(name: str, value: object, lo: int | None = None, hi: int | None = None) -> None:
    """Check that ``value`` is an integer in [lo, hi]."""
    number(name, value, lo, hi, integer=True)


def choice(name: str, value: object, choices: tuple[object, ...] | list[object]) -> None:
    """Check that ``value`` is one of ``choices``."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {list(choices)}, got {value!r}")


def literal_fields(obj: object, prefix: str = "") -> None:
    """``choice`` for every field of the dataclass ``obj`` annotated ``Literal[...]`` (or optional
    ``Literal[...] | None``): the one check of a config's named choices, called from its ``__post_init__``.
    ``prefix`` goes before the field's name in errors (``"rollout."`` -> ``rollout.anchor must be one of …``)."""
    for name, annotation in typing.get_type_hints(type(obj)).items():
        args = typing.get_args(annotation)
        optional = typing.get_origin(annotation) in (typing.Union, types.UnionType) and type(None) in args
        literal = next((a for a in args if typing.get_origin(a) is typing.Literal), None) if optional \
            else annotation if typing.get_origin(annotation) is typing.Literal else None
        value = getattr(obj, name)
        if literal is None or (optional and value is None):
            continue
        allowed = [*typing.get_args(literal), *([None] if optional else [])]
        choice(prefix + name, value, allowed)


__all__ = ["choice", "integer", "literal_fields", "number"]
