"""The training loop: rollout -> advantages -> PPO update -> (eval) -> (checkpoint), per iteration.

Reproducibility: iteration ``it`` draws its tasks and samples with a generator seeded by
(seed, it) and evaluation uses its own generator, so a run resumed from the checkpoint of
iteration k repeats iterations k+1… exactly (same weights, same optimizer state, same draws).
Ctrl-C lets the running iteration finish, then checkpoints and returns (press twice to abort).
"""

from __future__ import annotations

import contextlib
import logging
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from gaca.advantage import compute_advantages
from gaca.rollout.collect import collect_expert_examples, collect_rollouts
from gaca.train.checkpoint import CHECKPOINT_NAME, load_checkpoint, save_checkpoint, set_rng_state
from gaca.train.config import TrainConfig, from_dict, save_config, to_dict
from gaca.train.evaluate import EvalStats, evaluate
from gaca.train.logger import MetricsLogger
from gaca.train.metrics import advantage_metrics, rollout_metrics
from gaca.train.update import NonFiniteGuard, make_optimizer, ppo_update

logger = logging.getLogger(__name__)

TOKENIZER_DIR = "tokenizer"


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
    eval_after: dict[str, float] | None
    interrupted: bool = False
    seconds: float = 0.0
    last_metrics: dict[str, float] = field(default_factory=dict)
    timing: dict[str, float] = field(default_factory=dict)
    """Mean seconds per iteration of rollout, advantage, update and eval (time/… keys)."""


# ---------------------------------------------------------------------------------------------
# building blocks


def iteration_generator(seed: int, iteration: int, stream: int = 0) -> torch.Generator:
    """The RNG of iteration ``iteration`` (stream 0: training, 1: evaluation, which always uses
    iteration 0; 2: task draw), independent of history."""
    return torch.Generator().manual_seed((seed * 1_000_003 + iteration) * 4 + stream)


def train_task_seeds(cfg: TrainConfig, iteration: int) -> list[int]:
    """The environment seeds (tasks) of one iteration: distinct games of the train split."""
    gen = iteration_generator(cfg.seed, iteration, stream=2)
    n_games = cfg.env.num_train_games
    k = cfg.rollout.tasks_per_iter
    if k <= n_games:
        return torch.randperm(n_games, generator=gen)[:k].tolist()
    return torch.randint(n_games, (k,), generator=gen).tolist()


def eval_task_seeds(cfg: TrainConfig) -> list[int]:
    """The held-out environment seeds: every game of the eval split once."""
    return list(range(cfg.env.num_eval_games))


def make_pool(cfg: TrainConfig, *, split: str, num_games: int, num_envs: int, expert: bool = False) -> Any:
    """A pool of ``num_envs`` copies of the configured environment on ``split``.

    ``gaca.envs.pool.EnvPool`` with ``env.num_workers`` processes; in-process
    (``gaca.rollout.serial.SerialEnvPool``) when ``num_workers <= 1``.
    """
    kwargs = dict(cfg.env.kwargs)
    kwargs.update(split=split, expert=expert)
    if cfg.env.name == "alfworld":
        kwargs.setdefault("num_games", num_games)
    if cfg.env.num_workers > 1:
        try:
            from gaca.envs.pool import EnvPool
        except ImportError:
            logger.warning("gaca.envs.pool is not available: stepping environments in-process")
        else:
            if cfg.env.name == "alfworld":
                # generate missing games here, once, with the planner's timeout guard (the pool's
                # daemonic workers would each plan in-process, unguarded and in parallel)
                from gaca.envs import make_env

                make_env("alfworld", **{**kwargs, "pregenerate": True}).close()
            return EnvPool(cfg.env.name, kwargs, num_envs, num_workers=min(cfg.env.num_workers, num_envs))
    from gaca.rollout.serial import SerialEnvPool

    return SerialEnvPool(cfg.env.name, kwargs, num_envs)


def _set_threads(n: int) -> None:
    if n > 0:
        torch.set_num_threads(n)


