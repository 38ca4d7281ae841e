"""Figures and result files the lab's reports write (matplotlib without a screen, JSON of dataclasses)."""

from __future__ import annotations

import dataclasses
import math
import subprocess
from pathlib import Path
from typing import Any

import numpy as np

from gaca.persist import atomic_write, write_json


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Any, path: Path) -> Path:
    """Lay out, write (120 dpi, atomically) and close a matplotlib figure."""
    import io

    buffer = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buffer, dpi=120, format="png")
    pyplot().close(fig)
    return atomic_write(path, buffer.getvalue())


def jsonable(value: Any) -> Any:
    """Dataclasses, numpy values and tuples as plain JSON values (NaN as None)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    if isinstance(value, (np.floating, float)):
        return None if not math.isfinite(float(value)) else float(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.bool_):
        return bool(value)
    return value


def write_result(path: Path, result: Any) -> Path:
    """``result.json``: ``jsonable(result)`` with the commit it was made at."""
    return write_json(path, {"commit": git_commit(), **jsonable(result)}, indent=1)


def git_commit() -> str:
    """The checkout's HEAD commit ("unknown" outside a git checkout)."""
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True,
                              cwd=Path(__file__).parent).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


__all__ = ["git_commit", "jsonable", "pyplot", "save_figure", "write_result"]
