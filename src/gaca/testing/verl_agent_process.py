"""The integration inside verl-agent's own module graph: its vendored ``verl``, its ``ray_trainer``.

    python -m gaca.testing.verl_agent_process /path/to/verl-agent [configuration ...]

Puts the checkout first on ``sys.path`` (so ``verl`` is verl-agent's fork), imports the integration
as the worker set-up hook does, checks that verl-agent's ``ray_trainer.compute_advantage`` and
``adjust_batch`` (and the ``agent_system.multi_turn_rollout`` name it was imported from) are routed
while its ``RayPPOTrainer`` is untouched, then builds trainer batches with the routed
``adjust_batch`` (``gaca.testing.verl_agent_runs.trainer_batch``) and calls
``ray_trainer.compute_advantage`` exactly as verl-agent's ``fit`` does: no config, its keywords.
Prints one ``PARITY <configuration> <rows> <max abs diff to verl-agent's GiGPO>`` line per configuration.

Modules verl-agent's trainer imports but this path never calls (``aiohttp``, ``openai``) get empty
stand-ins when they are not installed; everything else is imported for real.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from typing import Any

#: Imported by verl-agent's ray_trainer (its async rollout server, its tool clients), never called here.
UNUSED_IMPORTS = ("aiohttp", "openai")


class _StandIns(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Empty modules for ``names`` (any attribute is a new empty class)."""

    def __init__(self, names: set[str]) -> None:
        self.names = names

    def find_spec(self, name: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if name.split(".")[0] in self.names:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = types.ModuleType(spec.name)
        module.__path__ = []
        module.__getattr__ = lambda attr: type(attr, (), {})  # type: ignore[method-assign]
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        pass


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    checkout, names = args[0], args[1:] or ["sokoban, gamma 1", "alfworld, groups of one"]
    if "verl" in sys.modules:
        raise RuntimeError("run this in a fresh process: verl is already imported")
    sys.meta_path.insert(0, _StandIns({n for n in UNUSED_IMPORTS if importlib.util.find_spec(n) is None}))
    sys.path.insert(0, checkout)

    import agent_system.multi_turn_rollout as rollout_package
    from verl.trainer.ppo import ray_trainer

    import gaca.integrations.verl as integration  # what setup_worker does in each Ray worker
    from gaca.testing.verl_agent import load_verl_agent
    from gaca.testing.verl_agent_runs import RUNS, trainer_batch, verl_agent_gigpo

    assert ray_trainer.__file__.startswith(checkout), ray_trainer.__file__
    assert integration.is_installed() and ray_trainer.compute_advantage is integration.compute_advantage
    assert rollout_package.adjust_batch is ray_trainer.adjust_batch and ray_trainer.adjust_batch._gaca_wrapped
    assert not hasattr(ray_trainer.RayPPOTrainer.__init__, "_gaca_wrapped")
    code = load_verl_agent(checkout)
    for name in names:
        run = RUNS[name].scaled(4)
        config = run.trainer_config({"conventions": "verl-agent"})
        data = trainer_batch(code, run, 3, adjust_batch=ray_trainer.adjust_batch, gaca={"conventions": "verl-agent"})
        theirs = verl_agent_gigpo(code, data, run)
        algorithm = config.algorithm
        out = ray_trainer.compute_advantage(  # as verl-agent's RayPPOTrainer.fit calls it
            data, adv_estimator=algorithm.adv_estimator, gamma=algorithm.gamma, lam=1.0,
            num_repeat=config.env.rollout.n, norm_adv_by_std_in_grpo=True, multi_turn=False, use_pf_ppo=False,
            pf_ppo_reweight_method="pow", pf_ppo_weight_pow=2.0, step_advantage_w=algorithm.gigpo.step_advantage_w,
            gigpo_mode=algorithm.gigpo.mode, gigpo_enable_similarity=algorithm.gigpo.enable_similarity,
            gigpo_similarity_thresh=algorithm.gigpo.similarity_thresh)
        print(f"PARITY {name} {len(data)} {float((out.batch['advantages'] - theirs).abs().max()):.3e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
