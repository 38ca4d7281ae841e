"""GACA inside verl: ``algorithm.adv_estimator=gaca`` (or ``gigpo``, ``fixed_mix``, ``empg``, ``hgpo``) without
a fork.

Importing this package registers the estimators in verl's advantage-estimator registry and routes
``verl.trainer.ppo.ray_trainer.compute_advantage`` through GACA for those names. To take effect in
every Ray worker too, have verl import it itself::

    export VERL_USE_EXTERNAL_MODULES=gaca.integrations.verl
    python -m verl.trainer.main_ppo algorithm.adv_estimator=gaca +algorithm.gaca.kappa=0.25 ...

verl-agent's verl has no ``VERL_USE_EXTERNAL_MODULES``; there Ray installs it in every worker::

    export RAY_RUNTIME_ENV_HOOK=gaca.integrations.verl.with_setup_hook

Settings live under ``algorithm.gaca.*`` with the option names of ``gaca.advantage`` (see
``docs/verl.md``). Needs the ``verl`` extra: ``pip install gaca[verl]``.
"""

from __future__ import annotations

from gaca.integrations.verl.config import ResolvedConfig, VerlSettings, resolve_config
from gaca.integrations.verl.estimator import (
    VERL_ESTIMATORS,
    VerlAdvantage,
    compute_advantage,
    gaca_advantage,
    install,
    is_installed,
    record_step_index,
    setup_worker,
    with_setup_hook,
)
from gaca.integrations.verl.tables import StepTable, build_step_table, step_rows_table, trajectory_rows_table

try:
    import verl  # noqa: F401  (only to fail early, with the fix in the message)
except ImportError as error:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "gaca.integrations.verl needs verl: pip install 'gaca[verl]' (verl==0.9.1; see docs/verl.md)"
    ) from error

install()

__all__ = [
    "VERL_ESTIMATORS",
    "ResolvedConfig",
    "StepTable",
    "VerlAdvantage",
    "VerlSettings",
    "build_step_table",
    "compute_advantage",
    "gaca_advantage",
    "install",
    "is_installed",
    "record_step_index",
    "resolve_config",
    "setup_worker",
    "step_rows_table",
    "trajectory_rows_table",
    "with_setup_hook",
]
