"""The ``algorithm.gaca.*`` settings of a verl run, read from verl's algorithm config.

Everything under ``algorithm.gaca`` is either an advantage option with its docs/design.md name
(``gamma``, ``eps``, ``norm``, ``episode_stats``, ``omega``, ``criticality``, ``weight_map``, ``w0``,
``kappa``, ``w_min``, ``w_max``, ``mixture``, ``no_peer``, ``similarity``, ``conventions``, and the
peer estimators' ``uncertainty``, ``empg_*``, ``hgpo_*``: every ``AdvantageOptions`` field) or one
of the integration settings of :class:`VerlSettings` (where to find the step structure in verl's
batch). Options not set under ``algorithm.gaca`` fall back to the trainer's own keys:

- ``gamma``  <- ``algorithm.gamma`` (verl passes it to ``compute_advantage``; verl-agent's GiGPO
  uses it the same way);
- verl-agent's GiGPO keywords, which its trainer passes to ``compute_advantage``:
  ``step_advantage_w`` -> ``omega``, ``gigpo_mode`` (``mean_norm``/``mean_std_norm``) -> ``norm``,
  ``gigpo_enable_similarity`` with ``gigpo_similarity_thresh`` -> ``similarity``;
- ``norm``   <- ``algorithm.norm_adv_by_std_in_grpo`` (True: ``mean_std``, False: ``mean``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from gaca import validate
from gaca.advantage import AdvantageOptions

BatchLayout = Literal["auto", "step", "trajectory"]
LogprobSource = Literal["auto", "rollout_log_probs", "old_log_probs"]


@dataclass(frozen=True)
class VerlSettings:
    """Where the integration finds GACA's inputs in a verl ``DataProto``."""

    layout: BatchLayout = "auto"
    """'step': one row per step (verl-agent: non-tensor ``uid``, ``traj_uid``, ``anchor_obs``);
    'trajectory': one row per trajectory, one response-mask span per assistant turn (verl's
    multi-turn agent loop); 'auto': 'step' when the batch has ``traj_uid``, else 'trajectory'."""
    logprobs: LogprobSource = "auto"
    """Batch key of the sampling policy's log-probs [B, L]; 'auto': ``rollout_log_probs`` (the
    inference engine's, recorded when ``rollout.calculate_log_probs=True``) if present, else
    ``old_log_probs`` (the actor's recomputation before the update)."""
    step_reward_key: str = "rewards"
    """Step layout: key (non-tensor or tensor, [B]) of each step's environment reward r_t
    (verl-agent stores it as non-tensor ``rewards``). When the key is absent, a step's reward is
    the sum of its row's ``token_level_rewards``. Trajectory layout: unused (a turn's reward is the
    sum of ``token_level_rewards`` from its span's first token to the next span's)."""
    step_key: str = "step"
    """Step layout: key (non-tensor or tensor, [B] int) of each row's step index within its
    trajectory. When absent (verl-agent records none), the order is recovered from the discounted
    returns under ``returns_key`` and the step rewards (G_t = r_t + γ·G_{t+1}), which survives
    verl's ``trainer.balance_batch``; without those, the rows of a trajectory are taken to be in
    step order (with a warning)."""
    returns_key: str = "step_rewards"
    """Step layout: key ([B]) of each row's discounted return as verl-agent records it (penalty
    subtracted); used only to recover the step order when ``step_key`` is absent."""
    estimator: str | None = None
    """The gaca estimator to compute whenever verl asks for one of this integration's (``gaca``,
    ``gigpo``, ``fixed_mix``, ``empg``, ``hgpo``); None: the one asked for. verl-agent's trainer
    accepts only its own estimator names: keep ``algorithm.adv_estimator=gigpo`` there and set
    ``algorithm.gaca.estimator=gaca`` (or ``empg``, ``hgpo``) to train with it."""
    penalty: str = "auto"
    """Step layout: each row's invalid-action penalty. 'auto': verl-agent's, recovered exactly as
    (its ``episode_rewards``) − (the row's ``token_level_rewards`` sum) when the batch has
    ``episode_rewards`` and ``is_action_valid``, else none; 'none'; or a key ([B]) holding it."""

    def __post_init__(self) -> None:
        if self.estimator is not None:
            from gaca.advantage import ESTIMATORS

            ESTIMATORS.check(self.estimator, "algorithm.gaca.estimator")
        validate.literal_fields(self, "algorithm.gaca.")


