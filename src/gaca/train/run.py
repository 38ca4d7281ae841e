"""A training run's lifetime around its iterations: set-up, resume, logging, checkpoints, interrupts.

    with TrainingRun(cfg, resume=False) as run:       # policy (warm-started), optimizer, pools, logs
        for it in run.iterations():                    # stops cleanly after Ctrl-C
            metrics, histograms = iteration(run, it)   # gaca.train.loop: the algorithm
            run.end_iteration(metrics, histograms)     # log, checkpoint on cadence, progress bar

Ctrl-C (or SIGTERM) lets the running iteration finish, then checkpoints and ends the run (a second
one aborts; the last checkpoint is kept). A new run refuses a non-empty run directory unless told
to ``--resume`` or ``--overwrite`` (``rundir``), and checks everything it can before writing.
``gaca.train.loop`` holds the iteration itself.
"""

from __future__ import annotations

import contextlib
import logging
import signal
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from gaca.config import from_dict, to_dict
from gaca.envs import EnvPool
from gaca.policy import CausalLMPolicy, PolicyArtifact, check_policy_source
from gaca.train.checkpoint import CHECKPOINT_NAME, load_checkpoint, save_checkpoint, set_rng_state
from gaca.train.config import TrainConfig, save_config
from gaca.train.evaluate import EvalStats, evaluate
from gaca.train.logger import MetricsLogger
from gaca.train.rundir import check_resumable, clear_run_files, preflight, remove_stale_tmp
from gaca.train.schedule import EVAL_STREAM, checkpoint_due, eval_task_seeds, iteration_generator
from gaca.train.timing import ITERATION_TIMES, Stopwatch
from gaca.train.update import NonFiniteGuard, make_optimizer
from gaca.train.warm_start import warm_start

logger = logging.getLogger(__name__)



@dataclass
class TrainState:
    """What the loop carries from one iteration to the next (saved in the checkpoint)."""

    iteration: int = 0
    """Completed iterations (= optimizer phases done)."""
    nonfinite_streak: int = 0
    nonfinite_total: int = 0
    eval_before: dict[str, float] | None = None
    """Held-out metrics before the first update."""
    sft: dict[str, float] = field(default_factory=dict)
    """Warm-start summary (expert success, SFT loss before/after, seconds)."""


@dataclass
class TrainResult:
    """What ``train`` returns."""

    run_dir: Path
    iterations: int
    """Completed iterations."""
    eval_before: dict[str, float] | None
    eval_after: dict[str, float] | None = None
    interrupted: bool = False
    seconds: float = 0.0
    last_metrics: dict[str, float] = field(default_factory=dict)
    timing: dict[str, float] = field(default_factory=dict)
    """Mean seconds per iteration of rollout, advantage, update and eval (time/… keys)."""


class Interrupt:
    """SIGINT (Ctrl-C) or SIGTERM (what schedulers send) -> a flag checked at safe points; a second one
    raises KeyboardInterrupt. ``then`` says what happens at the next safe point (logged once).
    ``on_first`` runs at the first signal (e.g. to pass it on to child processes)."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, then: str = "finishing this iteration, then writing a checkpoint",
                 on_first: Any = None) -> None:
        self.requested = False
        self.then, self.on_first = then, on_first

    def _handler(self, signum: int, frame: Any) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        logger.warning("%s: %s (send it again to abort)", signal.Signals(signum).name, self.then)
        if self.on_first is not None:
            self.on_first()

    @contextlib.contextmanager
    def installed(self) -> Iterator[Interrupt]:
        try:
            previous = {s: signal.signal(s, self._handler) for s in self.SIGNALS}
        except ValueError:  # not the main thread: no handler, signals behave as usual
            yield self
            return
        try:
            yield self
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)


def eval_pool(cfg: TrainConfig) -> EnvPool:
    """The held-out environments (``eval.batch_size`` of them, at most one per held-out game)."""
    return EnvPool.for_split(cfg.env, cfg.env.eval_split, min(cfg.eval.batch_size, cfg.env.num_eval_games),
                             num_games=cfg.env.num_eval_games)


def run_eval(policy: CausalLMPolicy, pool: EnvPool, cfg: TrainConfig, *, keep_episodes: bool = False) -> EvalStats:
    """Held-out evaluation. Every evaluation of a run draws from the same sampling stream (common
    random numbers), so the change between two evaluations is the policy's, not the dice's; and
    ``gaca eval`` of a checkpoint reproduces the run's own evaluation of it."""
    return evaluate(policy, pool, eval_task_seeds(cfg), cfg.rollout, temperature=cfg.eval.temperature,
                    top_p=cfg.eval.top_p, generator=iteration_generator(cfg.seed, 0, EVAL_STREAM),
                    keep_episodes=keep_episodes)


