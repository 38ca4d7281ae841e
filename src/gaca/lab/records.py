"""A comparison's records: what the report needs of each run, kept apart from the run directories.

    <records>/<setting>/<estimator>-seed<k>.json   per held-out split, the final policy's per-game
                                                   outcomes and metrics; the learning curve
                                                   (iteration, environment steps, held-out success);
                                                   mean time per iteration and its parts; the last
                                                   iteration; the run's config; the fingerprint
                                                   of the warm start it started from; per training
                                                   iteration, the rollouts' success, invalid
                                                   ratio, policy NLL and episode length
    <records>/<setting>/warmstart-seed<k>.json     per held-out split, the seed's warm start's
                                                   evaluation; that warm start's fingerprint

A run directory holds checkpoints and logs (megabytes); a record is ~100 kB of JSON, written when the
run has finished. Keep the records under version control: a run whose record is complete counts as
finished even when ``root`` is gone (a cleaned scratch disk, another machine), so a comparison
continues across sittings without repeating a finished run, and its report can always be rebuilt.
A seed's runs are paired only if they started from the same warm start: SFT recomputed on another
machine (another CPU) can differ in its last bits, so a run whose warm-start fingerprint is not its
seed's recorded one is reported apart, as not comparable.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from gaca import persist
from gaca.lab.matrix import CompareMatrix, RunSpec
from gaca.persist import write_json
from gaca.train.logger import read_metrics

#: The run directory's evaluation file: per-game outcomes of the final policy per split, ``complete``.
EVAL_FILE = "lab-eval.json"
#: Timing metrics averaged over a run's iterations (iteration 0 is the warm start's evaluation).
TIMING = ("time/rollout_s", "time/advantage_s", "time/update_s", "time/eval_s", "time/iteration_s")
#: Training-rollout metrics a record keeps per iteration (``training``): how a run trained outlives its
#: run directory (``benchmarks/training_dynamics.py`` reads them from the records).
TRAINING = ("env/success", "env/invalid_ratio", "policy/nll", "env/episode_length")


def read_json(path: Path) -> dict[str, Any]:
    return persist.read_json(path, {})


def _metrics(run_dir: Path) -> list[dict[str, Any]]:
    """The run's metrics records; none for a run that has not written any yet."""
    return read_metrics(run_dir) if (run_dir / "metrics.jsonl").is_file() else []


def training_series(metrics: list[dict[str, Any]], keys: tuple[str, ...] = TRAINING) -> dict[str, list[float]]:
    """Per key, its value at each training iteration (metrics records of iterations that played
    rollouts; evaluation-only records have no ``env/episodes``)."""
    played = [m for m in metrics if "env/episodes" in m]
    return {k: [float(m[k]) for m in played if k in m] for k in keys}


def build_record(run_dir: Path) -> dict[str, Any]:
    """The record of one run directory (finished or not; ``complete`` says which)."""
    evaluation = read_json(run_dir / EVAL_FILE)
    metrics = _metrics(run_dir)
    steps, curve = 0.0, []
    for m in metrics:
        steps += float(m.get("env/step_rows", 0.0))
        if "eval/success" in m:
            curve.append((int(m["iteration"]), steps, float(m["eval/success"])))
    timing = {k: float(np.mean([m[k] for m in metrics if k in m and m.get("iteration", 0) > 0] or [math.nan]))
              for k in TIMING}
    return {"final": evaluation.get("final", {}), "complete": bool(evaluation.get("complete")), "curve": curve,
            "timing": timing, "iterations": int(metrics[-1]["iteration"]) if metrics else 0,
            "config": read_json(run_dir / "config.json"),
            "training": training_series(metrics)}


def is_complete(record: dict[str, Any] | None, splits: list[str]) -> bool:
    return bool(record) and bool(record.get("complete")) and all(s in record.get("final", {}) for s in splits)


def _columns(outcomes: list[dict[str, Any]]) -> dict[str, list[Any]]:
    return {key: [o.get(key) for o in outcomes] for key in outcomes[0]} if outcomes else {}


def _rows(columns: dict[str, list[Any]]) -> list[dict[str, Any]]:
    return [dict(zip(columns, values, strict=True)) for values in zip(*columns.values(), strict=True)]


def _map_outcomes(record: dict[str, Any], convert: Any) -> dict[str, Any]:
    final = {split: {**rec, "outcomes": convert(rec["outcomes"])} for split, rec in record.get("final", {}).items()}
    return {**record, "final": final}


def read_record(path: Path) -> dict[str, Any]:
    """A saved record, its per-game outcomes as a list of dicts again."""
    return _map_outcomes(read_json(path), _rows)


def load_record(run: RunSpec) -> dict[str, Any] | None:
    """The run's record; else what its run directory holds so far (saved as its record when it is
    complete: runs finished before records existed); ``None`` when the run has not started."""
    if run.record_path.is_file():
        return read_record(run.record_path)
    if not run.out_dir.is_dir():
        return None
    record = build_record(run.out_dir)
    if is_complete(record, run.eval_splits):
        from gaca.train.warmstart import WarmStartCache

        cfg = run.config()
        record["warm_start"] = WarmStartCache.of(cfg).fingerprint(cfg)
        save_record(run.record_path, record)
    return record


def save_record(path: Path, record: dict[str, Any]) -> None:
    """Write a record compactly (these files are committed): per-game outcomes as columns."""
    write_json(path, _map_outcomes(record, _columns), indent=None)


def load_warmstart(matrix: CompareMatrix, setting: str, seed: int) -> dict[str, Any]:
    """Per split, the warm start's evaluation record (empty when not evaluated yet)."""
    return read_json(matrix.warmstart_record_path(setting, seed)).get("warmstart", {})


def other_warm_start(ours: str | None, seeds: str | None) -> bool:
    """Whether a run's warm-start fingerprint and its seed's (None: a record written before
    fingerprints were kept, taken as the same) name two different warm starts."""
    return bool(ours and seeds and ours != seeds)


__all__ = ["EVAL_FILE", "TIMING", "build_record", "is_complete", "load_record", "load_warmstart", "other_warm_start",
           "read_json", "read_record", "save_record", "training_series", "write_json"]
