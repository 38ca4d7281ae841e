"""A pool of text environments stepped in lock-step, in this process or on worker processes.

    spec = env_spec(AlfworldConfig(), "train", num_games=60)
    with EnvPool(spec, num_envs=8, num_workers=2) as pool:
        first = pool.reset([3] * 4 + [7] * 4)             # two groups of 4 copies (same seed)
        outcomes = pool.step(["look"] * 8)                 # StepOutcome per env; None where no action

One pool, two backends: ``num_workers=0`` (or 1) keeps every environment in this process;
``num_workers >= 2`` spreads them over that many worker processes (started with ``spawn``: fork is
unsafe with the C libraries the engines load), in contiguous blocks (env i on worker
``i * num_workers // num_envs``), so the copies of a group usually share a worker and its caches.
``EnvPool.from_envs(envs)`` wraps environments already built (in this process).

Fault tolerance, the same with either backend: an environment that raises in ``reset`` or
``step`` ends its episode as failed (a ``StepOutcome`` with ``terminated=True`` and ``error`` set;
``info["won"]`` False), the error is logged with the task id, the environment is rebuilt at the
next ``reset``, and the other environments continue. A worker process that dies fails the episodes
of its environments the same way and is restarted at the next ``reset``.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import pickle
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gaca.envs.base import TextEnv
from gaca.envs.config import EnvConfig
from gaca.envs.registry import EnvSpec, env_spec, prepare_envs

logger = logging.getLogger(__name__)


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
    """Set when the environment crashed: the episode ended as failed, with this message."""

    @property
    def done(self) -> bool:
        return self.terminated or self.truncated

    @classmethod
    def crashed(cls, task_id: str, message: str) -> StepOutcome:
        """The outcome of an environment that raised (or whose worker died)."""
        info = {"task": "", "task_id": task_id, "task_type": "", "admissible_actions": [], "won": False,
                "valid": False, "error": message}
        return cls("", info, 0.0, True, False, message)


class _Slot:
    """One environment and its episode bookkeeping (in a worker, or in this process)."""

    def __init__(self, index: int, build: Callable[[], TextEnv], env: TextEnv | None = None) -> None:
        self.index, self.build, self.env = index, build, env
        self.task_id = "?"

    def _fail(self, where: str, exc: BaseException) -> StepOutcome:
        msg = f"{type(exc).__name__}: {exc}"
        logger.error("env %d (task %s) raised in %s: %s\n%s", self.index, self.task_id, where, msg,
                     traceback.format_exc())
        if self.env is not None:
            try:
                self.env.close()
            except Exception:
                logger.debug("close after failure raised", exc_info=True)
        self.env = None  # rebuilt at the next reset
        return StepOutcome.crashed(self.task_id, msg)

    def reset(self, seed: int) -> StepOutcome:
        self.task_id = f"seed={seed}"
        try:
            if self.env is None:
                self.env = self.build()
            obs, info = self.env.reset(seed=seed)
        except Exception as exc:
            return self._fail("reset", exc)
        self.task_id = str(info.get("task_id", self.task_id))
        return StepOutcome(obs, info)

    def step(self, action: str) -> StepOutcome:
        if self.env is None:
            raise RuntimeError(f"env {self.index}: stepped after its episode crashed")
        try:
            obs, reward, terminated, truncated, info = self.env.step(action)
        except Exception as exc:
            return self._fail("step", exc)
        return StepOutcome(obs, info, float(reward), bool(terminated), bool(truncated))

    def close(self) -> None:
        if self.env is not None:
            try:
                self.env.close()
            finally:
                self.env = None


class _InProcess:
    """Backend: every slot in this process."""

    def __init__(self, slots: list[_Slot]) -> None:
        self.slots = slots

    def run(self, cmd: str, items: list[tuple[int, Any]]) -> dict[int, StepOutcome]:
        return {i: getattr(self.slots[i], cmd)(x) for i, x in items}

    def close(self) -> None:
        for s in self.slots:
            s.close()


def _worker(conn: Any, specs: list[tuple[int, EnvSpec]], log_level: int) -> None:
    """Worker loop: ("reset", [(slot, seed)]) | ("step", [(slot, action)]) | ("close", None)."""
    logging.basicConfig(level=log_level)
    slots = {i: _Slot(i, spec.build) for i, spec in specs}  # keyed by the pool-wide env index
    try:
        while True:
            cmd, payload = conn.recv()
            if cmd == "close":
                break
            conn.send([getattr(slots[i], cmd)(x) for i, x in payload])
    except (EOFError, KeyboardInterrupt):
        pass
    finally:
        for slot in slots.values():
            slot.close()
        conn.close()


class _Workers:
    """Backend: slots spread over worker processes in contiguous blocks."""

    def __init__(self, specs: list[EnvSpec], num_workers: int, start_method: str) -> None:
        try:
            pickle.dumps(specs[0])
        except Exception as exc:
            raise ValueError(f"environment {specs[0].config.name!r} cannot be sent to worker processes ({exc}); "
                             "register its factory from an importable module, or use env.num_workers=0") from exc
        self.specs, self.num_workers = specs, num_workers
        self.owner = [i * num_workers // len(specs) for i in range(len(specs))]
        self.task_ids = ["?"] * len(specs)
        self._ctx = mp.get_context(start_method)
        self._procs: list[Any] = [None] * num_workers
        self._conns: list[Any] = [None] * num_workers
        for w in range(num_workers):
            self._start(w)

    def _start(self, w: int) -> None:
        parent, child = self._ctx.Pipe()
        specs = [(i, s) for i, s in enumerate(self.specs) if self.owner[i] == w]
        proc = self._ctx.Process(target=_worker, args=(child, specs, logging.getLogger().level),
                                 name=f"gaca-envpool-{w}", daemon=True)
        proc.start()
        child.close()
        self._procs[w], self._conns[w] = proc, parent

    def _alive(self, w: int) -> bool:
        return self._procs[w] is not None and self._procs[w].is_alive()

    def _dead(self, w: int, payload: list[tuple[int, Any]], message: str) -> dict[int, StepOutcome]:
        logger.error("env worker %d: %s (tasks %s)", w, message, [self.task_ids[i] for i, _ in payload])
        if self._procs[w] is not None:
            self._procs[w].join(timeout=1)
        self._procs[w] = None
        return {i: StepOutcome.crashed(self.task_ids[i], message) for i, _ in payload}

    def run(self, cmd: str, items: list[tuple[int, Any]]) -> dict[int, StepOutcome]:
        """Send every worker its share first, then collect (the workers run in parallel)."""
        by_worker: dict[int, list[tuple[int, Any]]] = {}
        for i, x in items:
            by_worker.setdefault(self.owner[i], []).append((i, x))
        out: dict[int, StepOutcome] = {}
        sent: list[int] = []
        for w, payload in by_worker.items():
            if not self._alive(w):
                if cmd != "reset":
                    out.update(self._dead(w, payload, "env worker process is not running"))
                    continue
                self._start(w)
            try:
                self._conns[w].send((cmd, payload))
                sent.append(w)
            except (BrokenPipeError, OSError) as exc:
                out.update(self._dead(w, payload, f"env worker died: {exc}"))
        for w in sent:
            payload = by_worker[w]
            try:
                answers = self._conns[w].recv()
            except (EOFError, ConnectionResetError, OSError):
                out.update(self._dead(w, payload, f"env worker died (exit code {self._procs[w].exitcode})"))
                continue
            for (i, _), outcome in zip(payload, answers, strict=True):
                out[i] = outcome
        for i, outcome in out.items():
            self.task_ids[i] = str(outcome.info.get("task_id", self.task_ids[i]))
        return out

    def close(self) -> None:
        for w in range(self.num_workers):
            if self._alive(w):
                try:
                    self._conns[w].send(("close", None))
                except (BrokenPipeError, OSError):
                    pass
        for w in range(self.num_workers):
            p = self._procs[w]
            if p is not None:
                p.join(timeout=10)
                if p.is_alive():
                    p.terminate()
                    p.join(timeout=5)
            if self._conns[w] is not None:
                self._conns[w].close()


class EnvPool:
    """``num_envs`` text environments stepped in lock-step (see module docstring)."""

    def __init__(self, specs: EnvSpec | Sequence[EnvSpec], num_envs: int | None = None, *, num_workers: int = 0,
                 start_method: str = "spawn") -> None:
        """
        Args:
          specs: one ``EnvSpec`` for every environment, or one per environment.
          num_envs: how many environments (with one spec; default: one per spec).
          num_workers: worker processes (0 or 1: in this process).
          start_method: multiprocessing start method of the workers.
        """
        spec_list = [specs] * (num_envs or 0) if isinstance(specs, EnvSpec) else list(specs)
        if num_envs is not None and len(spec_list) != num_envs:
            raise ValueError(f"{len(spec_list)} env specs for {num_envs} envs")
        if not spec_list:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        if num_workers < 0:
            raise ValueError(f"num_workers must be >= 0, got {num_workers}")
        workers = min(num_workers, len(spec_list))
        backend = (_Workers(spec_list, workers, start_method) if workers >= 2
                   else _InProcess([_Slot(i, s.build) for i, s in enumerate(spec_list)]))
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
        return cls(spec, num_envs, num_workers=config.num_workers)

    @classmethod
    def from_envs(cls, envs: Sequence[TextEnv], *, intro: str = EnvConfig.intro) -> EnvPool:
        """A pool over environments already built (in this process); ``intro`` is their prompt introduction."""
        if not envs:
            raise ValueError("EnvPool.from_envs needs at least one environment")

        def keep(env: TextEnv) -> Callable[[], TextEnv]:
            return lambda: env

        pool = cls.__new__(cls)
        pool._init(_InProcess([_Slot(i, keep(e), e) for i, e in enumerate(envs)]), len(envs),
                   max(int(e.max_steps) for e in envs), intro)
        pool.num_workers = 0
        return pool

    def _init(self, backend: _InProcess | _Workers, num_envs: int, max_steps: int, intro: str) -> None:
        self._backend = backend
        self.num_envs = num_envs
        self.max_steps = max_steps
        """The environments' step limit (the episode driver stops there too)."""
        self.intro = intro
        """The environments' prompt introduction (``EnvConfig.intro``)."""
        self._done = [True] * num_envs
        self._closed = False

    def reset(self, seeds: Sequence[int]) -> list[StepOutcome]:
        """Reset env i with ``seeds[i]`` (a group: the same seed repeated); one outcome per env."""
        self._check_open()
        if len(seeds) != self.num_envs:
            raise ValueError(f"{len(seeds)} seeds for {self.num_envs} envs")
        res = self._backend.run("reset", [(i, int(s)) for i, s in enumerate(seeds)])
        out = [res[i] for i in range(self.num_envs)]
        self._done = [o.done for o in out]
        return out

    def step(self, actions: Sequence[str | None]) -> list[StepOutcome | None]:
        """Step every env with its action; None for an env that sits out (its result is None).

        An action for an environment whose episode has ended is an error.
        """
        self._check_open()
        if len(actions) != self.num_envs:
            raise ValueError(f"{len(actions)} actions for {self.num_envs} envs")
        for i, a in enumerate(actions):
            if a is not None and self._done[i]:
                raise RuntimeError(f"env {i}: action {a!r} for an episode that already ended")
        res = self._backend.run("step", [(i, a) for i, a in enumerate(actions) if a is not None])
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


__all__ = ["EnvPool", "StepOutcome"]