class _Interrupt:
    """SIGINT -> a flag checked between iterations; a second SIGINT raises KeyboardInterrupt."""

    def __init__(self) -> None:
        self.requested = False

    def _handler(self, signum: int, frame: Any) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        logger.warning("Ctrl-C: finishing this iteration, then writing a checkpoint (press again to abort)")

    @contextlib.contextmanager
    def installed(self) -> Iterator[_Interrupt]:
        try:
            previous = signal.signal(signal.SIGINT, self._handler)
        except ValueError:  # not the main thread: no handler, Ctrl-C behaves as usual
            yield self
            return
        try:
            yield self
        finally:
            signal.signal(signal.SIGINT, previous)


def build_policy(cfg: TrainConfig, run_dir: Path, *, resume: bool, progress: bool = False) -> tuple[Any, dict]:
    """Load the policy; on a fresh run with ``sft.episodes > 0``, warm-start it on expert play.

    The ``tiny`` model's tokenizer is fitted on the expert prompts and responses and saved under
    ``run_dir/tokenizer`` (a resumed run or ``gaca eval`` loads it from there).

    Returns:
      (policy, warm-start summary).
    """
    from gaca.policy import fit_tiny_tokenizer, load_policy, sft_warmstart

    tok_dir = run_dir / TOKENIZER_DIR
    summary: dict[str, float] = {}
    if resume and cfg.policy.model == "tiny":
        from transformers import AutoTokenizer

        if not tok_dir.is_dir():
            raise FileNotFoundError(f"{tok_dir} missing: cannot resume a tiny-model run without its tokenizer")
        return load_policy(cfg.policy, tokenizer=AutoTokenizer.from_pretrained(str(tok_dir))), summary
    if resume or cfg.sft.episodes == 0:
        if cfg.policy.model == "tiny":
            raise ValueError("policy.model='tiny' needs sft.episodes > 0: its tokenizer and warm start come "
                             "from expert trajectories")
        return load_policy(cfg.policy), summary
    t0 = time.perf_counter()
    pool = make_pool(cfg, split=cfg.env.train_split, num_games=cfg.env.num_train_games,
                     num_envs=min(cfg.sft.episodes, 16), expert=True)
    try:
        seeds = [i % cfg.env.num_train_games for i in range(cfg.sft.episodes)]
        data = collect_expert_examples(pool, seeds, cfg.rollout, thought=cfg.sft.thought,
                                       detour_prob=cfg.sft.detour_prob, seed=cfg.seed)
    finally:
        _close(pool)
    tokenizer = None
    if cfg.policy.model == "tiny":
        texts = [p for p, _ in data.examples] + [r for _, r in data.examples]
        tokenizer = fit_tiny_tokenizer(texts, cfg.policy.tiny_vocab, cache_dir=cfg.policy.cache_dir)
        tokenizer.save_pretrained(str(tok_dir))
    policy = load_policy(cfg.policy, tokenizer=tokenizer)
    examples = [(policy.build_prompt(p), r) for p, r in data.examples]
    stats = sft_warmstart(policy, examples, steps=cfg.sft.steps, lr=cfg.sft.lr, batch_size=cfg.sft.batch_size,
                          seed=cfg.seed)
    summary = {
        "sft/expert_episodes": float(data.episodes),
        "sft/expert_success": data.success_rate,
        "sft/examples": float(len(examples)),
        "sft/loss_initial": stats["loss_initial"],
        "sft/loss_final": stats["loss_final"],
        "sft/tokens_per_s": stats["tokens_per_s"],
        "sft/seconds": time.perf_counter() - t0,
    }
    logger.info("SFT warm start: %d examples, loss %.3f -> %.3f", len(examples), stats["loss_initial"],
                stats["loss_final"])
    return policy, summary


def _close(pool: Any) -> None:
    close = getattr(pool, "close", None)
    if close is not None:
        close()


def run_eval(policy: Any, pool: Any, cfg: TrainConfig) -> EvalStats:
    """Held-out evaluation. Every evaluation of a run draws from the same sampling stream (common
    random numbers), so the change between two evaluations is the policy's, not the dice's; and
    ``gaca eval`` of a checkpoint reproduces the run's own evaluation of it."""
    return evaluate(policy, pool, eval_task_seeds(cfg), cfg.rollout, temperature=cfg.eval.temperature,
                    top_p=cfg.eval.top_p, generator=iteration_generator(cfg.seed, 0, stream=1))


