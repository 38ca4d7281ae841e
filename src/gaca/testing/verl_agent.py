"""verl-agent's trainer-side code, loaded from a user's checkout for side-by-side checks.

Nothing of verl-agent ships with gaca: ``load_verl_agent`` reads its ``gigpo/core_gigpo.py`` as a
module (without putting the checkout, whose vendored ``verl`` would shadow the installed one, on
``sys.path``) and takes the functions its trainer runs between the rollout and the advantage out
of their files, each definition alone (their modules import its whole training stack): the rollout
loop's ``gather_rollout_data`` with its ``collate_fn``, dynamic sampling's ``filter_group_data``,
``adjust_batch``, the ``EpisodeRewardManager`` and ``apply_invalid_action_penalty``.
"""

from __future__ import annotations

import ast
import importlib.util
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

#: The files read, relative to the checkout's root.
FILES = {
    "core_gigpo": "gigpo/core_gigpo.py",
    "trainer": "verl/trainer/ppo/ray_trainer.py",
    "rollout": "agent_system/multi_turn_rollout/rollout_loop.py",
    "rollout_utils": "agent_system/multi_turn_rollout/utils.py",
    "reward": "agent_system/reward_manager/episode.py",
    "dataset": "verl/utils/dataset/rl_dataset.py",
}


@dataclass(frozen=True)
class VerlAgentCode:
    core_gigpo: ModuleType
    """verl-agent's ``gigpo.core_gigpo`` (``compute_gigpo_outcome_advantage``, ``compute_step_discounted_returns``)."""
    apply_invalid_action_penalty: Callable[..., Any]
    """Its trainer's penalty step: subtracts ``coef`` from an invalid step's score and ``step_rewards``."""
    adjust_batch: Callable[..., Any]
    """``adjust_batch(config, data)``: pads the batch with copies of random rows to its size divisor."""
    gather_rollout_data: Callable[..., Any]
    """``TrajectoryCollector.gather_rollout_data`` (its ``self`` is unused): per-env step lists -> one
    ``DataProto`` of the active steps, trajectory after trajectory, with episode rewards and lengths."""
    filter_group_data: Callable[..., Any]
    """Dynamic sampling's filter: drops the groups whose episodes all got the same reward."""
    reward_manager: type
    """``EpisodeRewardManager``: the episode reward on each step row's last response token."""


def _definition(path: Path, name: str, namespace: dict[str, Any]) -> Any:
    """The top-level function or class ``name`` (or ``Class.method``) of ``path``, executed alone in ``namespace``."""
    body = ast.parse(path.read_text(), filename=str(path)).body
    *owners, leaf = name.split(".")
    for owner in owners:
        node = next((n for n in body if isinstance(n, ast.ClassDef) and n.name == owner), None)
        body = node.body if node is not None else []
    node = next((n for n in body if isinstance(n, ast.FunctionDef | ast.ClassDef) and n.name == leaf), None)
    if node is None:
        raise ValueError(f"{path} defines no {name!r}: not a verl-agent checkout this check knows")
    node.decorator_list = []
    exec(compile(ast.Module(body=[node], type_ignores=[]), str(path), "exec"), namespace)
    return namespace[leaf]


def load_verl_agent(checkout: str | Path) -> VerlAgentCode:
    """verl-agent's trainer-side pieces from ``checkout`` (a clone of verl-agent; needs ``verl`` installed)."""
    import numpy as np
    import torch
    from verl import DataProto

    root = Path(checkout)
    paths = {key: root / relative for key, relative in FILES.items()}
    for path in paths.values():
        if not path.is_file():
            raise FileNotFoundError(f"{path} not found: give the root of a verl-agent checkout")
    spec = importlib.util.spec_from_file_location("verl_agent_core_gigpo", paths["core_gigpo"])
    core_gigpo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(core_gigpo)
    base = {"np": np, "torch": torch, "DataProto": DataProto, "List": list, "Dict": dict, "Tuple": tuple}
    collate_fn = _definition(paths["dataset"], "collate_fn", {**base, "defaultdict": defaultdict})
    return VerlAgentCode(
        core_gigpo=core_gigpo,
        apply_invalid_action_penalty=_definition(paths["trainer"], "apply_invalid_action_penalty", dict(base)),
        adjust_batch=_definition(paths["rollout_utils"], "adjust_batch", dict(base)),
        gather_rollout_data=_definition(paths["rollout"], "TrajectoryCollector.gather_rollout_data",
                                        {**base, "collate_fn": collate_fn}),
        filter_group_data=_definition(paths["rollout_utils"], "filter_group_data", dict(base)),
        reward_manager=_definition(paths["reward"], "EpisodeRewardManager", dict(base)),
    )


__all__ = ["FILES", "VerlAgentCode", "load_verl_agent"]
