"""A pool of text environments on worker processes, for episode groups.

    with EnvPool("alfworld", {"split": "train", "num_games": 60}, num_envs=8, num_workers=2) as pool:
        first = pool.reset([3] * 4 + [7] * 4)             # two groups of 4 copies (same seed)
        results = pool.step(["look"] * 8)                 # None for an env that already finished

Envs are split over the workers in contiguous blocks (env i on worker ``i * num_workers // num_envs``),
so the copies of a group usually share a worker and its engine caches. ``num_workers=0`` runs
every env in this process (tests, debugging). Workers are started with multiprocessing's
``spawn`` method (fork is unsafe with the C libraries the engines load).

Fault tolerance: an env that raises in ``reset`` or ``step`` ends its episode as failed
(``terminated=True``, ``info["won"] = False``, ``info["error"]`` = the message); the error is logged
with the env's task id, the env is rebuilt at the next ``reset``, and the other envs continue. A
worker process that dies fails all of its envs' episodes the same way and is restarted at the next
``reset``.

``env_name`` is a registry key of ``gaca.envs.ENVIRONMENTS`` or ``"package.module:factory"``;
``env_kwargs`` is one dict for all envs or a list of one dict per env.
"""

from __future__ import annotations

import importlib
import logging
import multiprocessing as mp
import os
import traceback
from collections.abc import Callable, Sequence
from typing import Any

from gaca.envs.base import TextEnv

logger = logging.getLogger(__name__)

StepResult = tuple[str, float, bool, bool, dict[str, Any]]


def build_env(env_name: str, env_kwargs: dict[str, Any]) -> TextEnv:
    """Build one env: a registry key, or ``"package.module:factory"``."""
    if ":" in env_name:
        mod, attr = env_name.split(":", 1)
        factory: Callable[..., TextEnv] = getattr(importlib.import_module(mod), attr)
        return factory(**env_kwargs)
    from gaca.envs import make_env

    return make_env(env_name, **env_kwargs)


def _failed_info(task_id: str, message: str) -> dict[str, Any]:
    return {
        "task": "",
        "task_id": task_id,
        "task_type": "",
        "admissible_actions": [],
        "won": False,
        "valid": False,
        "error": message,
    }


class _Slot:
    """One env and its episode bookkeeping (lives in the worker, or in-process)."""

    def __init__(self, index: int, env_name: str, env_kwargs: dict[str, Any]) -> None:
        self.index, self.env_name, self.env_kwargs = index, env_name, env_kwargs
        self.env: TextEnv | None = None
        self.task_id = "?"
        self.done = True
        self.failed: str | None = None

    def _fail(self, where: str, exc: BaseException) -> str:
        msg = f"{type(exc).__name__}: {exc}"
        logger.error("env %d (task %s) raised in %s: %s\n%s", self.index, self.task_id, where, msg,
                     traceback.format_exc())
        if self.env is not None:
            try:
                self.env.close()
            except Exception:
                logger.debug("close after failure raised", exc_info=True)
        self.env = None  # rebuilt at the next reset
        self.done = True
        self.failed = msg
        return msg

    def reset(self, seed: int) -> tuple[str, dict[str, Any]]:
        self.task_id = f"seed={seed}"
        self.failed = None
        try:
            if self.env is None:
                self.env = build_env(self.env_name, self.env_kwargs)
            obs, info = self.env.reset(seed=seed)
            self.task_id = str(info.get("task_id", self.task_id))
            self.done = False
            return obs, info
        except Exception as exc:
            return "", _failed_info(self.task_id, self._fail("reset", exc))

    def step(self, action: str | None) -> StepResult | None:
        if action is None:
            return None
        if self.failed is not None:
            # The episode failed at reset: end it now.
            msg, self.failed = self.failed, None
            return "", 0.0, True, False, _failed_info(self.task_id, msg)
        if self.done or self.env is None:
            raise RuntimeError(f"env {self.index}: action given to an episode that already ended")
        try:
            obs, reward, terminated, truncated, info = self.env.step(action)
        except Exception as exc:
            return "", 0.0, True, False, _failed_info(self.task_id, self._fail("step", exc))
        self.done = bool(terminated or truncated)
        return obs, float(reward), bool(terminated), bool(truncated), info

    def close(self) -> None:
        if self.env is not None:
            try:
                self.env.close()
            finally:
                self.env = None