def _eval_due(cfg: TrainConfig, it: int) -> bool:
    return it == cfg.iterations or (cfg.eval.every > 0 and it % cfg.eval.every == 0)


def _ckpt_due(cfg: TrainConfig, it: int) -> bool:
    return it == cfg.iterations or (cfg.checkpoint_every > 0 and it % cfg.checkpoint_every == 0)


def _progress(total: int, initial: int, enabled: bool) -> Any:
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=initial, desc="train", unit="it", dynamic_ncols=True)


# ---------------------------------------------------------------------------------------------
# the loop


def train(
    cfg: TrainConfig,
    *,
    resume: bool = False,
    on_iteration: Callable[[int, dict[str, float]], None] | None = None,
) -> TrainResult:
    """Train ``cfg.iterations`` iterations in ``cfg.out_dir`` (``resume``: continue from its checkpoint).

    ``on_iteration(it, metrics)`` is called after each completed iteration (tests use it to
    interrupt a run).
    """
    t_start = time.perf_counter()
    _set_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    run_dir = Path(cfg.out_dir)
    ckpt_path = run_dir / CHECKPOINT_NAME
    payload = load_checkpoint(ckpt_path) if resume else None
    if payload is not None and payload["config"] != to_dict(cfg):
        saved = from_dict(TrainConfig, payload["config"])
        diff = [k for k, v in to_dict(cfg).items() if to_dict(saved).get(k) != v]
        logger.warning("resuming with a config that differs from the checkpoint's in: %s", diff)
    run_dir.mkdir(parents=True, exist_ok=True)
    save_config(cfg, run_dir / "config.json")

    policy, sft_summary = build_policy(cfg, run_dir, resume=resume)
    optimizer = make_optimizer(policy, cfg.ppo)
    state = TrainState(sft=sft_summary)
    if payload is not None:
        policy.load_state_dict(payload["policy"])
        optimizer.load_state_dict(payload["optimizer"])
        state = TrainState(**payload["trainer"])
        set_rng_state(payload["rng"])
        logger.info("resumed %s at iteration %d", ckpt_path, state.iteration)
    guard = NonFiniteGuard(cfg.max_nonfinite, state.nonfinite_streak, state.nonfinite_total)
    log = MetricsLogger(run_dir, tensorboard=cfg.tensorboard,
                        truncate_after=state.iteration if payload is not None else None)

    n_train_envs = cfg.rollout.tasks_per_iter * cfg.rollout.group_size
    train_pool = make_pool(cfg, split=cfg.env.train_split, num_games=cfg.env.num_train_games,
                           num_envs=n_train_envs)
    eval_pool = make_pool(cfg, split=cfg.env.eval_split, num_games=cfg.env.num_eval_games,
                          num_envs=min(cfg.eval.batch_size, cfg.env.num_eval_games))

    def checkpoint() -> None:
        state.nonfinite_streak, state.nonfinite_total = guard.streak, guard.total
        save_checkpoint(ckpt_path, policy_state=policy.state_dict(), optimizer=optimizer,
                        trainer_state=vars(state).copy(), config=to_dict(cfg))

    result = TrainResult(run_dir=run_dir, iterations=state.iteration, eval_before=state.eval_before,
                         eval_after=None)
    timing_sums: dict[str, float] = {}
    bar = None
    try:
        if payload is None:
            ev = run_eval(policy, eval_pool, cfg)
            state.eval_before = ev.metrics()
            result.eval_before = state.eval_before
            log.log(0, {**state.sft, **ev.metrics(), "time/eval_s": ev.seconds})
            logger.info("held-out success before training: %.3f", ev.success)
            checkpoint()
        interrupt = _Interrupt()
        bar = _progress(cfg.iterations, state.iteration, cfg.progress)
        with interrupt.installed():
            for it in range(state.iteration, cfg.iterations):
                t0 = time.perf_counter()
                gen = iteration_generator(cfg.seed, it)
                batch = collect_rollouts(policy, train_pool, train_task_seeds(cfg, it), cfg.rollout, generator=gen)
                t1 = time.perf_counter()
                calls = policy.forward_calls
                adv = compute_advantages(batch.steps, cfg.estimator, **to_dict(cfg.advantage))
                adv_calls = policy.forward_calls - calls
                t2 = time.perf_counter()
                upd = ppo_update(policy, optimizer, batch, adv.advantage, cfg.ppo,
                                 temperature=cfg.rollout.temperature, generator=gen, guard=guard)
                t3 = time.perf_counter()
                state.iteration = it + 1
                adv_scalars, hists = advantage_metrics(adv, batch)
                metrics = {**rollout_metrics(batch), **adv_scalars, **upd.metrics}
                metrics.update({
                    "perf/forward_passes": float(batch.forward_passes + upd.forward_passes + adv_calls),
                    "perf/forward_passes_update": float(upd.forward_passes),
                    "perf/forward_passes_advantage": float(adv_calls),
                    "time/rollout_s": t1 - t0,
                    "time/advantage_s": t2 - t1,
                    "time/update_s": t3 - t2,
                    "perf/advantage_share": (t2 - t1) / max(t3 - t0, 1e-9),
                })
                if _eval_due(cfg, state.iteration):
                    ev = run_eval(policy, eval_pool, cfg)
                    metrics.update(ev.metrics())
                    metrics["time/eval_s"] = ev.seconds
                metrics["time/iteration_s"] = time.perf_counter() - t0
                for k in ("time/rollout_s", "time/advantage_s", "time/update_s", "time/eval_s", "time/iteration_s"):
                    timing_sums[k] = timing_sums.get(k, 0.0) + metrics.get(k, 0.0)
                log.log(state.iteration, metrics, hists)
                result.last_metrics = metrics
                if "eval/success" in metrics:
                    result.eval_after = {k: v for k, v in metrics.items() if k.startswith("eval/")}
                if _ckpt_due(cfg, state.iteration) or interrupt.requested:
                    checkpoint()
                if bar is not None:
                    post = {"success": f"{metrics['env/success']:.2f}"}
                    if result.eval_after:
                        post["eval"] = f"{result.eval_after['eval/success']:.2f}"
                    bar.set_postfix(post)
                    bar.update(1)
                if on_iteration is not None:
                    on_iteration(state.iteration, metrics)
                if interrupt.requested:
                    result.interrupted = True
                    logger.warning("interrupted after iteration %d; resume with --resume", state.iteration)
                    break
    except KeyboardInterrupt:
        result.interrupted = True
        logger.warning("aborted during iteration %d; the last checkpoint is kept", state.iteration + 1)
        raise
    finally:
        if bar is not None:
            bar.close()
        log.close()
        _close(train_pool)
        _close(eval_pool)
    done = max(1, state.iteration - (payload["trainer"]["iteration"] if payload else 0))
    result.timing = {k: v / done for k, v in timing_sums.items()}
    result.iterations = state.iteration
    result.seconds = time.perf_counter() - t_start
    return result


