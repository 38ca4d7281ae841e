"""One PPO update over an iteration's step rows (epochs x minibatches x micro-batches, AdamW).

For each epoch the rows are shuffled and split into ``num_minibatches`` minibatches; each
minibatch is one optimizer step. Its loss

    J = Σ_{b,l} w_{b,l} · ( ℓ^PG_{b,l} + β_KL · KL_{b,l} − β_H · H_{b,l} )

uses the aggregation weights w of the whole minibatch (``gaca.train.losses.AGGREGATIONS``), so the
micro-batches' gradients add up to exactly the minibatch gradient. logπ_old is the rollout's
sampling log-prob (the update starts on-policy); the KL is to the reference policy. Metrics are
means over all minibatches, never the last one.
"""

from __future__ import annotations

import logging
import math
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import torch

from gaca.rollout.collect import RolloutBatch
from gaca.train.config import PPOConfig
from gaca.train.losses import aggregate, get_aggregation, get_kl_estimator, get_policy_loss, token_mean_weights

logger = logging.getLogger(__name__)


class NonFiniteLossError(RuntimeError):
    """Too many consecutive updates had a non-finite loss or gradient."""


@dataclass
class NonFiniteGuard:
    """Counts consecutive skipped (non-finite) updates; raises at ``limit`` in a row."""

    limit: int = 3
    streak: int = 0
    total: int = 0

    def record(self, finite: bool, where: str = "") -> None:
        """Register one update; a non-finite one is counted and warned about."""
        if finite:
            self.streak = 0
            return
        self.streak += 1
        self.total += 1
        logger.warning("non-finite loss or gradient %s: update skipped (%d in a row)", where, self.streak)
        if self.streak >= self.limit:
            raise NonFiniteLossError(f"{self.streak} consecutive updates had a non-finite loss; stopping the run")


@dataclass
class UpdateStats:
    """Means over all minibatches of one ``ppo_update`` call."""

    metrics: dict[str, float] = field(default_factory=dict)
    """loss/…, policy/… and perf/… keys (see docs/metrics.md)."""
    forward_passes: int = 0
    """Model forward calls spent (policy scoring + reference scoring)."""
    tokens: int = 0
    """Response tokens processed (counted once per epoch)."""
    skipped: int = 0
    """Minibatch updates skipped because of a non-finite loss or gradient."""
    seconds: float = 0.0


def make_optimizer(policy: Any, cfg: PPOConfig) -> torch.optim.Optimizer:
    """AdamW over the policy's trainable parameters."""
    params = list(policy.trainable_parameters())
    if not params:
        raise ValueError("the policy has no trainable parameters")
    return torch.optim.AdamW(params, lr=cfg.lr, betas=tuple(cfg.betas), weight_decay=cfg.weight_decay)


def optimizer_steps_taken(optimizer: torch.optim.Optimizer) -> int:
    """Optimizer steps taken so far, read from AdamW's own state (so a resumed run continues the count)."""
    for group in optimizer.param_groups:
        for p in group["params"]:
            step = optimizer.state.get(p, {}).get("step")
            if step is not None:
                return int(step)
    return 0


def set_warmup_lr(optimizer: torch.optim.Optimizer, cfg: PPOConfig) -> float:
    """Set the learning rate of the next step: lr · min(1, (k + 1) / warmup_steps) after k steps."""
    lr = cfg.lr
    if cfg.warmup_steps > 0:
        lr *= min(1.0, (optimizer_steps_taken(optimizer) + 1) / cfg.warmup_steps)
    for group in optimizer.param_groups:
        group["lr"] = lr
    return lr


