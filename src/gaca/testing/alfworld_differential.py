"""Differential testing of the native engine against alfworld's TextWorld one (tests and benchmarks).

``compare_episode(real, fast, seed, policy)`` plays the same episode on both ``TextEnv``s, with the
actions ``policy`` picks from the *real* engine's observation and info, and returns the list of
:class:`Mismatch`es (empty when every step agrees on observation text, admissible actions and
their order, reward, terminated, truncated, ``won`` and ``valid``).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Policy = Callable[[int, str, dict[str, Any]], str]
#: Fields compared at every step.
FIELDS = ("obs", "admissible_actions", "reward", "terminated", "truncated", "won", "valid")


@dataclass(frozen=True)
class Mismatch:
    """One field that differs at one step (step 0 is the reset)."""

    seed: int
    step: int
    action: str | None
    field: str
    real: Any
    fast: Any

    def __str__(self) -> str:
        return (f"seed {self.seed} step {self.step} after {self.action!r}: {self.field} differs\n"
                f"  real: {self.real!r}\n  fast: {self.fast!r}")


def engine_pair(games: Any, *, max_steps: int = 50, expert: bool = False,
                hide_actions: tuple[str, ...] = ("help",)) -> tuple[Any, Any]:
    """The same games on alfworld's TextWorld engine (the reference) and on the native engine."""
    from gaca.envs.alfworld import AlfworldEnv, NativeEngine, TextWorldEngine

    kwargs = {"max_steps": max_steps, "expert": expert, "hide_actions": hide_actions}
    return (AlfworldEnv(games, TextWorldEngine(expert=expert), **kwargs),
            AlfworldEnv(games, NativeEngine(), **kwargs))


def _view(obs: str, info: dict[str, Any], reward: float = 0.0, terminated: bool = False,
          truncated: bool = False) -> dict[str, Any]:
    return {"obs": obs, "admissible_actions": list(info["admissible_actions"]), "reward": reward,
            "terminated": terminated, "truncated": truncated, "won": info["won"], "valid": info["valid"]}


def _diff(seed: int, step: int, action: str | None, a: dict[str, Any], b: dict[str, Any]) -> list[Mismatch]:
    return [Mismatch(seed, step, action, k, a[k], b[k]) for k in FIELDS if a[k] != b[k]]


def compare_episode(real: Any, fast: Any, seed: int, policy: Policy, max_steps: int = 50,
                    log: list[dict[str, Any]] | None = None) -> list[Mismatch]:
    """Play ``reset(seed)`` then up to ``max_steps`` actions of ``policy`` on both engines.

    ``log``, if given, receives the fast engine's view of every step (the ``FIELDS``).
    """
    obs_r, info_r = real.reset(seed=seed)
    obs_f, info_f = fast.reset(seed=seed)
    view_f = _view(obs_f, info_f)
    out = _diff(seed, 0, None, _view(obs_r, info_r), view_f)
    if log is not None:
        log.append(view_f)
    for t in range(1, max_steps + 1):
        action = policy(t, obs_r, info_r)
        obs_r, rew_r, term_r, trunc_r, info_r = real.step(action)
        obs_f, rew_f, term_f, trunc_f, info_f = fast.step(action)
        view_f = _view(obs_f, info_f, rew_f, term_f, trunc_f)
        out += _diff(seed, t, action, _view(obs_r, info_r, rew_r, term_r, trunc_r), view_f)
        if log is not None:
            log.append(view_f)
        if out or term_r or trunc_r or term_f or trunc_f:
            break
    return out


def plan_policy(plan: list[str] | tuple[str, ...]) -> Policy:
    """Replay ``plan`` (then ``look``)."""
    def act(t: int, obs: str, info: dict[str, Any]) -> str:
        return plan[t - 1] if t - 1 < len(plan) else "look"
    return act


#: Commands that are never admissible (exercise "Nothing happens.").
INVALID = ("jump", "go to the moon", "take nothing from nowhere", "open door 1", "")


