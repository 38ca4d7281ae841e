"""verl-agent's GiGPO code, loaded from a user's checkout for side-by-side checks.

Nothing of verl-agent ships with gaca: ``load_verl_agent`` reads its ``gigpo/core_gigpo.py`` as a
module (without putting the checkout, whose vendored ``verl`` would shadow the installed one, on
``sys.path``) and takes ``apply_invalid_action_penalty`` out of its ``verl/trainer/ppo/ray_trainer.py``
(the function alone: that module imports its whole training stack).
"""

from __future__ import annotations

import ast
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any


@dataclass(frozen=True)
class VerlAgentCode:
    core_gigpo: ModuleType
    """verl-agent's ``gigpo.core_gigpo`` (``compute_gigpo_outcome_advantage``, ``compute_step_discounted_returns``)."""
    apply_invalid_action_penalty: Callable[..., Any]
    """Its trainer's penalty step: subtracts ``coef`` from an invalid step's score and ``step_rewards``."""


def _function_from_file(path: Path, name: str, namespace: dict[str, Any]) -> Callable[..., Any]:
    tree = ast.parse(path.read_text(), filename=str(path))
    node = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name), None)
    if node is None:
        raise ValueError(f"{path} defines no function {name!r}: not a verl-agent checkout this check knows")
    exec(compile(ast.Module(body=[node], type_ignores=[]), str(path), "exec"), namespace)
    return namespace[name]


def load_verl_agent(checkout: str | Path) -> VerlAgentCode:
    """verl-agent's GiGPO pieces from ``checkout`` (a clone of verl-agent; needs ``verl`` installed)."""
    import numpy as np
    import torch
    from verl import DataProto

    root = Path(checkout)
    gigpo_file, trainer_file = root / "gigpo" / "core_gigpo.py", root / "verl" / "trainer" / "ppo" / "ray_trainer.py"
    for path in (gigpo_file, trainer_file):
        if not path.is_file():
            raise FileNotFoundError(f"{path} not found: give the root of a verl-agent checkout")
    spec = importlib.util.spec_from_file_location("verl_agent_core_gigpo", gigpo_file)
    core_gigpo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(core_gigpo)
    penalty = _function_from_file(trainer_file, "apply_invalid_action_penalty",
                                  {"np": np, "torch": torch, "DataProto": DataProto})
    return VerlAgentCode(core_gigpo=core_gigpo, apply_invalid_action_penalty=penalty)


__all__ = ["VerlAgentCode", "load_verl_agent"]