def ppo_update(
    policy: Any,
    optimizer: torch.optim.Optimizer,
    batch: RolloutBatch,
    advantages: torch.Tensor,
    cfg: PPOConfig,
    *,
    temperature: float = 1.0,
    generator: torch.Generator | None = None,
    guard: NonFiniteGuard | None = None,
) -> UpdateStats:
    """Run ``cfg.epochs`` x ``cfg.num_minibatches`` PPO steps on the batch.

    Args:
      policy: a ``gaca.policy.Policy`` (``score``, ``trainable_parameters``).
      optimizer: from ``make_optimizer``.
      batch: the rollout (prompt_ids, response_ids [N, L], response_mask [N, L], logprobs [N, L]).
      advantages: [N] float, one scalar per step row, broadcast to its tokens.
      cfg: loss and batching options.
      temperature: the sampling temperature (scores use it so that r = 1 before the first step).
      generator: RNG of the minibatch shuffle.
      guard: counts consecutive non-finite updates (raises ``NonFiniteLossError`` at its limit).
    """
    n = batch.num_rows
    if advantages.shape != (n,):
        raise ValueError(f"advantages must have shape [N] = ({n},), got {tuple(advantages.shape)}")
    guard = guard if guard is not None else NonFiniteGuard()
    pg_loss_fn = get_policy_loss(cfg.policy_loss)
    kl_fn = get_kl_estimator(cfg.kl_estimator)
    agg_fn = get_aggregation(cfg.loss_agg)
    params = [p for group in optimizer.param_groups for p in group["params"]]
    adv = advantages.detach().to(torch.float32)
    prompt_len = torch.tensor([len(p) for p in batch.prompt_ids], dtype=torch.int64)
    num_mb = min(cfg.num_minibatches, n)
    sums: dict[str, float] = defaultdict(float)
    stats = UpdateStats()
    t_start = time.perf_counter()
    steps_done = 0
    for epoch in range(cfg.epochs):
        perm = torch.randperm(n, generator=generator)
        for mb, mb_idx in enumerate(torch.tensor_split(perm, num_mb)):
            # Rows of similar prompt length share micro-batches: less left padding to compute (the
            # minibatch's loss is a sum over rows, so their order does not change it).
            mb_idx = mb_idx[torch.argsort(prompt_len[mb_idx], stable=True)]
            mb_mask = batch.response_mask[mb_idx]
            weights = agg_fn(mb_mask)
            diag_weights = token_mean_weights(mb_mask)
            optimizer.zero_grad(set_to_none=True)
            finite = True
            mb_sums: dict[str, float] = defaultdict(float)
            for start in range(0, len(mb_idx), cfg.micro_batch_size):
                local = slice(start, start + cfg.micro_batch_size)
                idx = mb_idx[local]
                width = max(1, int(batch.response_mask[idx].sum(1).max()))
                mask = batch.response_mask[idx, :width]
                resp = batch.response_ids[idx, :width]
                old = batch.logprobs[idx, :width]
                w = weights[local, :width]
                dw = diag_weights[local, :width]
                prompts = [batch.prompt_ids[int(i)] for i in idx]
                scored = policy.score(
                    prompts, resp, mask, temperature=temperature, with_entropy=cfg.entropy_coef > 0
                )
                stats.forward_passes += 1
                if epoch == 0:
                    stats.tokens += int(mask.sum())
                logp = scored.logprobs
                a = adv[idx].unsqueeze(1).expand_as(logp)
                pg = pg_loss_fn(logp, old, a, clip_ratio=cfg.clip_ratio, clip_ratio_c=cfg.clip_ratio_c)
                total = pg.loss
                pg_term = aggregate(pg.loss, w)
                if cfg.kl_coef > 0:
                    with torch.no_grad():
                        ref = policy.score(prompts, resp, mask, temperature=temperature, reference=True).logprobs
                    stats.forward_passes += 1
                    kl = kl_fn(logp, ref.detach())
                    total = total + cfg.kl_coef * kl
                    mb_sums["loss/kl"] += float(aggregate(kl.detach(), w))
                if cfg.entropy_coef > 0 and scored.entropy is not None:
                    total = total - cfg.entropy_coef * scored.entropy
                    mb_sums["loss/entropy"] += float(aggregate(scored.entropy.detach(), w))
                loss = aggregate(total, w)
                if not torch.isfinite(loss):
                    finite = False
                    break
                loss.backward()
                mb_sums["loss/total"] += float(loss.detach())
                mb_sums["loss/policy"] += float(pg_term.detach())
                with torch.no_grad():
                    log_ratio = logp.detach() - old
                    mb_sums["policy/clip_frac"] += float(aggregate(pg.clipped.float(), dw))
                    mb_sums["policy/approx_kl"] += float(aggregate(0.5 * log_ratio**2, dw))
                    mb_sums["policy/ratio_mean"] += float(aggregate(pg.ratio, dw))
                    mb_sums["policy/ratio_max"] = max(
                        mb_sums["policy/ratio_max"], float(torch.where(mask, pg.ratio, 0.0).max())
                    )
                    mb_sums["policy/nll"] += float(aggregate(-logp.detach(), dw))
            grad_norm = float("nan")
            if finite:
                if cfg.max_grad_norm > 0:
                    grad_norm = float(torch.nn.utils.clip_grad_norm_(params, cfg.max_grad_norm))
                else:
                    grad_norm = float(torch.nn.utils.clip_grad_norm_(params, float("inf")))
                finite = math.isfinite(grad_norm)
            guard.record(finite, where=f"(epoch {epoch}, minibatch {mb})")
            if not finite:
                optimizer.zero_grad(set_to_none=True)
                stats.skipped += 1
                continue
            set_warmup_lr(optimizer, cfg)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            steps_done += 1
            for k, v in mb_sums.items():
                sums[k] += v
            sums["policy/grad_norm"] += grad_norm
    stats.seconds = time.perf_counter() - t_start
    denom = max(1, steps_done)
    stats.metrics = {k: v / denom for k, v in sums.items()}
    stats.metrics["policy/updates"] = float(steps_done)
    stats.metrics["policy/lr"] = float(optimizer.param_groups[0]["lr"])
    stats.metrics["policy/skipped_updates"] = float(stats.skipped)
    stats.metrics["perf/update_tokens_per_s"] = stats.tokens * cfg.epochs / max(stats.seconds, 1e-9)
    return stats


__all__ = [
    "NonFiniteGuard",
    "NonFiniteLossError",
    "UpdateStats",
    "make_optimizer",
    "optimizer_steps_taken",
    "ppo_update",
    "set_warmup_lr",
]
