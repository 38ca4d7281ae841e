"""PPO losses, KL estimators and loss aggregations, each a function in a name registry.

Token-level notation (one row per step response, L tokens): logπ = current log-prob, logπ_old =
the sampling log-prob recorded by the rollout, A = the step's advantage broadcast to its tokens,
r = exp(logπ − logπ_old).

Registries: ``POLICY_LOSSES`` (``ppo_clip``, ``dual_clip``), ``KL_ESTIMATORS`` (``k1``, ``k2``,
``k3``), ``AGGREGATIONS`` (``token-mean``, ``seq-mean-token-mean``). Add a variant with the
registry's ``register`` decorator (``@POLICY_LOSSES.register("mine")``); the config accepts every
registered name, checked when the config is built.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from gaca.registry import Registry

LOG_RATIO_CLAMP = 20.0


@dataclass
class PolicyLossOutput:
    """Per-token policy loss and diagnostics."""

    loss: torch.Tensor
    """[B, L] float, the token losses (to be aggregated with the response mask)."""
    clipped: torch.Tensor
    """[B, L] bool, the clipped branch was taken (its gradient is zero)."""
    ratio: torch.Tensor
    """[B, L] float, r = exp(logπ − logπ_old), detached."""


PolicyLoss = Callable[..., PolicyLossOutput]
KLEstimator = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
Aggregation = Callable[[torch.Tensor], torch.Tensor]
POLICY_LOSSES: Registry[PolicyLoss] = Registry("policy loss")
"""``fn(logprobs, old_logprobs, advantages, *, clip_ratio, clip_ratio_c) -> PolicyLossOutput``."""
KL_ESTIMATORS: Registry[KLEstimator] = Registry("KL estimator")
"""``fn(logprobs, ref_logprobs) -> [B, L]``."""
AGGREGATIONS: Registry[Aggregation] = Registry("loss aggregation")
"""``fn(mask [B, L]) -> token weights [B, L]``."""


# ---------------------------------------------------------------------------------------------
# policy losses


@POLICY_LOSSES.register("ppo_clip")
def ppo_clip_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    *,
    clip_ratio: float = 0.2,
    clip_ratio_c: float = 3.0,
) -> PolicyLossOutput:
    """PPO-clip token loss: ℓ = max(−A·r, −A·clip(r, 1−ε, 1+ε)).

    Args:
      logprobs: [B, L] logπ (carries the gradient).
      old_logprobs: [B, L] logπ_old (no gradient).
      advantages: [B, L] A (no gradient).
      clip_ratio: ε.
      clip_ratio_c: unused here (see ``dual_clip``).
    Reference: Schulman et al. 2017, arXiv:1707.06347, eq. 7 (as a loss to minimise).
    """
    log_ratio = (logprobs - old_logprobs.detach()).clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    ratio = torch.exp(log_ratio)
    adv = advantages.detach()
    unclipped = -adv * ratio
    clipped = -adv * ratio.clamp(1.0 - clip_ratio, 1.0 + clip_ratio)
    loss = torch.maximum(unclipped, clipped)
    return PolicyLossOutput(loss=loss, clipped=(clipped > unclipped), ratio=ratio.detach())


@POLICY_LOSSES.register("dual_clip")
def dual_clip_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    *,
    clip_ratio: float = 0.2,
    clip_ratio_c: float = 3.0,
) -> PolicyLossOutput:
    """Dual-clip PPO: for A < 0 the PPO-clip loss is further bounded, ℓ = min(ℓ_clip, −c·A).

    For A >= 0 it equals ``ppo_clip``. Reference: Ye et al. 2020, arXiv:1912.09729, eq. 5.
    """
    base = ppo_clip_loss(logprobs, old_logprobs, advantages, clip_ratio=clip_ratio)
    adv = advantages.detach()
    bound = -adv * clip_ratio_c
    neg = adv < 0
    loss = torch.where(neg, torch.minimum(base.loss, bound), base.loss)
    clipped = base.clipped | (neg & (bound < base.loss))
    return PolicyLossOutput(loss=loss, clipped=clipped, ratio=base.ratio)


# ---------------------------------------------------------------------------------------------
# KL estimators of KL(π || π_ref), per token, from samples of π


@KL_ESTIMATORS.register("k1")
def kl_k1(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """k1 = logπ − logπ_ref (unbiased, high variance, can be negative)."""
    return logprobs - ref_logprobs


@KL_ESTIMATORS.register("k2")
def kl_k2(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """k2 = ½ (logπ − logπ_ref)²."""
    return 0.5 * (logprobs - ref_logprobs) ** 2


@KL_ESTIMATORS.register("k3")
def kl_k3(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """k3 = exp(d) − d − 1 with d = logπ_ref − logπ: unbiased, >= 0, low variance.

    Reference: J. Schulman, "Approximating KL divergence" (2020); verl's ``low_var_kl``.
    """
    d = (ref_logprobs - logprobs).clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    return torch.exp(d) - d - 1.0


# ---------------------------------------------------------------------------------------------
# aggregations: token weights w with loss = Σ_{b,l} w_{b,l}·ℓ_{b,l}, computed once per minibatch so
# that micro-batches (slices of the rows) sum to exactly the minibatch loss.


@AGGREGATIONS.register("token-mean")
def token_mean_weights(mask: torch.Tensor) -> torch.Tensor:
    """w = mask / Σ mask: the mean over all response tokens of the minibatch."""
    m = mask.to(torch.float32)
    return m / m.sum().clamp_min(1.0)


@AGGREGATIONS.register("seq-mean-token-mean")
def seq_mean_token_mean_weights(mask: torch.Tensor) -> torch.Tensor:
    """w_{b,l} = mask_{b,l} / (|mask_b| · B'): each row's token mean, averaged over the B' non-empty rows."""
    m = mask.to(torch.float32)
    per_row = m.sum(dim=1, keepdim=True)
    rows = (per_row > 0).sum().clamp_min(1)
    return m / per_row.clamp_min(1.0) / rows


def aggregate(values: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Σ w·ℓ, with padding (w = 0) unable to leak NaN/inf."""
    return torch.where(weights > 0, values * weights, torch.zeros((), dtype=values.dtype)).sum()


__all__ = [
    "AGGREGATIONS",
    "KL_ESTIMATORS",
    "POLICY_LOSSES",
    "Aggregation",
    "KLEstimator",
    "PolicyLoss",
    "PolicyLossOutput",
    "aggregate",
    "dual_clip_loss",
    "kl_k1",
    "kl_k2",
    "kl_k3",
    "ppo_clip_loss",
    "seq_mean_token_mean_weights",
    "token_mean_weights",
]
