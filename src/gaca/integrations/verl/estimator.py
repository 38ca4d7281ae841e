"""GACA's estimators inside verl: registry entries and the ``compute_advantage`` wrapper.

verl (0.9.1) hands a registered advantage estimator only ``token_level_rewards``,
``response_mask``, ``index`` (= non-tensor ``uid``) and ``config``. GACA also needs the rollout's
log-probs, the trajectory/step structure, the anchors and the step rewards, all of which are in the
``DataProto`` that ``verl.trainer.ppo.ray_trainer.compute_advantage`` receives. So :func:`install`

1. registers ``gaca``, ``gigpo``, ``fixed_mix``, ``empg`` and ``hgpo`` in
   ``core_algos.ADV_ESTIMATOR_REGISTRY``, verl's own extension point (so verl's config validation
   and ``get_adv_estimator_fn`` know the names), and
2. routes ``ray_trainer.compute_advantage`` through :func:`compute_advantage`, which handles these
   names from the whole batch and passes every other name to verl's original function unchanged
   (the one run-time patch verl's signature forces; docs/verl.md proposes the upstream change).
3. Only in verl-agent's trainer, whose ``ray_trainer`` also holds its ``adjust_batch``: routes that
   through :func:`record_step_index`, which records each row's step index before the function
   copies rows, and the trainer's ``config.algorithm`` (verl-agent calls ``compute_advantage``
   without it).

A routed function is rebound in every loaded module that holds the original by name (e.g.
``verl.trainer.ppo.v1.utils``); modules imported later take the routed one from its module.

Per step row i, the token advantage is ``A_i`` on row i's response tokens and 0 elsewhere
(``returns`` = ``advantages``, as for verl's GRPO).
"""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

import torch

from gaca.advantage import AdvantageOptions, AdvantageOutput, compute_advantages, estimator_inputs
from gaca.advantage.diagnostics import advantage_diagnostics
from gaca.integrations.verl.config import resolve_config
from gaca.integrations.verl.tables import StepTable, build_step_table, record_rollout_steps

logger = logging.getLogger(__name__)

#: The estimator names this integration adds to verl (each is the ``gaca.advantage`` estimator
#: of the same name).
VERL_ESTIMATORS: tuple[str, ...] = ("gaca", "gigpo", "fixed_mix", "empg", "hgpo")

# verl's own compute_advantage, set by install().
_original: Any = None

# The ``config.algorithm`` last passed to verl-agent's ``adjust_batch`` in this process (by
# record_step_index): its trainer calls compute_advantage without its config, in the same
# training step, so the ``algorithm.gaca`` settings are read from here.
_trainer_algorithm: Any = None


@dataclass(frozen=True)
class VerlAdvantage:
    """Result of :func:`gaca_advantage` on one verl batch.

    Attributes:
      advantages: [B, L] float32 token advantages (0 off the steps' response tokens).
      output:     the per-step ``AdvantageOutput`` (diagnostics).
      table:      the step table the batch was read into.
    """

    advantages: torch.Tensor
    output: AdvantageOutput
    table: StepTable

    def metrics(self) -> dict[str, float]:
        """The ``adv/…`` diagnostics, named as the trainer logs them (``gaca.advantage.diagnostics``)."""
        return advantage_diagnostics(self.output)


def estimator_name(adv_estimator: Any) -> str:
    """verl passes the estimator as a str or an ``AdvantageEstimator`` enum member."""
    return adv_estimator.value if isinstance(adv_estimator, Enum) else str(adv_estimator)


def gaca_advantage(
    data: Any,
    estimator: str,
    *,
    config: Any = None,
    gamma: float | None = None,
    norm_adv_by_std: bool | None = None,
    trainer_kwargs: dict[str, Any] | None = None,
) -> VerlAdvantage:
    """Token advantages of a verl batch by a ``gaca.advantage`` estimator.

    Args:
      data:            verl ``DataProto`` in the step or trajectory layout (see ``tables``).
      estimator:       ``gaca``, ``gigpo`` or ``fixed_mix`` (any ``gaca.advantage`` name works).
      config:          verl's ``algorithm`` config; options under ``algorithm.gaca``.
      gamma:           verl's ``algorithm.gamma`` (used unless ``algorithm.gaca.gamma`` is set).
      norm_adv_by_std: verl's ``norm_adv_by_std_in_grpo`` (used unless ``algorithm.gaca.norm`` is set).
      trainer_kwargs:  other keywords of the trainer's ``compute_advantage`` (verl-agent's GiGPO settings).
    Returns:
      ``VerlAdvantage`` with [B, L] advantages in the dtype of ``token_level_rewards``.
    """
    resolved = resolve_config(config, gamma=gamma, norm_adv_by_std=norm_adv_by_std, trainer_kwargs=trainer_kwargs)
    options = AdvantageOptions.from_kwargs(**resolved.options)
    name = resolved.settings.estimator or estimator
    table = build_step_table(data, resolved.settings, need_text=options.similarity is not None, gamma=options.gamma,
                             penalty_in_returns=options.conventions == "gaca", needs=estimator_inputs(name))
    output = compute_advantages(table.batch, name, options)
    dtype = data.batch["token_level_rewards"].dtype
    advantages = table.to_tokens(output.advantage).to(dtype)
    return VerlAdvantage(advantages=advantages, output=output, table=table)


