"""Two memoizations of pure functions inside TextWorld's PDDL engine (same games, same text).

Profiling one ALFWorld step shows most time in two places that recompute the same thing:

* ``textworld.envs.pddl.textgen._parse_and_convert`` re-parses each grammar template string with
  TatSu on every step (about half of a step). Its result depends on the string only; we cache the
  parsed symbols and hand out deep copies (callers set ``symbol.context`` on them).
* ``fast_downward.pddl2sas`` re-translates the PDDL problem twice on every ``reset()`` of the same
  game. It is a function of (domain, problem, optimize); we keep a small LRU of its results. The
  translated task is only read afterwards (actions, types, objects, initial facts).

``install()`` is idempotent and process-wide; ``uninstall()`` restores the originals (tests compare
full transcripts with and without). Nothing else of the engine changes.
"""

from __future__ import annotations

import copy
import logging
import sys
from collections import OrderedDict
from typing import Any

logger = logging.getLogger(__name__)

_ORIG: dict[str, Any] = {}
_PARSE_CACHE: dict[tuple[str, str | None], Any] = {}
_SAS_CACHE: OrderedDict[tuple[str, str, bool], Any] = OrderedDict()
SAS_CACHE_SIZE = 32


def _cached_parse(text: str, rule_name: str | None = None, trace: bool = False, **kw: Any) -> Any:
    if trace or kw:
        return _ORIG["parse"](text, rule_name=rule_name, trace=trace, **kw)
    key = (text, rule_name)
    if key not in _PARSE_CACHE:
        _PARSE_CACHE[key] = _ORIG["parse"](text, rule_name=rule_name, trace=False)
    return copy.deepcopy(_PARSE_CACHE[key])


def _cached_pddl2sas(domain: str, problem: str, verbose: bool = False, optimize: bool = False) -> Any:
    if verbose:
        return _ORIG["pddl2sas"](domain, problem, verbose=verbose, optimize=optimize)
    key = (domain, problem, bool(optimize))
    hit = _SAS_CACHE.get(key)
    if hit is not None:
        _SAS_CACHE.move_to_end(key)
        return hit
    argv = list(sys.argv)
    try:
        out = _ORIG["pddl2sas"](domain, problem, verbose=False, optimize=optimize)
    finally:
        sys.argv[:] = argv  # the translator overwrites sys.argv
    _SAS_CACHE[key] = out
    while len(_SAS_CACHE) > SAS_CACHE_SIZE:
        _SAS_CACHE.popitem(last=False)
    return out


def install() -> None:
    """Enable both memoizations in this process (idempotent)."""
    if _ORIG:
        return
    import fast_downward
    import textworld.envs.pddl.logic  # noqa: F401  (imports textgen and binds fast_downward)
    import textworld.envs.pddl.textgen as textgen

    _ORIG["parse"] = textgen._parse_and_convert
    _ORIG["pddl2sas"] = fast_downward.pddl2sas
    textgen._parse_and_convert = _cached_parse
    # textworld's logic module calls ``fast_downward.pddl2sas`` through the package attribute.
    fast_downward.pddl2sas = _cached_pddl2sas
    logger.debug("installed TextWorld PDDL memoizations")


def uninstall() -> None:
    """Restore the engine's original functions and drop the caches."""
    if not _ORIG:
        return
    import fast_downward
    import textworld.envs.pddl.textgen as textgen

    textgen._parse_and_convert = _ORIG.pop("parse")
    fast_downward.pddl2sas = _ORIG.pop("pddl2sas")
    _PARSE_CACHE.clear()
    _SAS_CACHE.clear()


def installed() -> bool:
    """Whether the memoizations are active."""
    return bool(_ORIG)


__all__ = ["SAS_CACHE_SIZE", "install", "installed", "uninstall"]
