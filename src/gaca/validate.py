"""Range checks for option values, shared by every config dataclass (pure Python, any layer may use it).

Each check raises ``ValueError`` with one line naming the option, the value and the valid range,
and treats NaN as out of every range (``nan < 1`` and ``nan >= 0`` are both False, so a plain
comparison would let it through).
"""

from __future__ import annotations

import math


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


__all__ = ["choice", "integer", "number"]