class TrainingRun:
    """Everything one run holds (see module docstring); a context manager that always cleans up."""

    def __init__(self, cfg: TrainConfig, *, resume: bool = False, overwrite: bool = False) -> None:
        """``resume``: continue the run in ``cfg.out_dir``; ``overwrite``: remove the earlier run there
        first (a new run refuses a non-empty directory otherwise)."""
        self._stack = contextlib.ExitStack()  # what to close, in reverse order, however the run ends
        try:
            self._open(cfg, resume, overwrite)
        except BaseException:
            self._stack.close()
            raise

    def _open(self, cfg: TrainConfig, resume: bool, overwrite: bool) -> None:
        self.clock = Stopwatch()
        self.cfg = cfg
        self.run_dir = Path(cfg.out_dir)
        self.ckpt_path = self.run_dir / CHECKPOINT_NAME
        payload = preflight(cfg, resume=resume, overwrite=overwrite)  # nothing is written before this passes
        if cfg.threads > 0:
            torch.set_num_threads(cfg.threads)
        torch.manual_seed(cfg.seed)
        if payload is not None and payload["config"] != to_dict(cfg):
            saved = to_dict(from_dict(TrainConfig, payload["config"]))
            logger.warning("resuming with a config that differs from the checkpoint's in: %s",
                           [k for k, v in to_dict(cfg).items() if saved.get(k) != v])
        if overwrite:
            clear_run_files(self.run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        remove_stale_tmp(self.run_dir)
        save_config(cfg, self.run_dir / "config.json")
        # the trackers open before the warm start, so that one that cannot start stops the run at once
        self.log = self._stack.enter_context(contextlib.closing(MetricsLogger(
            self.run_dir, trackers=cfg.trackers, config=to_dict(cfg),
            resume_after=payload["trainer"]["iteration"] if payload is not None else None)))
        self.state = TrainState()
        if payload is None:
            self.policy, self.state.sft = warm_start(cfg, self.run_dir)
        else:
            self.policy = payload["policy"].build(config=cfg.policy)
        self.optimizer = make_optimizer(self.policy, cfg.ppo)
        if payload is not None:
            self.optimizer.load_state_dict(payload["optimizer"])
            self.state = TrainState(**payload["trainer"])
            set_rng_state(payload["rng"])
            logger.info("resumed %s at iteration %d", self.ckpt_path, self.state.iteration)
        self.start_iteration = self.state.iteration
        self.guard = NonFiniteGuard(cfg.max_nonfinite, self.state.nonfinite_streak, self.state.nonfinite_total)
        self.train_pool = self._stack.enter_context(EnvPool.for_split(
            cfg.env, cfg.env.train_split, cfg.rollout.tasks_per_iter * cfg.rollout.group_size,
            num_games=cfg.env.num_train_games))
        self.eval_pool = self._stack.enter_context(eval_pool(cfg))
        self.result = TrainResult(self.run_dir, self.state.iteration, self.state.eval_before)
        self.interrupt = Interrupt()
        self._bar: Any = None
        self._timing: dict[str, float] = {}
        self._checkpointed = -1

    # -- lifetime ----------------------------------------------------------------------------------

    def __enter__(self) -> TrainingRun:
        self._stack.enter_context(self.interrupt.installed())
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        if exc_type is KeyboardInterrupt:
            self.result.interrupted = True
            logger.warning("aborted during iteration %d; the last checkpoint is kept", self.state.iteration + 1)
        if self._bar is not None:
            self._bar.close()
        self._stack.close()
        done = max(1, self.state.iteration - self.start_iteration)
        self.result.timing = {k: v / done for k, v in self._timing.items()}
        self.result.iterations = self.state.iteration
        self.result.seconds = self.clock.elapsed()

    def iterations(self) -> Iterator[int]:
        """The iterations left to run (0-based); evaluates first on a fresh run; stops after Ctrl-C."""
        if self.state.eval_before is None:
            ev = self.evaluate()
            self.state.eval_before = self.result.eval_before = ev.metrics()
            self.log.log(0, {**self.state.sft, **ev.metrics(), "time/eval_s": ev.seconds})
            logger.info("held-out success before training: %.3f", ev.success)
            self.checkpoint()
        if self.cfg.progress:
            from tqdm.auto import tqdm

            self._bar = tqdm(total=self.cfg.iterations, initial=self.state.iteration, desc="train", unit="it",
                             dynamic_ncols=True)
        for it in range(self.state.iteration, self.cfg.iterations):
            yield it
            if self.interrupt.requested:
                if self._checkpointed != self.state.iteration:
                    self.checkpoint()
                self.result.interrupted = True
                logger.warning("interrupted after iteration %d; resume with --resume", self.state.iteration)
                return

    def end_iteration(self, metrics: dict[str, float], histograms: dict[str, torch.Tensor]) -> None:
        """Record a completed iteration: state, log, checkpoint on cadence, progress bar."""
        self.state.iteration += 1
        self.log.log(self.state.iteration, metrics, histograms)
        self.result.last_metrics = metrics
        for k in ITERATION_TIMES:
            self._timing[k] = self._timing.get(k, 0.0) + metrics.get(k, 0.0)
        if "eval/success" in metrics:
            self.result.eval_after = {k: v for k, v in metrics.items() if k.startswith("eval/")}
        if checkpoint_due(self.cfg, self.state.iteration) or self.interrupt.requested:
            self.checkpoint()
        if self._bar is not None:
            post = {"success": f"{metrics['env/success']:.2f}"}
            if self.result.eval_after:
                post["eval"] = f"{self.result.eval_after['eval/success']:.2f}"
            self._bar.set_postfix(post)
            self._bar.update(1)

    # -- services the iteration uses ---------------------------------------------------------------

    def evaluate(self) -> EvalStats:
        """Held-out evaluation of the current policy (``run_eval``)."""
        return run_eval(self.policy, self.eval_pool, self.cfg)

    def checkpoint(self) -> None:
        """Write the checkpoint atomically (policy artifact, optimizer, RNG, trainer state, config)."""
        self.state.nonfinite_streak, self.state.nonfinite_total = self.guard.streak, self.guard.total
        save_checkpoint(self.ckpt_path, policy=PolicyArtifact.of(self.policy), optimizer=self.optimizer,
                        trainer_state=vars(self.state).copy(), config=to_dict(self.cfg))
        self._checkpointed = self.state.iteration


def load_checkpoint_policy(checkpoint: str | Path, overrides: list[str] | None = None
                           ) -> tuple[CausalLMPolicy, TrainConfig]:
    """The trained policy of a run's checkpoint (run directory or checkpoint.pt) and its config, with
    ``overrides`` (``key=value``) applied to the saved config; sets the config's thread count."""
    from gaca.config import apply_overrides

    path = Path(checkpoint)
    payload = load_checkpoint(path)
    cfg = from_dict(TrainConfig, apply_overrides(payload["config"], list(overrides or [])))
    check_resumable(cfg, payload, path)
    check_policy_source(cfg.policy)
    if cfg.threads > 0:
        torch.set_num_threads(cfg.threads)
    return payload["policy"].build(config=cfg.policy), cfg


def evaluate_checkpoint(checkpoint: str | Path, overrides: list[str] | None = None, *, keep_episodes: bool = False
                        ) -> tuple[EvalStats, TrainConfig]:
    """Load a run's checkpoint (run directory or checkpoint.pt) and evaluate it on the held-out tasks.

    ``overrides`` (``key=value``) change the saved config, e.g. ``env.num_eval_games=50`` or
    ``eval.temperature=0.5``; ``keep_episodes``: keep the played episodes in ``EvalStats.played``.
    """
    policy, cfg = load_checkpoint_policy(checkpoint, overrides)
    with eval_pool(cfg) as pool:
        return run_eval(policy, pool, cfg, keep_episodes=keep_episodes), cfg


__all__ = ["Interrupt", "TrainResult", "TrainState", "TrainingRun", "eval_pool", "evaluate_checkpoint",
           "load_checkpoint_policy", "run_eval"]
