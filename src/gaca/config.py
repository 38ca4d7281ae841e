"""Config dataclasses from TOML and ``key=value`` overrides: typed, validated, documented once.

Every config in gaca is a tree of dataclasses whose field docstrings (the string literal under a
field) are its documentation. This module turns nested dicts (TOML tables) into such trees:

- an unknown key is an error that lists the valid ones;
- values are checked against the annotations (``int``, ``float``, ``bool``, ``str``, ``Literal``,
  ``X | None``, ``tuple``), then the dataclass's own ``__post_init__`` validates ranges and names;
- a dataclass with a ``config_class(data)`` classmethod picks its concrete subclass from the data
  (the ``[env]`` table: the family its ``name`` selects);
- every error is a ``ConfigError`` of one line that names the key.

``field_docs`` reads the docstrings back for ``gaca config show``.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
import sys
import textwrap
import types
import typing
from pathlib import Path
from typing import Any, Literal

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - python 3.10
    import tomli as tomllib


class ConfigError(ValueError):
    """A config file or override that does not fit the config dataclasses (one line, naming the key)."""


def _check_value(path: str, tp: Any, value: Any) -> Any:
    """Coerce/validate ``value`` against the annotation ``tp``; raise ConfigError on mismatch."""
    origin = typing.get_origin(tp)
    if tp is Any:
        return value
    if origin is Literal:
        choices = typing.get_args(tp)
        if value not in choices:
            raise ConfigError(f"{path} must be one of {list(choices)}, got {value!r}")
        return value
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _check_value(path, arg, value)
            except ConfigError:
                pass
        names = " or ".join("none" if a is type(None) else getattr(a, "__name__", str(a)) for a in args)
        raise ConfigError(f"{path} must be {names}, got {value!r}")
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{path} must be a list, got {value!r}")
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_check_value(f"{path}[{i}]", args[0], v) for i, v in enumerate(value))
        if len(args) != len(value):
            raise ConfigError(f"{path} must have {len(args)} entries, got {len(value)}")
        return tuple(_check_value(f"{path}[{i}]", a, v) for i, (a, v) in enumerate(zip(args, value, strict=True)))
    if origin is list:
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{path} must be a list, got {value!r}")
        (arg,) = typing.get_args(tp) or (Any,)
        return [from_dict(arg, v, f"{path}[{i}].") if dataclasses.is_dataclass(arg) else
                _check_value(f"{path}[{i}]", arg, v) for i, v in enumerate(value)]
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{path} must be true or false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{path} must be an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{path} must be a number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{path} must be a string, got {value!r}")
        return value
    return value


def from_dict(cls: type, data: dict[str, Any], prefix: str = "") -> Any:
    """Build dataclass ``cls`` from a (nested) dict; see the module docstring for the rules."""
    where = prefix.rstrip(".") or "the top level"
    if not isinstance(data, dict):
        raise ConfigError(f"{where} must be a table of {cls.__name__} fields, got {data!r}")
    if hasattr(cls, "config_class"):
        try:
            cls = cls.config_class(data)
        except ValueError as e:
            raise ConfigError(_named(prefix, str(e))) from e
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    unknown = [k for k in data if k not in names]
    if unknown:
        raise ConfigError(f"unknown config key(s) {[prefix + k for k in unknown]} in {where}; valid keys: "
                          + ", ".join(prefix + n for n in names))
    kwargs: dict[str, Any] = {}
    for name in names:
        if name not in data:
            continue
        tp, value = hints[name], data[name]
        if dataclasses.is_dataclass(tp):
            kwargs[name] = from_dict(tp, value, f"{prefix}{name}.")
        else:
            kwargs[name] = _check_value(prefix + name, tp, value)
    try:
        return cls(**kwargs)
    except ConfigError:
        raise
    except (ValueError, TypeError) as e:
        raise ConfigError(_named(prefix, str(e))) from e


def _named(prefix: str, message: str) -> str:
    """``message`` prefixed with the table it concerns, unless it already names it."""
    table = prefix.rstrip(".")
    if not table or message.startswith(table.split(".")[0]):
        return message
    return f"{table}: {message}"


def to_dict(cfg: Any) -> dict[str, Any]:
    """The config as a nested dict of plain values (tuples become lists; JSON/TOML-ready)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if dataclasses.is_dataclass(value):
            out[f.name] = to_dict(value)
        elif isinstance(value, tuple):
            out[f.name] = list(value)
        else:
            out[f.name] = value
    return out


def parse_override(item: str) -> tuple[list[str], Any]:
    """``"a.b=VALUE"`` -> (["a", "b"], value); VALUE is read as TOML, a bare word as a string, none as None."""
    if "=" not in item:
        raise ConfigError(f"override {item!r} is not of the form key=value")
    key, raw = item.split("=", 1)
    key = key.strip()
    if not key or any(not part for part in key.split(".")):
        raise ConfigError(f"override {item!r} has an empty key")
    raw = raw.strip()
    if raw.lower() in ("none", "null"):
        return key.split("."), None
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw
    return key.split("."), value


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Set each dotted ``key=value`` in the nested dict ``data`` (in place; returns it)."""
    for item in overrides:
        keys, value = parse_override(item)
        node = data
        for k in keys[:-1]:
            child = node.setdefault(k, {})
            if not isinstance(child, dict):
                raise ConfigError(f"override {item!r}: {k!r} is not a table")
            node = child
        node[keys[-1]] = value
    return data


def read_toml(path: str | Path) -> dict[str, Any]:
    """A TOML file as a dict (a ``ConfigError`` when it is missing or not TOML)."""
    source = Path(path)
    if not source.is_file():
        raise ConfigError(f"config file {str(source)!r} does not exist")
    with open(source, "rb") as f:
        try:
            return tomllib.load(f)
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"{source}: invalid TOML: {e}") from e


# ---------------------------------------------------------------------------------------------
# documentation


def field_docs(cls: type) -> dict[str, str]:
    """The docstring under each field of dataclass ``cls`` (from its own class or the nearest base)."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError):
            continue
        body = tree.body[0].body  # type: ignore[attr-defined]
        for node, after in zip(body, [*body[1:], None], strict=True):
            if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                    and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
                    and isinstance(after.value.value, str)):
                docs[node.target.id] = inspect.cleandoc(after.value.value)
    return docs


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, str):
        return json.dumps(value)
    return repr(value)


def describe(cfg: Any, table: str = "") -> list[str]:
    """``cfg`` as commented TOML: each field's documentation above its value (None: a commented line)."""
    docs = field_docs(type(cfg))
    lines: list[str] = []
    nested: list[tuple[str, Any]] = []
    if table:
        lines += ["", f"[{table}]"]
        if type(cfg).__doc__:
            lines += [f"# {type(cfg).__name__}: {inspect.cleandoc(type(cfg).__doc__).splitlines()[0]}"]
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if dataclasses.is_dataclass(value):
            nested.append((f"{table}.{f.name}" if table else f.name, value))
            continue
        for doc_line in textwrap.wrap(" ".join(docs.get(f.name, "").split()), 100):
            lines.append(f"# {doc_line}")
        lines.append(f"# {f.name} = (none)" if value is None else f"{f.name} = {_toml_value(value)}")
    for name, value in nested:
        lines += describe(value, name)
    return lines


__all__ = [
    "ConfigError",
    "apply_overrides",
    "describe",
    "field_docs",
    "from_dict",
    "parse_override",
    "read_toml",
    "to_dict",
]
