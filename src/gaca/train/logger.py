"""Metrics to JSONL (one line per record) and TensorBoard."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import Any

import torch

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


class MetricsLogger:
    """Writes ``metrics.jsonl`` (every record) and TensorBoard scalars/histograms under ``tb/``."""

    def __init__(self, run_dir: str | Path, *, tensorboard: bool = True, truncate_after: int | None = None):
        """Open the run's logs (appending); ``truncate_after=k`` first drops the records of iterations > k
        (on resume: they are repeated) and a line cut short by a crash."""
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.path = self.run_dir / "metrics.jsonl"
        if truncate_after is not None and self.path.exists():
            kept = [r for r in _records(self.path) if r.get("iteration", -1) <= truncate_after]
            self.path.write_text("".join(json.dumps(r) + "\n" for r in kept))
        self._file = open(self.path, "a")
        self._tb = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter

                self._tb = SummaryWriter(str(self.run_dir / "tb"))
            except ImportError:  # pragma: no cover - tensorboard is a listed dependency
                logger.warning("tensorboard is not installed; writing JSONL only")

    def log(self, iteration: int, metrics: dict[str, float], histograms: dict[str, torch.Tensor] | None = None,
            **extra: Any) -> dict[str, Any]:
        """Write one record: {"iteration", **metrics, "hist/<key>": {edges, counts}, **extra}."""
        record: dict[str, Any] = {"iteration": iteration}
        for k, v in metrics.items():
            record[k] = float(v) if v is not None and math.isfinite(float(v)) else None
        for k, values in (histograms or {}).items():
            if values.numel() > 0:
                record["hist/" + k.split("/", 1)[-1] if k.startswith("adv/") else "hist/" + k] = histogram(values)
        record.update(extra)
        self._file.write(json.dumps(record) + "\n")
        self._file.flush()
        if self._tb is not None:
            for k, v in metrics.items():
                if v is not None and math.isfinite(float(v)):
                    self._tb.add_scalar(k, float(v), iteration)
            for k, values in (histograms or {}).items():
                if values.numel() > 0:
                    self._tb.add_histogram(k, values.detach().float(), iteration)
            self._tb.flush()
        return record

    def close(self) -> None:
        self._file.close()
        if self._tb is not None:
            self._tb.close()


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


__all__ = ["MetricsLogger", "histogram", "read_metrics"]
