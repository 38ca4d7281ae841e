"""The estimator registry: GRPO, RLOO, GiGPO, fixed mixing, GACA, EMPG and HGPO behind one call
signature.

    out = compute_advantages(batch, "gaca", gamma=0.95, w0=0.5, kappa=0.25)

Each estimator is a function ``(batch, layout, options) -> AdvantageOutput`` registered by name
with ``@register_estimator``, which also declares what it reads (``estimator_info``); adding one is
adding a function, not another ``elif``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch

from gaca.advantage.batch import StepBatch
from gaca.advantage.criticality import criticality_score, response_nll
from gaca.advantage.empg import empg_advantage
from gaca.advantage.episode import episode_advantage, episode_returns
from gaca.advantage.hgpo import hgpo_advantage, history_groups
from gaca.advantage.layout import Layout, trajectory_layout
from gaca.advantage.mixing import mix_advantages, mixing_weight
from gaca.advantage.options import AdvantageOptions
from gaca.advantage.segments import segment_all_equal
from gaca.advantage.step import anchor_keys, discounted_returns, step_groups, step_level_advantage
from gaca.advantage.uncertainty import step_uncertainty
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

#: The optional inputs an estimator may read, beyond the ids, steps and rewards: the anchors, the
#: log-probs (and mask), the rollout's per-step entropy.
OPTIONAL_INPUTS = frozenset({"anchor", "logprobs", "entropy"})


@dataclass(frozen=True)
class EstimatorInfo:
    """What a registered estimator reads, declared at registration.

    Attributes:
      inputs:  the ``OPTIONAL_INPUTS`` it reads; a caller that knows an input is unread may pass
               placeholders for it (the verl plugin skips the anchors and log-probs of a GRPO batch).
      options: the ``AdvantageOptions`` fields its output depends on.
    """

    inputs: frozenset[str]
    options: frozenset[str]


_INFO: dict[str, tuple[EstimatorFn, EstimatorInfo]] = {}


def register_estimator(name: str, *, inputs: Iterable[str] | None = None, options: Iterable[str] | None = None,
                       replace: bool = False) -> Callable[[EstimatorFn], EstimatorFn]:
    """Decorator: register ``fn`` under ``name`` in ``ESTIMATORS`` (a name taken twice is an error).

    Args:
      inputs:  the ``OPTIONAL_INPUTS`` it reads (None: all of them).
      options: the ``AdvantageOptions`` fields it reads (None: all of them).
    Raises:
      ValueError for an unknown input or option name.
    """
    info = EstimatorInfo(
        inputs=_known("input", OPTIONAL_INPUTS if inputs is None else inputs, OPTIONAL_INPUTS),
        options=_known("option", AdvantageOptions.names() if options is None else options, AdvantageOptions.names()),
    )

    def add(fn: EstimatorFn) -> EstimatorFn:
        ESTIMATORS.register(name, fn, replace=replace)
        _INFO[name] = (fn, info)
        return fn

    return add


def _known(kind: str, names: Iterable[str], valid: Iterable[str]) -> frozenset[str]:
    names, valid = frozenset(names), frozenset(valid)
    if names - valid:
        raise ValueError(f"unknown estimator {kind}(s) {sorted(names - valid)}; valid: {sorted(valid)}")
    return names


def estimator_info(estimator: str) -> EstimatorInfo:
    """What ``estimator`` reads, as declared at registration. For a function registered otherwise
    (``ESTIMATORS.register``): its ``inputs`` attribute if it has one, else every input, and every option."""
    fn = ESTIMATORS[estimator]
    entry = _INFO.get(estimator)
    if entry is not None and entry[0] is fn:
        return entry[1]
    return EstimatorInfo(inputs=frozenset(getattr(fn, "inputs", OPTIONAL_INPUTS)),
                         options=frozenset(AdvantageOptions.names()))


def estimator_inputs(estimator: str) -> frozenset[str]:
    """Which of ``OPTIONAL_INPUTS`` ``estimator`` reads (``estimator_info``)."""
    return estimator_info(estimator).inputs


def estimator_options(estimator: str) -> frozenset[str]:
    """Which ``AdvantageOptions`` fields ``estimator``'s output depends on (``estimator_info``)."""
    return estimator_info(estimator).options


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


