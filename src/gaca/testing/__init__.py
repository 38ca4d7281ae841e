"""Test and benchmark harnesses (not used by the library itself).

- ``faults``: an environment family that fails on purpose (``FaultyEnv``), for fault-tolerance tests.
- ``synthetic``: step tables shaped like ALFWorld training batches, for benchmarks and tests.
- ``alfworld_differential``: plays the same episode on ALFWorld's TextWorld and native engines.
- ``generate_baseline``: plain ``model.generate``, the baseline of ``benchmarks/train_speed.py``.
"""
