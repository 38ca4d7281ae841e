"""Named wall-clock sections of one iteration."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

#: The per-iteration time metrics (seconds) a run's summary and the lab's records average.
ITERATION_TIMES = ("time/rollout_s", "time/advantage_s", "time/update_s", "time/eval_s", "time/iteration_s")


class Stopwatch:
    """``with clock("rollout"): ...`` adds the section's seconds to ``clock.seconds["rollout"]``."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.started = time.perf_counter()

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - t0

    def elapsed(self) -> float:
        """Seconds since the stopwatch was made."""
        return time.perf_counter() - self.started


__all__ = ["ITERATION_TIMES", "Stopwatch"]
