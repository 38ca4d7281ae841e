"""The episode driver: the one loop that steps episodes, for every caller.

    batch = play_episodes(pool, seeds, agent)          # one episode per seed, batched over the pool
    for episode in batch.episodes: episode.won, episode.steps[t].decision.action, ...

Training rollouts, expert play, evaluation and the lab's continuations are all this loop with a
different ``Agent``: at every step the agent sees the ``Turn`` of each running episode at once (one
batched model call per step for a policy) and answers one ``Decision`` each; the driver sends the
actions to the pool, records a ``Step`` per turn, and stops an episode when the environment ends
it or at ``max_steps``. Seeds beyond the pool's size run in successive chunks (the environments a
last, smaller chunk does not need sit it out). A state is restored by replaying an action prefix
(``ReplayAgent``): environments are deterministic given (seed, actions). Model-free: agents may
hold models, the driver does not know.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from gaca.envs.pool import EnvPool, StepOutcome


@dataclass(frozen=True)
class Turn:
    """What an agent sees at one step of one episode."""

    episode: int
    """Index of the episode in this ``play_episodes`` call (its position in ``seeds``)."""
    seed: int
    step: int
    """0-based index of this step in the episode."""
    observation: str
    info: dict[str, Any]
    """The environment's info before this step (``task``, ``admissible_actions``, …)."""
    history: tuple[tuple[str, str], ...]
    """Every earlier (observation, action) pair of the episode, oldest first."""

    @property
    def task(self) -> str:
        return str(self.info.get("task", ""))

    @property
    def admissible_actions(self) -> list[str]:
        return list(self.info.get("admissible_actions", []))


@dataclass(frozen=True)
class Decision:
    """An agent's answer to one turn."""

    action: str
    """The text sent to the environment."""
    well_formed: bool = True
    """The agent's response followed the expected format (a policy's parse result)."""
    payload: Any = None
    """Whatever the agent wants kept with the step (a policy's sampled tokens, an expert's detour flag)."""


class Agent(Protocol):
    """Anything that answers a batch of turns with one decision each, in order."""

    def act(self, turns: Sequence[Turn]) -> list[Decision]: ...


@dataclass(frozen=True)
class Step:
    """One recorded step: the turn, the decision, and what the environment answered."""

    turn: Turn
    decision: Decision
    outcome: StepOutcome
    order: int
    """Position of this step in the order the whole call took its steps (step-major, then episode)."""

    @property
    def invalid(self) -> bool:
        """The response was malformed or the environment did not accept the action."""
        return (not self.decision.well_formed) or (not bool(self.outcome.info.get("valid", True)))


@dataclass
class Episode:
    """One episode: where it started and every step taken."""

    index: int
    seed: int
    first: StepOutcome
    """The reset's outcome (initial observation and info)."""
    steps: list[Step] = field(default_factory=list)
    truncated: bool = False
    """Ended by a step limit (the environment's or the driver's) rather than by itself."""
    history: list[tuple[str, str]] = field(default_factory=list, repr=False)
    """(observation, action) of every step so far, oldest first."""

    @property
    def task(self) -> str:
        return str(self.first.info.get("task", ""))

    @property
    def task_id(self) -> str:
        return str(self.first.info.get("task_id", ""))

    @property
    def task_type(self) -> str:
        return str(self.first.info.get("task_type", ""))

    @property
    def last(self) -> StepOutcome:
        return self.steps[-1].outcome if self.steps else self.first

    @property
    def done(self) -> bool:
        return self.last.done

    @property
    def error(self) -> str | None:
        """The environment crashed (the episode ended as failed with this message)."""
        return self.last.error

    @property
    def won(self) -> bool:
        return any(bool(s.outcome.info.get("won", False)) for s in self.steps)

    @property
    def length(self) -> int:
        return len(self.steps)

    @property
    def env_return(self) -> float:
        """Sum of the environment's rewards."""
        return sum(s.outcome.reward for s in self.steps)

    @property
    def invalid(self) -> int:
        return sum(s.invalid for s in self.steps)

    def turn(self, step: int) -> Turn:
        """The turn the agent gets now."""
        current = self.last
        return Turn(self.index, self.seed, step, current.observation, current.info, tuple(self.history))

    def record(self, step: Step) -> None:
        """Append a step taken from this episode's current turn."""
        self.steps.append(step)
        self.history.append((step.turn.observation, step.decision.action))
        self.truncated = step.outcome.truncated and not step.outcome.terminated


