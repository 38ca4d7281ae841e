"""One PPO update over an iteration's step rows (epochs x minibatches x micro-batches, AdamW).

For each epoch the rows are shuffled and split into ``num_minibatches`` minibatches; each
minibatch is one optimizer step. Its loss

    J = Σ_{b,l} w_{b,l} · ( ℓ^PG_{b,l} + β_KL · KL_{b,l} − β_H · H_{b,l} )

uses the aggregation weights w of the whole minibatch (``gaca.train.losses.AGGREGATIONS``), so the
micro-batches' losses (``minibatch_loss``, one backward each) add up to exactly the minibatch loss
and their gradients to its gradient. The terms (b, l) are what the rollout's action mode rescores
(``RolloutBatch.rows``): the response tokens (generate), or one action-level log π(a|s) per row
(choose). logπ_old is the rollout's sampling log-prob (the update starts on-policy); the KL is to
the reference policy. Metrics are means over all minibatches, never the last one.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch

from gaca.policy.protocol import Policy
from gaca.rollout.collect import RolloutBatch
from gaca.rollout.modes import ResponseRows
from gaca.train.config import PPOConfig
from gaca.train.losses import AGGREGATIONS, KL_ESTIMATORS, POLICY_LOSSES, aggregate, token_mean_weights

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
class MicroBatch:
    """A slice of a minibatch's rows, with the minibatch's token weights for those rows."""

    rows: ResponseRows
    """The slice's rows, trimmed to width W (``ResponseRows.select``)."""
    advantages: torch.Tensor
    """float [B], one per row."""
    weights: torch.Tensor
    """float [B, W], the loss aggregation's weights (a slice of the whole minibatch's)."""
    diag_weights: torch.Tensor
    """float [B, W], token-mean weights of the minibatch (for the diagnostics, whatever the aggregation)."""

    @property
    def mask(self) -> torch.Tensor:
        """bool [B, W]: the loss terms."""
        return self.rows.mask

    @property
    def old_logprobs(self) -> torch.Tensor:
        """float [B, W], the sampling log-probs."""
        return self.rows.old_logprobs


@dataclass
class LossTerms:
    """One micro-batch's share of the minibatch loss and of each diagnostic (already weighted)."""

    loss: torch.Tensor
    """Scalar, differentiable: Σ w·(ℓ^PG + β_KL·KL − β_H·H) over the micro-batch's tokens."""
    diagnostics: dict[str, float]
    """``loss/…`` and ``policy/…`` shares; ``policy/ratio_max`` is a max, everything else adds up."""
    forward_passes: int


def minibatch_loss(policy: Policy, mb: MicroBatch, cfg: PPOConfig, *, temperature: float) -> LossTerms:
    """The PPO loss of one micro-batch, weighted so that a minibatch's micro-batches sum to its loss.

    ℓ^PG is ``POLICY_LOSSES[cfg.policy_loss]`` (clipped surrogate), KL is ``KL_ESTIMATORS[cfg.kl_estimator]``
    to the reference policy (scored only when ``cfg.kl_coef > 0``), H the per-token entropy (only when
    ``cfg.entropy_coef > 0``). Scores use the sampling ``temperature``, so that r = 1 on-policy.
    """
    scored = mb.rows.score(policy, temperature=temperature, with_entropy=cfg.entropy_coef > 0)
    passes = 1
    logp = scored.logprobs
    adv = mb.advantages.unsqueeze(1).expand_as(logp)
    pg = POLICY_LOSSES[cfg.policy_loss](logp, mb.old_logprobs, adv, clip_ratio=cfg.clip_ratio,
                                        clip_ratio_c=cfg.clip_ratio_c)
    total = pg.loss
    diag: dict[str, float] = {}
    if cfg.kl_coef > 0:
        with torch.no_grad():
            ref = mb.rows.score(policy, temperature=temperature, reference=True).logprobs
        passes += 1
        kl = KL_ESTIMATORS[cfg.kl_estimator](logp, ref.detach())
        total = total + cfg.kl_coef * kl
        diag["loss/kl"] = float(aggregate(kl.detach(), mb.weights))
    if cfg.entropy_coef > 0 and scored.entropy is not None:
        total = total - cfg.entropy_coef * scored.entropy
        diag["loss/entropy"] = float(aggregate(scored.entropy.detach(), mb.weights))
    loss = aggregate(total, mb.weights)
    with torch.no_grad():
        dw = mb.diag_weights
        diag.update({
            "loss/total": float(loss.detach()),
            "loss/policy": float(aggregate(pg.loss, mb.weights).detach()),
            "policy/clip_frac": float(aggregate(pg.clipped.float(), dw)),
            "policy/approx_kl": float(aggregate(0.5 * (logp.detach() - mb.old_logprobs) ** 2, dw)),
            "policy/ratio_mean": float(aggregate(pg.ratio, dw)),
            "policy/ratio_max": float(torch.where(mb.mask, pg.ratio, 0.0).max()),
            "policy/nll": float(aggregate(-logp.detach(), dw)),
        })
    return LossTerms(loss, diag, passes)


