"""The estimator registry: GRPO, RLOO, GiGPO, fixed mixing and GACA behind one call signature.

    out = compute_advantages(batch, "gaca", gamma=0.95, w0=0.5, kappa=0.25)

Each estimator is a function ``(batch, layout, options) -> AdvantageOutput`` registered by name
with ``@register_estimator``; adding one is adding a function, not another ``elif``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from gaca.advantage.batch import StepBatch
from gaca.advantage.criticality import criticality_score, response_nll
from gaca.advantage.episode import episode_advantage, episode_returns
from gaca.advantage.layout import Layout, trajectory_layout
from gaca.advantage.mixing import mix_advantages, mixing_weight
from gaca.advantage.options import AdvantageOptions
from gaca.advantage.step import discounted_returns, step_groups, step_level_advantage
from gaca.registry import Registry


@dataclass(frozen=True)
class AdvantageOutput:
    """Per-step advantage and its diagnostics, all [N] in the batch's row order.

    Attributes:
      advantage:   final A_i fed to the policy loss (dtype of ``StepBatch.reward``).
      episode:     A^E of the row's trajectory.
      step_level:  A^S_i (0 for estimators without a step level, and for rows without a peer).
      weight:      w_i, the weight of the step-level signal (0 where unused).
      criticality: c_i (0 for estimators that do not compute it).
      has_peer:    bool, the row's step group has another member (False where not computed).
      nll:         ℓ_i, the mean per-token NLL of the response (0 where not computed).
    """

    advantage: torch.Tensor
    episode: torch.Tensor
    step_level: torch.Tensor
    weight: torch.Tensor
    criticality: torch.Tensor
    has_peer: torch.Tensor
    nll: torch.Tensor


EstimatorFn = Callable[[StepBatch, Layout, AdvantageOptions], AdvantageOutput]
ESTIMATORS: Registry[EstimatorFn] = Registry("advantage estimator")


def register_estimator(name: str, *, replace: bool = False) -> Callable[[EstimatorFn], EstimatorFn]:
    """Decorator: register ``fn`` under ``name`` in ``ESTIMATORS`` (a name taken twice is an error)."""
    return ESTIMATORS.register(name, replace=replace)  # type: ignore[return-value]


def _output(batch: StepBatch, advantage: torch.Tensor, episode: torch.Tensor, **diagnostics: torch.Tensor):
    dtype = batch.reward.dtype
    zeros = torch.zeros(len(batch), dtype=dtype, device=batch.reward.device)
    return AdvantageOutput(
        advantage=advantage.to(dtype),
        episode=episode.to(dtype),
        step_level=diagnostics.get("step_level", zeros).to(dtype),
        weight=diagnostics.get("weight", zeros).to(dtype),
        criticality=diagnostics.get("criticality", zeros).to(dtype),
        has_peer=diagnostics.get("has_peer", torch.zeros_like(zeros, dtype=torch.bool)),
        nll=diagnostics.get("nll", zeros).to(dtype),
    )


def _returns_reward(batch: StepBatch, options: AdvantageOptions) -> torch.Tensor:
    """The step rewards returns are summed from: with gaca's conventions the invalid-action penalty
    is part of them; with verl-agent's it is subtracted later, from each row's own scores."""
    if batch.penalty is None or options.conventions == "verl-agent":
        return batch.reward
    return batch.reward - batch.penalty.to(batch.reward.dtype)


def _row_penalty(batch: StepBatch, options: AdvantageOptions) -> torch.Tensor | None:
    return batch.penalty if options.conventions == "verl-agent" else None


def _row_weight(batch: StepBatch, options: AdvantageOptions) -> torch.Tensor | None:
    """How often statistics over step rows count each row: its ``count`` (the trainer's padding
    copies included) under verl-agent's conventions, once under gaca's."""
    return batch.count if options.conventions == "verl-agent" else None


def _episode(batch: StepBatch, layout: Layout, options: AdvantageOptions, *, leave_one_out: bool = False):
    returns = episode_returns(_returns_reward(batch, options), layout.traj, layout.num_trajs)
    return episode_advantage(
        returns, layout, norm=options.episode_norm(leave_one_out), eps=options.eps,
        episode_stats=options.resolved_episode_stats(), leave_one_out=leave_one_out,
        row_penalty=_row_penalty(batch, options), lone_keeps_value=options.conventions == "verl-agent",
        row_weight=_row_weight(batch, options),
    )


def _step_level(batch: StepBatch, layout: Layout, options: AdvantageOptions):
    returns = discounted_returns(_returns_reward(batch, options), layout, options.gamma)
    penalty = _row_penalty(batch, options)
    if penalty is not None:
        returns = returns - penalty.to(returns.dtype)
    groups, num_groups = step_groups(
        layout, batch.anchor, similarity=options.similarity, anchor_text=batch.anchor_text,
        conventions=options.conventions,
    )
    return step_level_advantage(returns, groups, num_groups, norm=options.norm or "mean_std", eps=options.eps,
                                weight=_row_weight(batch, options))


@register_estimator("grpo")
def grpo(batch: StepBatch, layout: Layout, options: AdvantageOptions) -> AdvantageOutput:
    """GRPO: A_i = A^E(τ(i)), the episode-level advantage only."""
    episode = _episode(batch, layout, options)
    return _output(batch, episode, episode)


@register_estimator("rloo")
def rloo(batch: StepBatch, layout: Layout, options: AdvantageOptions) -> AdvantageOutput:
    """RLOO: A_i = R(τ) − mean_{τ'≠τ} R(τ'), unscaled (Ahmadian et al. 2024, arXiv:2402.14740; verl's
    ``rloo``). With an explicit norm='mean_std' it is divided by the group std: GRPO × n/(n−1)."""
    episode = _episode(batch, layout, options, leave_one_out=True)
    return _output(batch, episode, episode)


#: The optional inputs every estimator may read, beyond the ids, steps and rewards.
OPTIONAL_INPUTS = frozenset({"anchor", "logprobs"})


def estimator_inputs(estimator: str) -> frozenset[str]:
    """Which of ``OPTIONAL_INPUTS`` ``estimator`` reads (its function's ``inputs`` attribute; all of
    them when it does not say). A caller that knows an input is unread may pass placeholders for it
    (e.g. the verl plugin skips the anchors and log-probs of a GRPO batch)."""
    return frozenset(getattr(ESTIMATORS[estimator], "inputs", OPTIONAL_INPUTS))


grpo.inputs = rloo.inputs = frozenset()  # type: ignore[attr-defined]


@register_estimator("gigpo")
def gigpo(batch: StepBatch, layout: Layout, options: AdvantageOptions) -> AdvantageOutput:
    """GiGPO: A_i = A^E(τ(i)) + ω·A^S_i (Feng et al. 2025, arXiv:2505.10978)."""
    episode = _episode(batch, layout, options)
    step_level, has_peer = _step_level(batch, layout, options)
    advantage = episode + options.omega * step_level
    return _output(batch, advantage, episode, step_level=step_level, has_peer=has_peer)


def _mixed(batch: StepBatch, layout: Layout, options: AdvantageOptions, *, kappa: float) -> AdvantageOutput:
    episode = _episode(batch, layout, options)
    step_level, has_peer = _step_level(batch, layout, options)
    if kappa == 0.0:  # fixed weight: the NLL does not enter, so skip computing it
        nll = criticality = torch.zeros(len(batch), dtype=torch.float64, device=batch.reward.device)
    else:
        nll = response_nll(batch.logprob_sum, batch.token_count)
        criticality = criticality_score(nll, layout, method=options.criticality, eps=options.eps)
    weight = mixing_weight(
        criticality, has_peer, w0=options.w0, kappa=kappa, w_min=options.w_min, w_max=options.w_max,
        weight_map=options.weight_map, no_peer=options.no_peer,
    )
    advantage = mix_advantages(
        episode, step_level, weight, mixture=options.mixture, omega=options.omega, w0=options.w0
    )
    return _output(
        batch, advantage, episode, step_level=step_level, weight=weight, criticality=criticality,
        has_peer=has_peer, nll=nll,
    )


@register_estimator("fixed_mix")
def fixed_mix(batch: StepBatch, layout: Layout, options: AdvantageOptions) -> AdvantageOutput:
    """Fixed mixing: GACA with κ = 0, i.e. every step with a peer gets weight w0."""
    return _mixed(batch, layout, options, kappa=0.0)


gigpo.inputs = fixed_mix.inputs = frozenset({"anchor"})  # type: ignore[attr-defined]


@register_estimator("gaca")
def gaca(batch: StepBatch, layout: Layout, options: AdvantageOptions) -> AdvantageOutput:
    """GACA: A_i = (1 − w_i)·A^E + w_i·A^S_i with w_i = clip(w0 + κ·c_i), c_i the step's
    trajectory-normalized response NLL (arXiv:2609.12424; see DESIGN.md for the reconstruction)."""
    return _mixed(batch, layout, options, kappa=options.kappa)


def compute_advantages(batch: StepBatch, estimator: str = "gaca", **options: Any) -> AdvantageOutput:
    """Per-step advantages of ``batch`` by the registered ``estimator``.

    Args:
      batch:     the step table.
      estimator: a name in ``ESTIMATORS`` (grpo, rloo, gigpo, fixed_mix, gaca, or one registered).
      options:   ``AdvantageOptions`` fields by keyword (gamma, eps, norm, ...).
    Returns:
      ``AdvantageOutput``, every field [N] in the batch's row order.
    Raises:
      ValueError for an unknown estimator or option (listing the valid ones) or a bad value.
    """
    fn = ESTIMATORS[estimator]
    if not isinstance(batch, StepBatch):
        raise TypeError(f"compute_advantages expects a StepBatch, got {type(batch).__name__}")
    resolved = AdvantageOptions.from_kwargs(**options)
    with torch.no_grad():
        return fn(batch, trajectory_layout(batch), resolved)


def broadcast_to_tokens(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Give each response token its step's scalar: out_ik = values_i · mask_ik.

    Args:
      values: [N] float per-step values (e.g. ``AdvantageOutput.advantage``).
      mask:   [N, L] bool response mask.
    Returns:
      [N, L] float, 0 on padding.
    """
    if values.dim() != 1 or mask.dim() != 2 or mask.shape[0] != values.shape[0]:
        raise ValueError(f"broadcast_to_tokens needs values [N] and mask [N, L], got {tuple(values.shape)}"
                         f" and {tuple(mask.shape)}")
    return torch.where(mask, values.unsqueeze(1), torch.zeros((), dtype=values.dtype))


__all__ = [
    "ESTIMATORS",
    "OPTIONAL_INPUTS",
    "AdvantageOutput",
    "EstimatorFn",
    "broadcast_to_tokens",
    "compute_advantages",
    "estimator_inputs",
    "register_estimator",
]