@dataclass
class EpisodeBatch:
    """What ``play_episodes`` returns."""

    episodes: list[Episode]
    """One per seed, in the order of the seeds."""
    env_seconds: float = 0.0
    """Time spent in the pool's ``reset`` and ``step``."""

    def steps(self) -> list[Step]:
        """Every step of every episode, in the order they were taken."""
        return sorted((s for e in self.episodes for s in e.steps), key=lambda s: s.order)


def play_episodes(pool: EnvPool, seeds: Sequence[int], agent: Agent, *, max_steps: int | None = None) -> EpisodeBatch:
    """Play one episode per seed with ``agent``, batched over the pool's environments.

    Args:
      pool: the environments (a seed's episode runs on one of them; chunks of ``pool.num_envs``).
      seeds: one environment seed per episode (a group: the same seed repeated).
      agent: answers each step's running turns at once, in the order given.
      max_steps: cap on an episode's steps (default ``pool.max_steps``, the environments' own limit).
    Returns:
      ``EpisodeBatch``; an episode still running at the cap is marked ``truncated``.
    """
    if not seeds:
        raise ValueError("play_episodes needs at least one seed")
    limit = pool.max_steps if max_steps is None else max_steps
    episodes: list[Episode] = []
    env_s = 0.0
    order = 0
    for start in range(0, len(seeds), pool.num_envs):
        chunk = [int(s) for s in seeds[start : start + pool.num_envs]]
        t0 = time.perf_counter()
        firsts = pool.reset([*chunk, *[None] * (pool.num_envs - len(chunk))])  # the spare envs sit out
        env_s += time.perf_counter() - t0
        running = [Episode(start + k, s, _outcome(firsts, k)) for k, s in enumerate(chunk)]
        for t in range(limit):
            active = [k for k, e in enumerate(running) if not e.done]
            if not active:
                break
            turns = [running[k].turn(t) for k in active]
            decisions = agent.act(turns)
            if len(decisions) != len(turns):
                raise RuntimeError(f"agent answered {len(decisions)} decisions for {len(turns)} turns")
            actions: list[str | None] = [None] * pool.num_envs
            for k, d in zip(active, decisions, strict=True):
                actions[k] = d.action
            t0 = time.perf_counter()
            outcomes = pool.step(actions)
            env_s += time.perf_counter() - t0
            for k, turn, d in zip(active, turns, decisions, strict=True):
                running[k].record(Step(turn, d, _outcome(outcomes, k), order))
                order += 1
        for e in running:
            if not e.done:
                e.truncated = True
        episodes.extend(running)
    return EpisodeBatch(episodes, env_s)


def _outcome(outcomes: Sequence[StepOutcome | None], k: int) -> StepOutcome:
    """Environment k's outcome, which the pool owes a running episode."""
    outcome = outcomes[k]
    if outcome is None:
        raise RuntimeError(f"env pool returned no result for running environment {k}")
    return outcome


class ReplayAgent:
    """Replays a fixed action prefix per episode, then hands the turns over to ``then``.

    Restores the state after ``prefixes[e]`` in episode e (environments are deterministic given the
    seed and the actions), so that ``then`` continues from there; one ``then.act`` call per step for
    all episodes past their prefix. Replayed steps carry ``payload = ReplayAgent.REPLAYED``.
    """

    REPLAYED = "replayed"

    def __init__(self, prefixes: Sequence[Sequence[str]], then: Agent) -> None:
        self.prefixes = [list(p) for p in prefixes]
        self.then = then

    def act(self, turns: Sequence[Turn]) -> list[Decision]:
        out: list[Decision | None] = [None] * len(turns)
        live = []
        for j, turn in enumerate(turns):
            prefix = self.prefixes[turn.episode]
            if turn.step < len(prefix):
                out[j] = Decision(prefix[turn.step], payload=self.REPLAYED)
            else:
                live.append(j)
        if live:
            for j, d in zip(live, self.then.act([turns[j] for j in live]), strict=True):
                out[j] = d
        return out  # type: ignore[return-value]


__all__ = ["Agent", "Decision", "Episode", "EpisodeBatch", "ReplayAgent", "Step", "Turn", "play_episodes"]
