"""Test and benchmark harnesses (not used by the library itself).

- ``agents``: reference agents (the environment's expert, random agents, WebShop's oracle) and ``play_episode``.
- ``fakes``: test doubles shared by the test packages: the toy ``CorridorEnv``, ``pool_of``, ``ScriptedPolicy``.
- ``faults``: an environment family that fails on purpose (``FaultyEnv``), for fault-tolerance tests.
- ``synthetic``: step tables shaped like ALFWorld training batches, for benchmarks and tests.
- ``alfworld_differential``: plays the same episode on ALFWorld's TextWorld and native engines.
- ``verl_batches``: verl ``DataProto`` batches of both layouts and verl-agent's, from a step table.
- ``throughput``: environment steps per second through the episode driver.
- ``generate_baseline``: plain ``model.generate``, the baseline of ``benchmarks/train_speed.py``.
"""
