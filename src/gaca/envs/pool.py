"""A pool of text environments stepped in lock-step, in this process or on worker processes.

    spec = env_spec(AlfworldConfig(), "train", num_games=60)
    with EnvPool(spec, num_envs=8, num_workers=2) as pool:
        first = pool.reset([3] * 4 + [7] * 4)             # two groups of 4 copies (same seed)
        outcomes = pool.step(["look"] * 8)                 # StepOutcome per env; None where no action
        first = pool.reset([5] * 4 + [None] * 4)           # envs 4..7 sit this round out (None)

One pool, two backends behind one interface (``PoolBackend``): ``num_workers=0`` (or 1) keeps every
environment in this process; ``num_workers >= 2`` spreads them over that many worker processes
(started with ``spawn``: fork is unsafe with the C libraries the engines load), in contiguous blocks
(env i on worker ``i * num_workers // num_envs``), so the copies of a group usually share a worker
and its caches. ``EnvPool.from_envs(envs)`` wraps environments already built (in this process).

Fault tolerance: an environment that raises (any exception, ``SystemExit`` included) in ``reset``
or ``step``, or whose step takes longer than ``step_timeout`` seconds, ends its episode as failed
(a ``StepOutcome`` with ``terminated=True`` and ``error`` set; ``info["won"]`` False), the failure
is logged with the task id, the environment is rebuilt at the next ``reset``, and the other
environments continue, the same with either backend. On workers: when a worker process dies (an
engine's segfault, ``os._exit``) or is killed because one of its environments hung, the pool
knows which environment it was running, restarts the worker and restores every other environment
of that worker to its state by replaying its seed and actions (environments are deterministic
given both), so only the culprit's episode fails. A result that cannot be sent back to the
trainer fails that episode only. Workers ignore Ctrl-C (the trainer decides when to stop) and die
with the trainer (Linux: ``PR_SET_PDEATHSIG``). In this process a hung step is interrupted by
``SIGALRM`` when the pool runs in the main thread (a step stuck inside C code is interrupted only
when it returns to Python); an environment that kills its process takes the trainer with it:
use workers for such engines.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing as mp
import pickle
import signal
import threading
import time
import traceback
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from gaca.envs.base import TextEnv
from gaca.envs.config import EnvConfig
from gaca.envs.spec import EnvSpec, env_spec, prepare_envs

logger = logging.getLogger(__name__)

#: How often the trainer looks at a busy worker (seconds).
POLL_S = 0.02


@dataclass(frozen=True)
class StepOutcome:
    """What one environment answered to ``reset`` or ``step`` (gymnasium's tuple, typed, plus ``error``)."""

    observation: str
    info: dict[str, Any] = field(default_factory=dict)
    reward: float = 0.0
    terminated: bool = False
    """The episode ended by itself (won, lost for good, or crashed): no bootstrap."""
    truncated: bool = False
    """The step limit was reached."""
    error: str | None = None
    """Set when the environment failed (raised, hung, died): the episode ended as failed, with this message."""

    @property
    def done(self) -> bool:
        return self.terminated or self.truncated

    @classmethod
    def crashed(cls, task_id: str, message: str) -> StepOutcome:
        """The outcome of an environment that failed."""
        info = {"task": "", "task_id": task_id, "task_type": "", "admissible_actions": [], "won": False,
                "valid": False, "error": message}
        return cls("", info, 0.0, True, False, message)


class StepTimeout(Exception):
    """An environment's step took longer than the pool's ``step_timeout``."""


@contextlib.contextmanager
def _alarm(seconds: float | None) -> Iterator[None]:
    """Raise ``StepTimeout`` in this thread after ``seconds`` (main thread only; elsewhere no limit)."""
    if not seconds or threading.current_thread() is not threading.main_thread():
        yield
        return

    def ring(signum: int, frame: Any) -> None:
        raise StepTimeout(f"step timed out after {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class _Slot:
    """One environment and its episode (in a worker, or in this process)."""

    def __init__(self, index: int, build: Callable[[], TextEnv], env: TextEnv | None = None,
                 timeout: float | None = None) -> None:
        self.index, self.build, self.env, self.timeout = index, build, env, timeout
        self.task_id = "?"

    def fail(self, where: str, exc: BaseException) -> StepOutcome:
        msg = f"{type(exc).__name__}: {exc} (in {where})"
        logger.error("env %d (task %s) failed in %s: %s\n%s", self.index, self.task_id, where, msg,
                     traceback.format_exc())
        self.discard()
        return StepOutcome.crashed(self.task_id, msg)

    def discard(self) -> None:
        """Drop the environment (rebuilt at the next reset)."""
        if self.env is not None:
            try:
                self.env.close()
            except Exception:
                logger.debug("close after failure raised", exc_info=True)
        self.env = None

    def reset(self, seed: int) -> StepOutcome:
        self.task_id = f"seed={seed}"
        try:
            if self.env is None:
                self.env = self.build()
            with _alarm(self.timeout):
                obs, info = self.env.reset(seed=seed)
        except (Exception, SystemExit) as exc:
            return self.fail("reset", exc)
        self.task_id = str(info.get("task_id", self.task_id))
        return StepOutcome(obs, info)

    def step(self, action: str) -> StepOutcome:
        if self.env is None:
            raise RuntimeError(f"env {self.index}: stepped after its episode failed")
        try:
            with _alarm(self.timeout):
                obs, reward, terminated, truncated, info = self.env.step(action)
        except (Exception, SystemExit) as exc:
            return self.fail("step", exc)
        return StepOutcome(obs, info, float(reward), bool(terminated), bool(truncated))

    def replay(self, seed: int, actions: Sequence[str]) -> StepOutcome:
        """Reset with ``seed`` and take ``actions``: the state they lead to (the last outcome)."""
        outcome = self.reset(seed)
        for a in actions:
            if outcome.error or outcome.done:
                break
            outcome = self.step(a)
        return outcome

    def close(self) -> None:
        if self.env is not None:
            try:
                self.env.close()
            finally:
                self.env = None


class PoolBackend(ABC):
    """Where a pool's environments run. Every call names some environments by their index in the
    pool; the others sit it out. Whatever fails inside (an environment raising or hanging, a worker
    dying) comes back as that environment's failed ``StepOutcome``, never as an exception."""

    @abstractmethod
    def reset(self, seeds: Mapping[int, int]) -> dict[int, StepOutcome]:
        """Start env i's episode with ``seeds[i]``, for each i given; the outcome of each.

        An environment not given sits out: it has no episode until a later reset names it."""

    @abstractmethod
    def step(self, actions: Mapping[int, str]) -> dict[int, StepOutcome]:
        """Take ``actions[i]`` in env i's running episode, for each i given; the outcome of each."""

    @abstractmethod
    def close(self) -> None:
        """Close every environment (and stop the processes that run them)."""


class _InProcess(PoolBackend):
    """Backend: every slot in this process."""

    def __init__(self, slots: list[_Slot]) -> None:
        self.slots = slots

    def reset(self, seeds: Mapping[int, int]) -> dict[int, StepOutcome]:
        return {i: self.slots[i].reset(seed) for i, seed in seeds.items()}

    def step(self, actions: Mapping[int, str]) -> dict[int, StepOutcome]:
        return {i: self.slots[i].step(action) for i, action in actions.items()}

    def close(self) -> None:
        for s in self.slots:
            s.close()


#: A running episode as the worker backend tracks it: (seed, actions so far), what replays it.
_Episode: TypeAlias = tuple[int, tuple[str, ...]]


@dataclass(frozen=True)
class _Reset:
    """Command to one slot: start the episode of ``seed``."""

    seed: int

    def apply(self, slot: _Slot) -> StepOutcome:
        return slot.reset(self.seed)

    def after(self, episode: _Episode | None) -> _Episode | None:
        """The slot's episode once this command has run (before its outcome is known)."""
        return (self.seed, ())


@dataclass(frozen=True)
class _Step:
    """Command to one slot: take ``action`` in its running episode."""

    action: str

    def apply(self, slot: _Slot) -> StepOutcome:
        return slot.step(self.action)

    def after(self, episode: _Episode | None) -> _Episode | None:
        """The slot's episode once this command has run (before its outcome is known)."""
        return None if episode is None else (episode[0], (*episode[1], self.action))


@dataclass(frozen=True)
class _Replay:
    """Command to one slot: restore an episode (reset with ``seed``, take ``actions``) after a worker restart."""

    seed: int
    actions: tuple[str, ...]

    def apply(self, slot: _Slot) -> StepOutcome:
        return slot.replay(self.seed, self.actions)

    def after(self, episode: _Episode | None) -> _Episode | None:
        """The slot's episode once this command has run (before its outcome is known)."""
        return (self.seed, self.actions)


#: What the trainer sends a worker: a command for each of some of its slots (pool-wide env index),
#: or None to stop the worker.
_Commands: TypeAlias = list[tuple[int, _Reset | _Step | _Replay]]


def _die_with_parent() -> None:
    """Ask Linux to kill this process when the trainer dies (no orphaned workers)."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _sendable(outcomes: list[Any], slots: dict[int, _Slot], payload: _Commands) -> list[Any]:
    """``outcomes`` with every one that cannot be pickled replaced by a failure of its episode."""
    out = []
    for (i, _), o in zip(payload, outcomes, strict=True):
        try:
            pickle.dumps(o)
            out.append(o)
        except Exception as exc:
            out.append(slots[i].fail("sending its result", exc))
    return out


def _worker(conn: Any, specs: list[tuple[int, EnvSpec]], busy: Any, log_level: int, timeout: float | None) -> None:
    """Worker loop: receive ``_Commands`` (None: stop), apply each to its slot, send back the outcomes.

    ``busy`` (shared) holds the env being run and since when, so the trainer can tell which one hung
    or killed the process.
    """
    _die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    logging.basicConfig(level=log_level)
    slots = {i: _Slot(i, spec.build, timeout=timeout) for i, spec in specs}  # keyed by the pool-wide env index
    try:
        while True:
            payload: _Commands | None = conn.recv()
            if payload is None:
                break
            outcomes = []
            for i, command in payload:
                busy[0], busy[1] = i, time.monotonic()
                outcomes.append(command.apply(slots[i]))
            busy[0] = -1
            try:
                conn.send(outcomes)
            except (pickle.PicklingError, TypeError, AttributeError):
                conn.send(_sendable(outcomes, slots, payload))
    except (EOFError, OSError):
        pass
    finally:
        for slot in slots.values():
            with contextlib.suppress(Exception):
                slot.close()
        conn.close()


class _Workers(PoolBackend):
    """Backend: slots spread over worker processes in contiguous blocks."""

    def __init__(self, specs: list[EnvSpec], num_workers: int, start_method: str, timeout: float | None) -> None:
        try:
            pickle.dumps(specs[0])
        except Exception as exc:
            raise ValueError(f"environment {specs[0].config.name!r} cannot be sent to worker processes ({exc}); "
                             "register its factory from an importable module, or use env.num_workers=0") from exc
        self.specs, self.num_workers, self.timeout = specs, num_workers, timeout
        # the worker interrupts a hung step itself (SIGALRM) when it hangs in Python; past this, it is killed
        self._kill_after = timeout + max(1.0, 0.5 * timeout) if timeout else 0.0
        self.owner = [i * num_workers // len(specs) for i in range(len(specs))]
        self.task_ids = ["?"] * len(specs)
        self.episodes: list[_Episode | None] = [None] * len(specs)
        """Per env, the running episode's (seed, actions so far): what restores it after a worker restart."""
        self._ctx = mp.get_context(start_method)
        self._procs: list[Any] = [None] * num_workers
        self._conns: list[Any] = [None] * num_workers
        self._busy: list[Any] = [None] * num_workers
        for w in range(num_workers):
            self._start(w)

    def _start(self, w: int) -> None:
        parent, child = self._ctx.Pipe()
        busy = self._ctx.Array("d", [-1.0, 0.0], lock=False)
        specs = [(i, s) for i, s in enumerate(self.specs) if self.owner[i] == w]
        proc = self._ctx.Process(target=_worker, args=(child, specs, busy, logging.getLogger().level, self.timeout),
                                 name=f"gaca-envpool-{w}", daemon=True)
        proc.start()
        child.close()
        self._procs[w], self._conns[w], self._busy[w] = proc, parent, busy

    def _stop(self, w: int) -> None:
        proc = self._procs[w]
        if proc is not None and proc.is_alive():
            proc.kill()
        if proc is not None:
            proc.join(timeout=5)
        if self._conns[w] is not None:
            self._conns[w].close()
        self._procs[w] = self._conns[w] = None

    def _answer(self, w: int) -> tuple[list[Any] | None, int, str]:
        """Wait for worker ``w``'s answer; on failure (None, culprit env or -1, message)."""
        conn, proc, busy = self._conns[w], self._procs[w], self._busy[w]
        while True:
            if conn.poll(POLL_S):
                try:
                    return conn.recv(), -1, ""
                except (EOFError, ConnectionResetError, OSError):
                    break
            if not proc.is_alive():
                break
            current = int(busy[0])
            if self.timeout and current >= 0 and time.monotonic() - busy[1] > self._kill_after:
                return None, current, f"step timed out after {self.timeout:g} s (the environment was restarted)"
        proc.join(timeout=1)
        return None, int(busy[0]), f"env worker died (exit code {proc.exitcode})"

    def _recover(self, w: int, payload: _Commands, culprit: int, message: str) -> dict[int, StepOutcome]:
        """Restart worker ``w`` after it failed ``payload``; fail the culprit's episode (every episode of
        ``payload`` when no env was running); restore every other running episode by replay."""
        logger.error("env worker %d: %s; culprit env %s (task %s)", w, message, culprit,
                     self.task_ids[culprit] if culprit >= 0 else "?")
        self._stop(w)
        self._start(w)
        out: dict[int, StepOutcome] = {}
        if culprit < 0:  # no env was running: the whole command is lost, fail its episodes
            for i, _ in payload:
                out[i] = StepOutcome.crashed(self.task_ids[i], message)
                self.episodes[i] = None
            return out
        out[culprit] = StepOutcome.crashed(self.task_ids[culprit], message)
        self.episodes[culprit] = None
        replays: _Commands = []
        commands = dict(payload)
        for i in (j for j in range(len(self.specs)) if self.owner[j] == w and j != culprit):
            # where env i should be: its episode with the lost command applied (if it had one)
            episode = commands[i].after(self.episodes[i]) if i in commands else self.episodes[i]
            if episode is not None:
                replays.append((i, _Replay(*episode)))
        if replays:
            self._conns[w].send(replays)
            answers, _, why = self._answer(w)
            if answers is None:  # the replay itself failed: give up on this worker's episodes
                lost = self._recover(w, replays, -1, why)
                return {**out, **{i: o for i, o in lost.items() if i in commands}}
            for (i, _), outcome in zip(replays, answers, strict=True):
                if i in commands:
                    out[i] = outcome
                elif outcome.error or outcome.done:  # a restored bystander that could not be restored
                    self.episodes[i] = None
        return out

    def reset(self, seeds: Mapping[int, int]) -> dict[int, StepOutcome]:
        for i in range(len(self.specs)):
            if i not in seeds:  # sits out: its last episode, if any, is abandoned (never replayed)
                self.episodes[i] = None
        return self._run({i: _Reset(seed) for i, seed in seeds.items()})

    def step(self, actions: Mapping[int, str]) -> dict[int, StepOutcome]:
        return self._run({i: _Step(action) for i, action in actions.items()})

    def _run(self, commands: dict[int, _Reset | _Step]) -> dict[int, StepOutcome]:
        """Send every worker its share first, then collect (the workers run in parallel)."""
        by_worker: dict[int, _Commands] = {}
        for i, command in commands.items():
            by_worker.setdefault(self.owner[i], []).append((i, command))
        out: dict[int, StepOutcome] = {}
        sent: list[int] = []
        for w, payload in by_worker.items():
            if self._procs[w] is None or not self._procs[w].is_alive():
                out.update(self._recover(w, payload, -1, "env worker process is not running"))
                continue
            try:
                self._conns[w].send(payload)
                sent.append(w)
            except (BrokenPipeError, OSError) as exc:
                out.update(self._recover(w, payload, -1, f"env worker unreachable: {exc}"))
        for w in sent:
            payload = by_worker[w]
            answers, culprit, message = self._answer(w)
            if answers is None:
                out.update(self._recover(w, payload, culprit, message))
                continue
            out.update({i: a for (i, _), a in zip(payload, answers, strict=True)})
        for i, command in commands.items():
            self._track(i, command, out[i])
        return out

    def _track(self, i: int, command: _Reset | _Step, outcome: StepOutcome) -> None:
        """Keep env i's running episode (seed, actions) up to date after ``command`` answered ``outcome``."""
        self.task_ids[i] = str(outcome.info.get("task_id", self.task_ids[i]))
        self.episodes[i] = None if outcome.done or outcome.error else command.after(self.episodes[i])

    def close(self) -> None:
        for w in range(self.num_workers):
            if self._procs[w] is not None and self._procs[w].is_alive():
                with contextlib.suppress(BrokenPipeError, OSError):
                    self._conns[w].send(None)
        for w in range(self.num_workers):
            p = self._procs[w]
            if p is not None:
                p.join(timeout=10)
                if p.is_alive():
                    p.kill()
                    p.join(timeout=5)
            if self._conns[w] is not None:
                self._conns[w].close()


class EnvPool:
    """``num_envs`` text environments stepped in lock-step (see module docstring)."""

    def __init__(self, specs: EnvSpec | Sequence[EnvSpec], num_envs: int | None = None, *, num_workers: int = 0,
                 step_timeout: float | None = None, start_method: str = "spawn") -> None:
        """
        Args:
          specs: one ``EnvSpec`` for every environment, or one per environment.
          num_envs: how many environments (with one spec; default: one per spec).
          num_workers: worker processes (0 or 1: in this process).
          step_timeout: seconds a ``reset`` or ``step`` may take before its episode fails (None: no limit).
          start_method: multiprocessing start method of the workers.
        """
        spec_list = [specs] * (num_envs or 0) if isinstance(specs, EnvSpec) else list(specs)
        if num_envs is not None and len(spec_list) != num_envs:
            raise ValueError(f"{len(spec_list)} env specs for {num_envs} envs")
        if not spec_list:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        if num_workers < 0:
            raise ValueError(f"num_workers must be >= 0, got {num_workers}")
        if step_timeout is not None and not step_timeout > 0:
            raise ValueError(f"step_timeout must be > 0 or None, got {step_timeout}")
        workers = min(num_workers, len(spec_list))
        backend = (_Workers(spec_list, workers, start_method, step_timeout) if workers >= 2
                   else _InProcess([_Slot(i, s.build, timeout=step_timeout) for i, s in enumerate(spec_list)]))
        self._init(backend, len(spec_list), spec_list[0].max_steps, spec_list[0].intro)
        self.num_workers = workers if workers >= 2 else 0

    @classmethod
    def for_split(cls, config: EnvConfig, split: str, num_envs: int, *, num_games: int | None = None,
                  expert: bool = False) -> EnvPool:
        """``num_envs`` environments of ``config`` on ``split``, on ``config.num_workers`` workers.

        What the split's environments share (ALFWorld's games) is built here first, once.
        """
        spec = env_spec(config, split, num_games, expert=expert)
        prepare_envs(spec)
        return cls(spec, num_envs, num_workers=config.num_workers, step_timeout=config.step_timeout)

    @classmethod
    def from_envs(cls, envs: Sequence[TextEnv], *, intro: str = EnvConfig.intro,
                  step_timeout: float | None = None) -> EnvPool:
        """A pool over environments already built (in this process); ``intro`` is their prompt introduction."""
        if not envs:
            raise ValueError("EnvPool.from_envs needs at least one environment")

        def keep(env: TextEnv) -> Callable[[], TextEnv]:
            return lambda: env

        pool = cls.__new__(cls)
        slots = [_Slot(i, keep(e), e, timeout=step_timeout) for i, e in enumerate(envs)]
        pool._init(_InProcess(slots), len(envs), max(int(e.max_steps) for e in envs), intro)
        pool.num_workers = 0
        return pool

    def _init(self, backend: PoolBackend, num_envs: int, max_steps: int, intro: str) -> None:
        self._backend = backend
        self.num_envs = num_envs
        self.max_steps = max_steps
        """The environments' step limit (the episode driver stops there too)."""
        self.intro = intro
        """The environments' prompt introduction (``EnvConfig.intro``)."""
        self._done = [True] * num_envs
        self._closed = False

    def reset(self, seeds: Sequence[int | None]) -> list[StepOutcome | None]:
        """Reset env i with ``seeds[i]`` (a group: the same seed repeated); one outcome per env.

        An env whose seed is None sits this round out: it is not reset, its outcome is None, and it
        takes no action until a later reset gives it a seed.
        """
        self._check_open()
        if len(seeds) != self.num_envs:
            raise ValueError(f"{len(seeds)} seeds for {self.num_envs} envs")
        res = self._backend.reset({i: int(s) for i, s in enumerate(seeds) if s is not None})
        out = [res.get(i) for i in range(self.num_envs)]
        self._done = [o is None or o.done for o in out]
        return out

    def step(self, actions: Sequence[str | None]) -> list[StepOutcome | None]:
        """Step every env with its action; None for an env that sits out (its result is None).

        An action for an environment whose episode has ended (or that sat out the reset) is an error.
        """
        self._check_open()
        if len(actions) != self.num_envs:
            raise ValueError(f"{len(actions)} actions for {self.num_envs} envs")
        for i, a in enumerate(actions):
            if a is not None and self._done[i]:
                raise RuntimeError(f"env {i}: action {a!r} for an episode that already ended (or never started)")
        res = self._backend.step({i: a for i, a in enumerate(actions) if a is not None})
        out: list[StepOutcome | None] = [None] * self.num_envs
        for i, outcome in res.items():
            out[i] = outcome
            self._done[i] = outcome.done
        return out

    def close(self) -> None:
        """Stop the workers (or close the in-process envs). Idempotent."""
        if not self._closed:
            self._closed = True
            self._backend.close()

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("EnvPool is closed")

    def __enter__(self) -> EnvPool:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


__all__ = ["EnvPool", "PoolBackend", "StepOutcome", "StepTimeout"]
