"""gaca: Granularity-Adaptive Credit Assignment for long-horizon LLM-agent RL.

Layers (arrows point down only; docs/design.md; ``tests/test_imports.py`` checks them):
    cli -> lab -> train -> rollout -> {policy, envs}, advantage
    integrations.verl -> advantage, rollout.prompt, envs;  testing -> harnesses
    registry, validate, persist, config: pure Python, used by every layer
``gaca.advantage`` is pure tensor math and imports only torch and numpy (and gaca.registry/validate).
"""

__version__ = "0.1.0"
