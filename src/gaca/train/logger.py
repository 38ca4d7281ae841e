"""The run's metrics: its record (``metrics.jsonl``, one JSON line per step) and the trackers it also feeds."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from gaca.train.trackers import TrackerContext, finite_scalars, open_trackers

logger = logging.getLogger(__name__)

HIST_BINS = 20


def histogram(values: torch.Tensor, bins: int = HIST_BINS) -> dict[str, list[float]]:
    """{edges: bins+1 floats, counts: bins ints} of ``values`` over their [min, max] (JSON-ready)."""
    v = values.detach().double().flatten()
    lo, hi = float(v.min()), float(v.max())
    if hi <= lo:
        hi = lo + 1e-6
    counts = torch.histc(v, bins=bins, min=lo, max=hi)
    edges = torch.linspace(lo, hi, bins + 1)
    return {"edges": [float(e) for e in edges], "counts": [int(c) for c in counts]}


class MetricsRecord:
    """The run's record, ``RUN_DIR/metrics.jsonl``: one JSON line per step (a ``Tracker``, always on).

    A line is ``{"iteration", **scalars (null where not finite), "hist/<name>": {edges, counts}}``,
    ``<name>`` being the histogram's key without its ``adv/`` prefix. On resume after k the records
    of the iterations after k (they are repeated) and a line cut short by a crash are dropped first.
    """

    def __init__(self, ctx: TrackerContext) -> None:
        self.path = ctx.run_dir / "metrics.jsonl"
        if ctx.resume_after is not None and self.path.exists():
            kept = [r for r in _records(self.path) if r.get("iteration", -1) <= ctx.resume_after]
            self.path.write_text("".join(json.dumps(r) + "\n" for r in kept))
        self._file = open(self.path, "a")

    def log(self, step: int, scalars: Mapping[str, float | None], histograms: Mapping[str, torch.Tensor]) -> None:
        record: dict[str, Any] = {"iteration": step}
        finite = finite_scalars(scalars)
        record.update({k: finite.get(k) for k in scalars})
        for k, values in histograms.items():
            record["hist/" + (k.split("/", 1)[-1] if k.startswith("adv/") else k)] = histogram(values)
        self._file.write(json.dumps(record) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()


class MetricsLogger:
    """Writes every record to the run's record (``metrics.jsonl``) and to the trackers ``trackers`` names
    (``gaca.train.trackers.TRACKERS``: TensorBoard, W&B, MLflow)."""

    def __init__(self, run_dir: str | Path, *, trackers: list[str] | tuple[str, ...] = ("tensorboard",),
                 config: Mapping[str, Any] | None = None, resume_after: int | None = None):
        """Open the record and the trackers. ``config`` (the run's, as a dict) is logged once at the start;
        ``resume_after=k``: the run resumes from its checkpoint after iteration k (see ``gaca.train.trackers``
        for what each destination does with the iterations it repeats)."""
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        ctx = TrackerContext(self.run_dir, dict(config or {}), resume_after)
        self.record = MetricsRecord(ctx)
        try:
            self.trackers = open_trackers(trackers, ctx)
        except BaseException:
            self.record.close()
            raise
        self.path = self.record.path

    def log(self, iteration: int, metrics: Mapping[str, float | None],
            histograms: Mapping[str, torch.Tensor] | None = None) -> None:
        """Log one step: ``metrics`` (scalars) and ``histograms`` (value tensors; empty ones are left out)."""
        hists = {k: v for k, v in (histograms or {}).items() if v.numel() > 0}
        self.record.log(iteration, metrics, hists)
        for tracker in self.trackers:
            tracker.log(iteration, metrics, hists)

    def close(self) -> None:
        """Close the trackers, then the record."""
        try:
            for tracker in reversed(self.trackers):
                tracker.close()
        finally:
            self.record.close()


def _records(path: Path) -> list[dict[str, Any]]:
    """The JSON lines of ``path``; a line that does not parse (cut short by a crash) is skipped with a warning."""
    out = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            logger.warning("%s line %d is not complete JSON (a write cut short?): skipped", path, number)
    return out


def read_metrics(run_dir: str | Path) -> list[dict[str, Any]]:
    """All records of ``run_dir/metrics.jsonl``."""
    path = Path(run_dir) / "metrics.jsonl"
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist: is {run_dir} a gaca run directory?")
    return _records(path)


__all__ = ["MetricsLogger", "MetricsRecord", "histogram", "read_metrics"]
