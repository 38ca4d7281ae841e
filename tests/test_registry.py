"""The shared name registry behind estimators, losses and environments."""

from __future__ import annotations

import pytest

from gaca.registry import Registry, UnknownNameError


def test_register_lookup_and_clear_errors():
    reg: Registry[int] = Registry("widget")
    reg.register("a", 1)

    @reg.register("b")
    def b() -> int:
        return 2

    assert reg["a"] == 1 and reg["b"] is b and sorted(reg) == ["a", "b"] and len(reg) == 2
    with pytest.raises(UnknownNameError, match=r"unknown widget 'c'; choices: \['a', 'b'\]") as err:
        reg["c"]
    assert isinstance(err.value, KeyError) and isinstance(err.value, ValueError)
    with pytest.raises(UnknownNameError, match=r"^thing\.kind: unknown widget 3"):
        reg.check(3, "thing.kind")


def test_duplicates_are_refused_unless_replaced_and_unregister_returns_the_item():
    reg: Registry[int] = Registry("widget")
    reg.register("a", 1)
    with pytest.raises(ValueError, match="widget 'a' is already registered"):
        reg.register("a", 2)
    reg.register("a", 3, replace=True)
    assert reg["a"] == 3
    assert reg.unregister("a") == 3 and "a" not in reg
    with pytest.raises(ValueError, match="non-empty string"):
        reg.register("", 1)