def _worker(conn: Any, specs: list[tuple[int, str, dict[str, Any]]], log_level: int) -> None:
    """Worker loop: ("reset", [(slot, seed)]) | ("step", [(slot, action)]) | ("close", None)."""
    logging.basicConfig(level=log_level)
    slots = {i: _Slot(i, name, kw) for i, name, kw in specs}
    try:
        while True:
            cmd, payload = conn.recv()
            if cmd == "reset":
                conn.send([slots[i].reset(seed) for i, seed in payload])
            elif cmd == "step":
                out = []
                for i, action in payload:
                    try:
                        out.append(slots[i].step(action))
                    except RuntimeError as exc:  # misuse by the caller: report, don't die
                        out.append(exc)
                conn.send(out)
            elif cmd == "close":
                break
    except (EOFError, KeyboardInterrupt):
        pass
    finally:
        for s in slots.values():
            try:
                s.close()
            except Exception:
                pass
        conn.close()


class EnvPool:
    """``num_envs`` text environments stepped in lock-step, on ``num_workers`` processes."""

    def __init__(
        self,
        env_name: str,
        env_kwargs: dict[str, Any] | Sequence[dict[str, Any]] | None = None,
        num_envs: int = 1,
        num_workers: int = 2,
        start_method: str = "spawn",
    ) -> None:
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        if num_workers < 0:
            raise ValueError(f"num_workers must be >= 0, got {num_workers}")
        if env_kwargs is None or isinstance(env_kwargs, dict):
            kwargs = [dict(env_kwargs or {}) for _ in range(num_envs)]
        else:
            kwargs = [dict(k) for k in env_kwargs]
            if len(kwargs) != num_envs:
                raise ValueError(f"{len(kwargs)} env_kwargs for {num_envs} envs")
        self.env_name, self.num_envs = env_name, num_envs
        self.num_workers = min(num_workers, num_envs)
        self._kwargs = kwargs
        self._closed = False
        self._done = [True] * num_envs
        self._task_ids = ["?"] * num_envs
        if self.num_workers == 0:
            self._slots = [_Slot(i, env_name, kwargs[i]) for i in range(num_envs)]
            return
        self._ctx = mp.get_context(start_method)
        # env i -> worker owner[i] (contiguous blocks)
        self._owner = [i * self.num_workers // num_envs for i in range(num_envs)]
        self._procs: list[Any] = [None] * self.num_workers
        self._conns: list[Any] = [None] * self.num_workers
        for w in range(self.num_workers):
            self._start_worker(w)

    # -- workers -------------------------------------------------------------------------------

    def _envs_of(self, w: int) -> list[int]:
        return [i for i in range(self.num_envs) if self._owner[i] == w]

    def _start_worker(self, w: int) -> None:
        parent, child = self._ctx.Pipe()
        specs = [(i, self.env_name, self._kwargs[i]) for i in self._envs_of(w)]
        proc = self._ctx.Process(target=_worker, args=(child, specs, logging.getLogger().level),
                                 name=f"gaca-envpool-{w}", daemon=True)
        proc.start()
        child.close()
        self._procs[w], self._conns[w] = proc, parent

    def _alive(self, w: int) -> bool:
        return self._procs[w] is not None and self._procs[w].is_alive()

    def _dispatch(self, cmd: str, items: list[tuple[int, Any]]) -> dict[int, Any]:
        """Send every worker its share of ``items`` first, then collect (workers run in parallel)."""
        by_worker: dict[int, list[tuple[int, Any]]] = {}
        for i, x in items:
            by_worker.setdefault(self._owner[i], []).append((i, x))
        sent: list[int] = []
        out: dict[int, Any] = {}
        for w, payload in by_worker.items():
            if not self._alive(w):
                if cmd == "reset":
                    self._start_worker(w)
                else:
                    for i, _ in payload:
                        out[i] = _failed_info(self._task_ids[i], "env worker process is not running")
                    continue
            try:
                self._conns[w].send((cmd, payload))
                sent.append(w)
            except (BrokenPipeError, OSError) as exc:
                logger.error("env worker %d unreachable: %s", w, exc)
                self._procs[w] = None
                for i, _ in payload:
                    out[i] = _failed_info(self._task_ids[i], f"env worker died: {exc}")
        for w in sent:
            payload = by_worker[w]
            try:
                answers = self._conns[w].recv()
            except (EOFError, ConnectionResetError, OSError) as exc:
                code = self._procs[w].exitcode
                logger.error("env worker %d died (exit code %s) during %s of tasks %s: %s", w, code, cmd,
                             [self._task_ids[i] for i, _ in payload], exc)
                self._procs[w].join(timeout=1)
                self._procs[w] = None
                answers = [_failed_info(self._task_ids[i], f"env worker died (exit code {code})")
                           for i, _ in payload]
            for (i, _), a in zip(payload, answers, strict=True):
                out[i] = a
        return out

    # -- API -----------------------------------------------------------------------------------

    def reset(self, seeds: Sequence[int]) -> list[tuple[str, dict[str, Any]]]:
        """Reset env i with ``seeds[i]`` (a group: the same seed repeated); [(obs, info)] per env."""
        self._check_open()
        if len(seeds) != self.num_envs:
            raise ValueError(f"{len(seeds)} seeds for {self.num_envs} envs")
        items = [(i, int(s)) for i, s in enumerate(seeds)]
        if self.num_workers == 0:
            res = {i: self._slots[i].reset(s) for i, s in items}
        else:
            res = self._dispatch("reset", items)
        out: list[tuple[str, dict[str, Any]]] = []
        for i in range(self.num_envs):
            r = res[i]
            if isinstance(r, dict):  # worker died during reset
                r = ("", r)
            obs, info = r
            self._task_ids[i] = str(info.get("task_id", "?"))
            self._done[i] = False
            out.append((obs, info))
        return out

    def step(self, actions: Sequence[str | None]) -> list[StepResult | None]:
        """Step every env with its action (None for an env whose episode ended -> None result)."""
        self._check_open()
        if len(actions) != self.num_envs:
            raise ValueError(f"{len(actions)} actions for {self.num_envs} envs")
        for i, a in enumerate(actions):
            if a is not None and self._done[i]:
                raise RuntimeError(f"env {i}: action {a!r} for an episode that already ended")
        items = [(i, a) for i, a in enumerate(actions) if a is not None]
        if self.num_workers == 0:
            res = {i: self._slots[i].step(a) for i, a in items}
        else:
            res = self._dispatch("step", items)
        out: list[StepResult | None] = [None] * self.num_envs
        for i, r in res.items():
            if isinstance(r, Exception):
                raise r
            if isinstance(r, dict):  # worker died: fail the episode
                r = ("", 0.0, True, False, r)
            out[i] = r
            if r[2] or r[3]:
                self._done[i] = True
        return out

    def close(self) -> None:
        """Stop the workers (or close the in-process envs). Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self.num_workers == 0:
            for s in self._slots:
                s.close()
            return
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

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("EnvPool is closed")

    def __enter__(self) -> EnvPool:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class FaultyEnv:
    """Test helper: wraps an env and fails on purpose (for fault-tolerance tests and drills).

    ``crash_at_step=k`` raises ``RuntimeError`` on the k-th step of every episode (``k = 0``: in
    ``reset``); ``mode="exit"`` kills the whole process instead (``os._exit(3)``), as a segfault
    of an engine would.
    """

    def __init__(self, inner: str, inner_kwargs: dict[str, Any] | None = None,
                 crash_at_step: int | None = None, mode: str = "raise") -> None:
        if mode not in ("raise", "exit"):
            raise ValueError(f"mode must be 'raise' or 'exit', got {mode!r}")
        self.env = build_env(inner, dict(inner_kwargs or {}))
        self.max_steps = self.env.max_steps
        self.crash_at_step, self.mode = crash_at_step, mode
        self._t = 0

    def _maybe_crash(self) -> None:
        if self.crash_at_step is not None and self._t == self.crash_at_step:
            if self.mode == "exit":
                os._exit(3)
            raise RuntimeError(f"planted crash at step {self._t}")

    def reset(self, *, seed: int, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        self._t = 0
        self._maybe_crash()
        return self.env.reset(seed=seed, options=options)

    def step(self, action: str) -> StepResult:
        self._t += 1
        self._maybe_crash()
        return self.env.step(action)

    def close(self) -> None:
        self.env.close()


__all__ = ["EnvPool", "FaultyEnv", "StepResult", "build_env"]