def evaluate_checkpoint(
    checkpoint: str | Path, overrides: list[str] | None = None
) -> tuple[EvalStats, TrainConfig]:
    """Load a run's checkpoint (run directory or checkpoint.pt) and evaluate it on the held-out tasks.

    ``overrides`` (``key=value``) change the saved config, e.g. ``env.num_eval_games=50`` or
    ``eval.temperature=0.5``.
    """
    from gaca.train.config import apply_overrides

    path = Path(checkpoint)
    payload = load_checkpoint(path)
    run_dir = path if path.is_dir() else path.parent
    cfg = from_dict(TrainConfig, apply_overrides(payload["config"], list(overrides or [])))
    _set_threads(cfg.threads)
    policy, _ = build_policy(cfg, run_dir, resume=True)
    policy.load_state_dict(payload["policy"])
    pool = make_pool(cfg, split=cfg.env.eval_split, num_games=cfg.env.num_eval_games,
                     num_envs=min(cfg.eval.batch_size, cfg.env.num_eval_games))
    try:
        stats = run_eval(policy, pool, cfg)
    finally:
        _close(pool)
    return stats, cfg


__all__ = [
    "TrainResult",
    "TrainState",
    "build_policy",
    "eval_task_seeds",
    "evaluate_checkpoint",
    "iteration_generator",
    "make_pool",
    "run_eval",
    "train",
    "train_task_seeds",
]