@dataclass(frozen=True)
class ResolvedConfig:
    """The settings of one ``compute_advantage`` call."""

    settings: VerlSettings
    options: dict[str, Any]
    """Keyword options for ``gaca.advantage.compute_advantages`` (validated)."""


def _section(config: Any) -> dict[str, Any]:
    """The ``gaca`` sub-section of verl's algorithm config as a plain dict ({} when absent)."""
    if config is None:
        return {}
    if isinstance(config, Mapping) or hasattr(config, "get"):
        section = config.get("gaca", None)
    else:
        section = getattr(config, "gaca", None)
    if section is None:
        return {}
    try:  # OmegaConf DictConfig (what verl's trainers pass) -> plain container
        from omegaconf import DictConfig, OmegaConf

        if isinstance(section, DictConfig):
            section = OmegaConf.to_container(section, resolve=True)
    except ImportError:  # pragma: no cover - omegaconf ships with verl
        pass
    if dataclasses.is_dataclass(section) and not isinstance(section, type):
        section = dataclasses.asdict(section)
    if not isinstance(section, Mapping):
        raise ValueError(f"algorithm.gaca must be a mapping of settings, got {type(section).__name__}")
    return dict(section)


#: verl-agent's GiGPO keywords of ``compute_advantage`` -> (option, value map).
VERL_AGENT_KEYWORDS = {
    "step_advantage_w": ("omega", float),
    "gigpo_mode": ("norm", {"mean_norm": "mean", "mean_std_norm": "mean_std"}.__getitem__),
}


def _verl_agent_options(trainer_kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The options verl-agent's GiGPO keywords set (see module docstring)."""
    out = {}
    for key, (option, convert) in VERL_AGENT_KEYWORDS.items():
        if trainer_kwargs.get(key) is not None:
            try:
                out[option] = convert(trainer_kwargs[key])
            except (KeyError, ValueError, TypeError) as e:
                raise ValueError(f"verl-agent's {key}={trainer_kwargs[key]!r} is not understood") from e
    if trainer_kwargs.get("gigpo_enable_similarity"):
        out["similarity"] = float(trainer_kwargs.get("gigpo_similarity_thresh", 0.95))
    return out


def resolve_config(config: Any, *, gamma: float | None = None, norm_adv_by_std: bool | None = None,
                   trainer_kwargs: Mapping[str, Any] | None = None) -> ResolvedConfig:
    """Split ``algorithm.gaca`` into integration settings and advantage options.

    Args:
      config:          verl's ``algorithm`` config (DictConfig, dict, dataclass) or None.
      gamma:           verl's ``algorithm.gamma``; used when ``algorithm.gaca.gamma`` is unset.
      norm_adv_by_std: verl's ``algorithm.norm_adv_by_std_in_grpo``; gives ``norm`` when
                       ``algorithm.gaca.norm`` is unset.
      trainer_kwargs:  further keywords the trainer passed to ``compute_advantage`` (verl-agent's
                       GiGPO settings; see module docstring).
    Raises:
      ValueError for an unknown key (listing the valid ones) or a bad value.
    """
    section = _section(config)
    setting_names = {f.name for f in dataclasses.fields(VerlSettings)}
    option_names = set(AdvantageOptions.names())
    unknown = sorted(set(section) - setting_names - option_names)
    if unknown:
        raise ValueError(
            f"unknown algorithm.gaca key(s) {unknown}; valid: options {sorted(option_names)}, "
            f"integration settings {sorted(setting_names)}"
        )
    settings = VerlSettings(**{k: v for k, v in section.items() if k in setting_names})
    options = {k: v for k, v in section.items() if k in option_names}
    if "gamma" not in options and gamma is not None:
        options["gamma"] = float(gamma)
    for option, value in _verl_agent_options(trainer_kwargs or {}).items():
        options.setdefault(option, value)
    if "norm" not in options and norm_adv_by_std is not None:
        options["norm"] = "mean_std" if norm_adv_by_std else "mean"
    AdvantageOptions.from_kwargs(**options)  # validate now, with the option's name in the error
    return ResolvedConfig(settings=settings, options=options)


__all__ = ["ResolvedConfig", "VerlSettings", "resolve_config"]
