"""The two engines an ALFWorld environment can play on, behind one small protocol.

``TextWorldEngine`` is alfworld's own: TextWorld's PDDL environment with alfworld's demangler, infos
and planner expert. ``NativeEngine`` is gaca's re-implementation of the same rules (``native``),
checked step for step against the TextWorld engine by the differential tests and about 1000x
faster. ``AlfworldEnv`` owns everything else (rewards, the step limit, ``info``), once.
"""

from __future__ import annotations

from typing import Any, Protocol

from gaca.envs.alfworld.games import GameRecord


class Engine(Protocol):
    """What ``AlfworldEnv`` needs from an engine."""

    def start(self, record: GameRecord) -> str:
        """Load ``record``'s game (when another one is loaded) and reset it; return its introduction."""
        ...

    def step(self, command: str) -> tuple[str, bool]:
        """Apply ``command``; return (feedback, the command was admissible)."""
        ...

    def admissible(self) -> list[str]:
        """The commands the engine accepts now, in its own order."""
        ...

    def won(self) -> bool: ...

    def expert_plan(self) -> list[str]:
        """The remaining expert plan from the current state (empty once won)."""
        ...

    def close(self) -> None: ...


class TextWorldEngine:
    """alfworld's TextWorld PDDL engine (``expert``: add the planner expert, re-planned every step)."""

    def __init__(self, *, expert: bool = False, memoize: bool = True) -> None:
        """``memoize``: cache TextWorld's template parsing and PDDL translation (the same text, faster;
        see ``speedups``)."""
        from gaca.envs.alfworld import speedups
        from gaca.envs.alfworld.generator import make_tw_env

        if memoize:
            speedups.install()
        self.expert = expert
        self._env: Any = make_tw_env(expert=expert)
        self._loaded: str | None = None
        self._state: Any = None

    def start(self, record: GameRecord) -> str:
        from gaca.envs.alfworld.generator import load_game

        if self._loaded != record.game_file:
            load_game(self._env, record.game_file)
            self._loaded = record.game_file
        self._state = self._env.reset()
        return self._state.feedback

    def step(self, command: str) -> tuple[str, bool]:
        valid = command in self._state["admissible_commands"]
        self._state, _, _ = self._env.step(command)
        return self._state.feedback, valid

    def admissible(self) -> list[str]:
        return list(self._state["admissible_commands"])

    def won(self) -> bool:
        return bool(self._state["won"])

    def expert_plan(self) -> list[str]:
        return list(self._state.get("extra.expert_plan") or [])

    def close(self) -> None:
        """Hand back the engine's copy of fast-downward's library (see ``generator.close_tw_env``)."""
        from gaca.envs.alfworld.generator import close_tw_env

        if self._env is not None:
            close_tw_env(self._env)
            self._env = None


class NativeEngine:
    """gaca's native ALFWorld engine (generated games only; see ``gaca.envs.alfworld.native``).

    Its expert follows the game's stored walkthrough while the episode does, and plans with the
    native task expert once the episode has left it.
    """

    def __init__(self, *, check_logic: bool = True) -> None:
        """``check_logic``: refuse games whose domain or grammar are not alfworld's bundled ones."""
        self.check_logic = check_logic
        self._game: Any = None
        self._state: Any = None
        self._history: list[str] = []

    def start(self, record: GameRecord) -> str:
        from gaca.envs.alfworld.native import FastState, load_game

        game = load_game(record.game_file, check=self.check_logic)
        if self._state is not None and self._game is game:
            self._state.reset()
        else:
            self._state = FastState(game)
        self._game = game
        self._history = []
        return self._state.intro()

    def step(self, command: str) -> tuple[str, bool]:
        feedback, valid = self._state.step(command)
        if valid:
            self._history.append(command)
        return feedback, valid

    def admissible(self) -> list[str]:
        return self._state.admissible()

    def won(self) -> bool:
        return bool(self._state.won)

    def expert_plan(self) -> list[str]:
        from gaca.envs.alfworld.native import expert_plan

        if self._state.won:
            return []
        walk, n = list(self._game.walkthrough), len(self._history)
        if walk and n < len(walk) and walk[:n] == self._history:
            return walk[n:]
        return expert_plan(self._state)

    def close(self) -> None:
        self._state = None


__all__ = ["Engine", "NativeEngine", "TextWorldEngine"]