def _registry_entry(name: str):
    """The function registered in verl's registry under ``name``.

    It cannot compute GACA from what verl hands a registered estimator (no log-probs, no step
    structure), so it only runs when :func:`compute_advantage` was bypassed, and says so.
    """

    def estimator(token_level_rewards: torch.Tensor, response_mask: torch.Tensor, index: Any = None,
                  config: Any = None, **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        raise RuntimeError(
            f"adv_estimator={name!r} was called through verl's plain estimator interface, which passes "
            "no log-probs, trajectory ids or anchors. It must run through "
            "gaca.integrations.verl.compute_advantage: import gaca.integrations.verl in every process "
            "(VERL_USE_EXTERNAL_MODULES=gaca.integrations.verl) and use the trainer that calls "
            "verl.trainer.ppo.ray_trainer.compute_advantage (trainer.use_v1=False; see docs/verl.md)."
        )

    estimator.__name__ = f"gaca_verl_{name}"
    estimator.__qualname__ = estimator.__name__
    estimator.__doc__ = f"verl registry entry for {name!r}; computed by gaca.integrations.verl.compute_advantage."
    return estimator


_REGISTRY_FNS = {name: _registry_entry(name) for name in VERL_ESTIMATORS}


def _original_compute_advantage():
    if _original is not None:
        return _original
    from verl.trainer.ppo import ray_trainer

    return ray_trainer.compute_advantage


def compute_advantage(
    data: Any,
    adv_estimator: Any,
    gamma: float = 1.0,
    lam: float = 1.0,
    num_repeat: int = 1,
    norm_adv_by_std_in_grpo: bool = True,
    config: Any = None,
    **kwargs: Any,
) -> Any:
    """Drop-in for ``verl.trainer.ppo.ray_trainer.compute_advantage``.

    For ``adv_estimator`` in ``VERL_ESTIMATORS`` it writes ``advantages`` and ``returns`` [B, L]
    from :func:`gaca_advantage`; any other estimator goes to verl's original function unchanged
    (with any extra keywords a forked trainer passes).
    """
    name = estimator_name(adv_estimator)
    if config is None and name in VERL_ESTIMATORS:
        config = _trainer_algorithm
    if name not in VERL_ESTIMATORS:
        return _original_compute_advantage()(
            data, adv_estimator=adv_estimator, gamma=gamma, lam=lam, num_repeat=num_repeat,
            norm_adv_by_std_in_grpo=norm_adv_by_std_in_grpo, config=config, **kwargs,
        )
    if "response_mask" not in data.batch.keys():
        from verl.trainer.ppo.ray_trainer import compute_response_mask

        data.batch["response_mask"] = compute_response_mask(data)
    result = gaca_advantage(data, name, config=config, gamma=gamma, norm_adv_by_std=norm_adv_by_std_in_grpo,
                            trainer_kwargs=kwargs)
    data.batch["advantages"] = result.advantages
    data.batch["returns"] = result.advantages.clone()
    if logger.isEnabledFor(logging.INFO):
        logger.info("%s advantages (%s layout): %s", name, result.table.layout, result.metrics())
    return data


def record_step_index(adjust_batch: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap verl-agent's ``adjust_batch(config, data, ...)`` so that, before it pads the batch with
    copies of random rows, each row's step index is recorded in ``data`` (``record_rollout_steps``,
    under ``algorithm.gaca.step_key``) and ``config.algorithm`` is kept for ``compute_advantage``.

    verl-agent's trainer calls ``adjust_batch`` right after its rollout and its discounted returns,
    while each trajectory's rows are still in step order; afterwards copies and ``balance_batch``
    make that order unrecoverable in general. Only batches of this integration's estimators get the
    key; the batch is otherwise untouched.
    """
    if getattr(adjust_batch, "_gaca_wrapped", False):
        return adjust_batch

    @functools.wraps(adjust_batch)
    def wrapper(config: Any, data: Any, *args: Any, **kwargs: Any) -> Any:
        global _trainer_algorithm
        algorithm = getattr(config, "algorithm", None)
        estimator = getattr(algorithm, "adv_estimator", None)
        if estimator is not None and estimator_name(estimator) in VERL_ESTIMATORS:
            settings = resolve_config(algorithm).settings  # a bad algorithm.gaca fails here, before the update
            if settings.layout != "trajectory":
                record_rollout_steps(data, settings.step_key)
        _trainer_algorithm = algorithm
        return adjust_batch(config, data, *args, **kwargs)

    wrapper._gaca_wrapped = True  # type: ignore[attr-defined]
    return wrapper


def _route(module: Any, name: str, replacement: Any) -> Any:
    """Set ``module.<name>`` to ``replacement`` and rebind every loaded module that holds the
    original object under that name (looked up in module dicts, never through ``__getattr__``).
    Returns the original."""
    original = module.__dict__[name]
    if original is replacement:
        return original
    rebound = [module_name for module_name, other in list(sys.modules.items())
               if other is not None and getattr(other, "__dict__", {}).get(name) is original]
    for module_name in rebound:
        setattr(sys.modules[module_name], name, replacement)
    logger.debug("gaca: %s routed through GACA in %s", name, rebound)
    return original


def install() -> None:
    """Register our estimators in verl and route ``compute_advantage`` (and, in verl-agent,
    ``adjust_batch``) through GACA (idempotent).

    Safe to call from ``VERL_USE_EXTERNAL_MODULES`` (i.e. while ``import verl`` runs).
    """
    global _original
    from verl.trainer.ppo import core_algos, ray_trainer

    registry = getattr(core_algos, "ADV_ESTIMATOR_REGISTRY", None)
    if registry is None:  # verl forks older than the registry (0.4): routing alone suffices there
        logger.info("this verl has no ADV_ESTIMATOR_REGISTRY (verl-agent's): routing alone suffices")
    else:
        for name, fn in _REGISTRY_FNS.items():
            registered = registry.get(name)
            if registered is not None and registered is not fn:
                logger.warning("replacing verl's %r advantage estimator %s with GACA's", name, registered)
            registry[name] = fn

    adjust_batch = ray_trainer.__dict__.get("adjust_batch")
    if adjust_batch is not None:  # verl-agent's trainer
        _route(ray_trainer, "adjust_batch", record_step_index(adjust_batch))
    if ray_trainer.compute_advantage is not compute_advantage:
        _original = _route(ray_trainer, "compute_advantage", compute_advantage)


def setup_worker() -> None:
    """Ray ``worker_process_setup_hook``: install the integration in a Ray worker at its start."""
    install()


def with_setup_hook(runtime_env: dict[str, Any] | None) -> dict[str, Any]:
    """A Ray ``RAY_RUNTIME_ENV_HOOK``: the job's runtime env plus a ``worker_process_setup_hook`` that
    installs this integration in every Ray worker of the job.

    For trainers whose verl has no ``VERL_USE_EXTERNAL_MODULES`` (verl-agent's, verl before 0.5):
    ``export RAY_RUNTIME_ENV_HOOK=gaca.integrations.verl.with_setup_hook`` before launching them.
    """
    runtime_env = dict(runtime_env or {})
    hook = "gaca.integrations.verl.setup_worker"
    existing = runtime_env.get("worker_process_setup_hook")
    if existing not in (None, hook):
        raise ValueError(f"the Ray runtime env already has worker_process_setup_hook={existing!r}; call "
                         f"{hook} from it to install gaca's verl integration")
    runtime_env["worker_process_setup_hook"] = hook
    return runtime_env


def is_installed() -> bool:
    """Whether verl's registry and ``compute_advantage`` (and verl-agent's ``adjust_batch``, where
    its trainer has one) currently go through this integration."""
    from verl.trainer.ppo import core_algos, ray_trainer

    adjust_batch = ray_trainer.__dict__.get("adjust_batch")
    recorded = adjust_batch is None or getattr(adjust_batch, "_gaca_wrapped", False)
    registry = getattr(core_algos, "ADV_ESTIMATOR_REGISTRY", None)  # None in verl-agent's verl
    return recorded and ray_trainer.compute_advantage is compute_advantage and (registry is None or all(
        registry.get(name) is fn for name, fn in _REGISTRY_FNS.items()))


__all__ = [
    "VERL_ESTIMATORS",
    "VerlAdvantage",
    "compute_advantage",
    "estimator_name",
    "gaca_advantage",
    "install",
    "is_installed",
    "record_step_index",
    "setup_worker",
    "with_setup_hook",
]