def _step_returns(batch: StepBatch, layout: Layout, options: AdvantageOptions) -> torch.Tensor:
    """G_i, each row's discounted return, with the penalty where the conventions put it."""
    returns = discounted_returns(_returns_reward(batch, options), layout, options.gamma)
    penalty = _row_penalty(batch, options)
    if penalty is not None:
        returns = returns - penalty.to(returns.dtype)
    return returns


def _step_level(batch: StepBatch, layout: Layout, options: AdvantageOptions):
    groups, num_groups = step_groups(
        layout, batch.anchor, similarity=options.similarity, anchor_text=batch.anchor_text,
        conventions=options.conventions,
    )
    return step_level_advantage(_step_returns(batch, layout, options), groups, num_groups,
                                norm=options.norm or "mean_std", eps=options.eps, weight=_row_weight(batch, options))


#: The options every estimator reads: its episode level's (or its base's) normalization.
_EPISODE_OPTIONS = frozenset({"eps", "norm", "episode_stats", "conventions"})
_GIGPO_OPTIONS = _EPISODE_OPTIONS | {"gamma", "omega", "similarity"}
_MIX_OPTIONS = _EPISODE_OPTIONS | {"gamma", "similarity", "w0", "w_min", "w_max", "weight_map", "mixture", "omega",
                                   "no_peer"}


@register_estimator("grpo", inputs=(), options=_EPISODE_OPTIONS)
def grpo(batch: StepBatch, layout: Layout, options: AdvantageOptions) -> AdvantageOutput:
    """GRPO: A_i = A^E(τ(i)), the episode-level advantage only."""
    episode = _episode(batch, layout, options)
    return _output(batch, episode, episode)


@register_estimator("rloo", inputs=(), options=_EPISODE_OPTIONS)
def rloo(batch: StepBatch, layout: Layout, options: AdvantageOptions) -> AdvantageOutput:
    """RLOO: A_i = R(τ) − mean_{τ'≠τ} R(τ'), unscaled (Ahmadian et al. 2024, arXiv:2402.14740; verl's
    ``rloo``). With an explicit norm='mean_std' it is divided by the group std: GRPO × n/(n−1)."""
    episode = _episode(batch, layout, options, leave_one_out=True)
    return _output(batch, episode, episode)


@register_estimator("gigpo", inputs=("anchor",), options=_GIGPO_OPTIONS)
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


@register_estimator("fixed_mix", inputs=("anchor",), options=_MIX_OPTIONS)
def fixed_mix(batch: StepBatch, layout: Layout, options: AdvantageOptions) -> AdvantageOutput:
    """Fixed mixing: GACA with κ = 0, i.e. every step with a peer gets weight w0."""
    return _mixed(batch, layout, options, kappa=0.0)


@register_estimator("gaca", inputs=("anchor", "logprobs"), options=_MIX_OPTIONS | {"kappa", "criticality"})
def gaca(batch: StepBatch, layout: Layout, options: AdvantageOptions) -> AdvantageOutput:
    """GACA: A_i = (1 − w_i)·A^E + w_i·A^S_i with w_i = clip(w0 + κ·c_i), c_i the step's
    trajectory-normalized response NLL (arXiv:2609.12424; docs/design.md states the reconstruction)."""
    return _mixed(batch, layout, options, kappa=options.kappa)


@register_estimator(
    "empg", inputs=("logprobs", "entropy"),
    options=_EPISODE_OPTIONS | {"uncertainty", "empg_k", "empg_k_future", "empg_zeta", "empg_scope"},
)
def empg(batch: StepBatch, layout: Layout, options: AdvantageOptions) -> AdvantageOutput:
    """EMPG (Wang et al. 2025, arXiv:2509.09265; ``gaca.advantage.empg``): A_i = A'_i − mean A',
    A'_i = g_i·A^E(τ(i)) + ζ·f_{i+1}, g = exp(−k·H̃)/mean exp(−k·H̃), f = exp(−k_f·H̃), H̃ the
    step uncertainty (``uncertainty``: the rollout's entropy, or the response NLL) min-max
    normalized over the batch (``empg_scope``).

    Diagnostics: ``weight`` = g_i, ``criticality`` = H̃_i, ``nll`` = ℓ_i, ``step_level`` = 0.
    """
    episode = _episode(batch, layout, options)
    terms = empg_advantage(
        episode, step_uncertainty(batch, options.uncertainty), layout, scope=options.empg_scope, k=options.empg_k,
        k_future=options.empg_k_future, zeta=options.empg_zeta, eps=options.eps,
    )
    return _output(batch, terms.advantage, episode, weight=terms.scale, criticality=terms.uncertainty,
                   nll=response_nll(batch.logprob_sum, batch.token_count))


