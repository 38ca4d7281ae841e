"""gaca: Granularity-Adaptive Credit Assignment for long-horizon LLM-agent RL.

Layers (arrows point down only; see DESIGN.md):
    cli -> train -> {rollout -> {policy, envs}, advantage, integrations.verl}
``gaca.advantage`` is pure tensor math and imports only torch and numpy.
"""

__version__ = "0.1.0"