def random_policy(seed: int, invalid_prob: float = 0.05, help_prob: float = 0.02) -> Policy:
    """Uniform over the real engine's admissible actions; sometimes ``help`` or an invalid command."""
    rng = random.Random(f"gaca-alfworld-fast-walk|{seed}")

    def act(t: int, obs: str, info: dict[str, Any]) -> str:
        u = rng.random()
        if u < invalid_prob:
            return rng.choice(INVALID)
        if u < invalid_prob + help_prob:
            return "help"
        return rng.choice(info["admissible_actions"]) if info["admissible_actions"] else "look"
    return act


#: Weights of the rarely admissible verbs in ``busy_policy``.
_RARE = {"clean": 8.0, "heat": 8.0, "cool": 8.0, "slice": 8.0, "use": 8.0, "take": 2.0, "move": 2.0}


def busy_policy(seed: int, goto_weight: float = 0.25, invalid_prob: float = 0.03) -> Policy:
    """Like ``random_policy`` but ``go to`` commands weigh ``goto_weight``, every other command 1.

    A uniform walk spends most steps walking (there are 10-40 ``go to`` commands); this one opens,
    takes, puts, heats, cleans, cools, slices, uses and examines far more often (``_RARE`` weighs
    the rarest verbs up).
    """
    rng = random.Random(f"gaca-alfworld-fast-busy|{seed}")

    def act(t: int, obs: str, info: dict[str, Any]) -> str:
        if rng.random() < invalid_prob:
            return rng.choice(INVALID)
        acts = info["admissible_actions"] or ["look"]
        weights = [goto_weight if a.startswith("go to ") else _RARE.get(a.split(" ", 1)[0], 1.0) for a in acts]
        return rng.choices(acts, weights=weights, k=1)[0]
    return act


_APPLIANCE_VERBS = ("heat", "cool", "clean", "slice")
_APPLIANCES = ("go to microwave", "go to fridge", "go to sinkbasin")


def tour_policy(seed: int) -> Policy:
    """Carry things to the appliances and back: heat, cool, clean, slice, then examine the result.

    Exercises every state-dependent ``examineObject`` text (hot/cool/clean/sliced combinations) far
    more often than a walk: takes when the hands are empty, applies each appliance command it has
    not used yet, examines the held object after every change, heads for a microwave, fridge or sink
    basin otherwise, and moves things on now and then.
    """
    rng = random.Random(f"gaca-alfworld-fast-tour|{seed}")
    used: set[str] = set()
    held: list[str] = [""]
    examine_next: list[bool] = [False]

    def act(t: int, obs: str, info: dict[str, Any]) -> str:
        acts = info["admissible_actions"] or ["look"]
        if obs.startswith("You pick up the "):
            held[0] = obs[len("You pick up the "):].split(" from the ")[0]
        elif obs.startswith("You move the "):
            held[0] = ""
        if examine_next[0] and held[0] and f"examine {held[0]}" in acts:
            examine_next[0] = False
            return f"examine {held[0]}"
        fresh = [a for a in acts if a.split(" ", 1)[0] in _APPLIANCE_VERBS and a not in used]
        if fresh:
            a = rng.choice(fresh)
            used.add(a)
            examine_next[0] = True
            return a
        takes = [a for a in acts if a.startswith("take ")]
        if takes and not held[0]:
            knives = [a for a in takes if "knife" in a]
            return rng.choice(knives or takes)
        u = rng.random()
        moves = [a for a in acts if a.startswith("move ")]
        if moves and u < 0.15:
            return rng.choice(moves)
        opens = [a for a in acts if a.startswith("open ")]
        if opens and u < 0.5:
            return rng.choice(opens)
        goto = [a for a in acts if a.startswith(_APPLIANCES)]
        if goto and u < 0.7:
            return rng.choice(goto)
        return rng.choice(acts)
    return act


__all__ = [
    "FIELDS",
    "INVALID",
    "Mismatch",
    "busy_policy",
    "compare_episode",
    "engine_pair",
    "plan_policy",
    "random_policy",
    "tour_policy",
]