def minibatches(num_rows: int, num_minibatches: int, generator: torch.Generator | None) -> Iterator[torch.Tensor]:
    """One epoch's minibatches: a shuffle of the rows split into ``num_minibatches`` parts (at most one per row)."""
    yield from torch.tensor_split(torch.randperm(num_rows, generator=generator), min(num_minibatches, num_rows))


def micro_batches(batch: RolloutBatch, rows: torch.Tensor, advantages: torch.Tensor,
                  cfg: PPOConfig) -> Iterator[MicroBatch]:
    """The minibatch ``rows`` in slices of ``cfg.micro_batch_size``, trimmed to their longest response.

    Rows of similar prompt length share micro-batches (less left padding to compute; the loss is a
    sum over rows, so their order does not change it).
    """
    order = torch.argsort(batch.rows.prompt_lengths[rows], stable=True)
    rows = rows[order]
    mask_all = batch.rows.mask[rows]
    weights = AGGREGATIONS[cfg.loss_agg](mask_all)
    diag_weights = token_mean_weights(mask_all)
    for start in range(0, len(rows), cfg.micro_batch_size):
        local = slice(start, start + cfg.micro_batch_size)
        idx = rows[local]
        sliced = batch.rows.select(idx)
        width = sliced.mask.shape[1]
        yield MicroBatch(
            rows=sliced,
            advantages=advantages[idx],
            weights=weights[local, :width],
            diag_weights=diag_weights[local, :width],
        )


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


def make_optimizer(policy: Policy, cfg: PPOConfig) -> torch.optim.Optimizer:
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


def _accumulate(into: dict[str, float], terms: dict[str, float]) -> None:
    for k, v in terms.items():
        into[k] = max(into.get(k, 0.0), v) if k == "policy/ratio_max" else into.get(k, 0.0) + v


def ppo_update(
    policy: Policy,
    optimizer: torch.optim.Optimizer,
    batch: RolloutBatch,
    advantages: torch.Tensor,
    cfg: PPOConfig,
    *,
    generator: torch.Generator | None = None,
    guard: NonFiniteGuard | None = None,
) -> UpdateStats:
    """Run ``cfg.epochs`` x ``cfg.num_minibatches`` PPO steps on the batch.

    Args:
      policy: scores responses, exposes its parameters (``Policy``).
      optimizer: from ``make_optimizer``.
      batch: the rollout (its tokens, sampling log-probs and temperature).
      advantages: [N] float, one scalar per step row, broadcast to its tokens.
      cfg: loss and batching options.
      generator: RNG of the minibatch shuffle.
      guard: counts consecutive non-finite updates (raises ``NonFiniteLossError`` at its limit).
    """
    n = batch.num_rows
    if advantages.shape != (n,):
        raise ValueError(f"advantages must have shape [N] = ({n},), got {tuple(advantages.shape)}")
    guard = guard if guard is not None else NonFiniteGuard()
    params = [p for group in optimizer.param_groups for p in group["params"]]
    adv = advantages.detach().to(torch.float32)
    sums: dict[str, float] = {}
    stats = UpdateStats()
    t_start = time.perf_counter()
    steps_done = 0
    for epoch in range(cfg.epochs):
        for mb, rows in enumerate(minibatches(n, cfg.num_minibatches, generator)):
            optimizer.zero_grad(set_to_none=True)
            mb_sums: dict[str, float] | None = {}
            for micro in micro_batches(batch, rows, adv, cfg):
                terms = minibatch_loss(policy, micro, cfg, temperature=batch.temperature)
                stats.forward_passes += terms.forward_passes
                stats.tokens += int(micro.mask.sum()) if epoch == 0 else 0
                if not torch.isfinite(terms.loss):
                    mb_sums = None
                    break
                terms.loss.backward()
                _accumulate(mb_sums, terms.diagnostics)
            grad_norm = float("nan")
            if mb_sums is not None:
                max_norm = cfg.max_grad_norm if cfg.max_grad_norm > 0 else float("inf")
                grad_norm = float(torch.nn.utils.clip_grad_norm_(params, max_norm))
            finite = mb_sums is not None and math.isfinite(grad_norm)
            guard.record(finite, where=f"(epoch {epoch}, minibatch {mb})")
            if not finite:
                optimizer.zero_grad(set_to_none=True)
                stats.skipped += 1
                continue
            set_warmup_lr(optimizer, cfg)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            steps_done += 1
            for k, v in {**mb_sums, "policy/grad_norm": grad_norm}.items():  # type: ignore[dict-item]
                sums[k] = sums.get(k, 0.0) + v
    stats.seconds = time.perf_counter() - t_start
    stats.metrics = {k: v / max(1, steps_done) for k, v in sums.items()}
    stats.metrics.update({
        "policy/updates": float(steps_done),
        "policy/lr": float(optimizer.param_groups[0]["lr"]),
        "policy/skipped_updates": float(stats.skipped),
        "perf/update_tokens_per_s": stats.tokens * cfg.epochs / max(stats.seconds, 1e-9),
    })
    return stats


__all__ = [
    "LossTerms",
    "MicroBatch",
    "NonFiniteGuard",
    "NonFiniteLossError",
    "UpdateStats",
    "make_optimizer",
    "micro_batches",
    "minibatch_loss",
    "minibatches",
    "optimizer_steps_taken",
    "ppo_update",
    "set_warmup_lr",
]