def _flat_episode_groups(batch: StepBatch, layout: Layout, options: AdvantageOptions) -> torch.Tensor:
    """[N] bool: the scores the episode level compares in row i's episode group are all equal
    (R(τ), less the row's penalty under verl-agent's conventions), so its A^E carries no signal."""
    returns = episode_returns(_returns_reward(batch, options), layout.traj, layout.num_trajs)
    scores = returns.index_select(0, layout.traj)
    penalty = _row_penalty(batch, options)
    if penalty is not None:
        scores = scores - penalty.to(scores.dtype)
    return segment_all_equal(scores, layout.group, layout.num_groups).index_select(0, layout.group)


@register_estimator(
    "hgpo", inputs=("anchor",),
    options=_EPISODE_OPTIONS | {"gamma", "similarity", "hgpo_history", "hgpo_alpha", "hgpo_base", "hgpo_zero_levels"},
)
def hgpo(batch: StepBatch, layout: Layout, options: AdvantageOptions) -> AdvantageOutput:
    """HGPO (He et al. 2026, arXiv:2602.22817; ``gaca.advantage.hgpo``): A_i = Σ_j w_j·A_j,i /
    (Σ_j w_j + eps) over the levels j = 1..K+1 where i has a peer (and the level's returns are not all
    equal), A_j the return normalized among the group's steps whose last j anchors equal i's,
    w_j = (j + 1)^α; with ``hgpo_base`` also A^E as level 0 (weight 1).

    Diagnostics: ``step_level`` = the history levels' part of A_i, ``weight`` = their share of the
    weights, ``has_peer`` = a level-1 (GiGPO) peer.
    """
    episode = _episode(batch, layout, options)
    base_valid = None
    if options.hgpo_base:
        base_valid = torch.ones(len(batch), dtype=torch.bool, device=episode.device)
        if options.hgpo_zero_levels == "skip":
            base_valid = ~_flat_episode_groups(batch, layout, options)
    keys = anchor_keys(layout, batch.anchor, similarity=options.similarity, anchor_text=batch.anchor_text,
                       conventions=options.conventions)
    terms = hgpo_advantage(
        _step_returns(batch, layout, options), history_groups(layout, keys, options.hgpo_history),
        alpha=options.hgpo_alpha, norm=options.norm or "mean_std", eps=options.eps,
        unbiased=options.conventions != "verl-agent", zero_levels=options.hgpo_zero_levels,
        base=episode if options.hgpo_base else None, base_valid=base_valid,
    )
    return _output(batch, terms.advantage, episode, step_level=terms.step_level, weight=terms.weight,
                   has_peer=terms.has_peer)


def compute_advantages(batch: StepBatch, estimator: str = "gaca", options: AdvantageOptions | None = None,
                       **overrides: Any) -> AdvantageOutput:
    """Per-step advantages of ``batch`` by the registered ``estimator``.

    Args:
      batch:     the step table.
      estimator: a name in ``ESTIMATORS`` (grpo, rloo, gigpo, fixed_mix, gaca, empg, hgpo, or one
                 registered).
      options:   the ``AdvantageOptions`` (None: the defaults).
      overrides: ``AdvantageOptions`` fields by keyword (gamma, eps, norm, ...), on top of ``options``:
                 ``compute_advantages(batch, "gaca", kappa=0.5)`` is the keyword form.
    Returns:
      ``AdvantageOutput``, every field [N] in the batch's row order.
    Raises:
      ValueError for an unknown estimator or option (listing the valid ones) or a bad value.
    """
    fn = ESTIMATORS[estimator]
    if not isinstance(batch, StepBatch):
        raise TypeError(f"compute_advantages expects a StepBatch, got {type(batch).__name__}")
    resolved = AdvantageOptions.from_kwargs(**overrides) if options is None else options.replace(**overrides)
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
    "EstimatorInfo",
    "broadcast_to_tokens",
    "compute_advantages",
    "estimator_info",
    "estimator_inputs",
    "estimator_options",
    "register_estimator",
]
