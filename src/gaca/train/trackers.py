"""Experiment trackers: where a run's metrics go besides its record (``metrics.jsonl``).

    trackers = ["tensorboard", "wandb", "mlflow"]   # TrainConfig.trackers; [] keeps the record alone

Every destination of the metrics is a :class:`Tracker`: opened once per run (and once per resume)
from a :class:`TrackerContext`, then ``log(step, scalars, histograms)`` once per record and
``close()`` at the end. The run's record (``gaca.train.logger.MetricsRecord``) is one too and is
always written; the optional ones are registered by name in :data:`TRACKERS` (what verl calls
``trainer.logger``): ``tensorboard``, ``wandb`` (W&B, offline unless ``WANDB_MODE`` says otherwise)
and ``mlflow`` (a local MLflow store unless ``MLFLOW_TRACKING_URI`` says otherwise). Each writes
under the run directory by default, logs the run's config once at the start, and receives the
scalars that are finite; histograms go where the backend has them (TensorBoard, W&B; MLflow has
none).

Resume: a run resumed from its checkpoint after iteration k repeats the iterations after k, which
a backend may already hold (logged before the interruption). None may end up with a step twice
or without one:

- the record drops its records after k (the repeated ones are written again);
- TensorBoard marks the events from step k+1 on as purged (``SummaryWriter(purge_step=k+1)``),
  so its readers show the repeated iterations' new values;
- W&B and MLflow cannot delete a logged point: the resumed run continues the same tracker run
  (its id kept in ``wandb-run.json`` / ``mlflow-run.json`` in the run directory) and skips the
  steps that run already holds. A resumed run repeats those iterations exactly (tested: the
  trainer's kill-and-resume test compares every metric), so the points kept are the ones the
  repeat computes, except the wall-clock ``time/``/``perf/`` speeds of those iterations.

A backend whose package is missing is refused before the run writes anything (``missing``,
called by the run's preflight) with the pip extra that installs it.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import math
import os
import re
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch

from gaca.persist import read_json, write_json
from gaca.registry import Registry

logger = logging.getLogger(__name__)

#: W&B project and MLflow experiment of a run, unless WANDB_PROJECT / MLFLOW_EXPERIMENT_NAME name one.
DEFAULT_PROJECT = "gaca"


@dataclass(frozen=True)
class TrackerContext:
    """What a tracker is opened with."""

    run_dir: Path
    """The run directory (``out_dir``); its name names the tracker run."""
    config: Mapping[str, Any]
    """The run's config as a nested dict (``gaca.config.to_dict``), logged once at the start."""
    resume_after: int | None = None
    """None for a new run; k when the run resumes from its checkpoint after iteration k (the steps
    after k are logged again)."""


class Tracker(Protocol):
    """One destination of the metrics."""

    def log(self, step: int, scalars: Mapping[str, float | None],
            histograms: Mapping[str, torch.Tensor]) -> None:
        """Record ``step`` (the iteration): scalars (None or non-finite: no value) and histograms of
        non-empty 1-D value tensors."""
        ...

    def close(self) -> None:
        """Flush and end the tracker run."""
        ...


@dataclass(frozen=True)
class TrackerBackend:
    """A registered tracker: how to open it and what it needs."""

    open: Callable[[TrackerContext], Tracker]
    module: str
    """The package it imports (checked before a run starts)."""
    extra: str
    """The pip extra of gaca that installs it (``pip install 'gaca[<extra>]'``)."""
    files: tuple[str, ...] = ()
    """What it writes into the run directory (``--overwrite`` removes these)."""

    def missing(self, name: str) -> str | None:
        """None if the backend's package can be imported, else the one-line message that says how to get it."""
        if importlib.util.find_spec(self.module) is not None:
            return None
        return (f"trackers: {name!r} needs the {self.module} package, which is not installed: "
                f"pip install 'gaca[{self.extra}]' (or drop {name!r} from trackers)")


#: The optional trackers, by the name ``TrainConfig.trackers`` lists.
TRACKERS: Registry[TrackerBackend] = Registry("tracker")


def finite_scalars(scalars: Mapping[str, float | None]) -> dict[str, float]:
    """The scalars that have a finite value, as floats."""
    return {k: float(v) for k, v in scalars.items() if v is not None and math.isfinite(float(v))}


def flat_config(config: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """``{"ppo": {"lr": 1e-5}}`` -> ``{"ppo.lr": "1e-05"}`` (lists as JSON): the config as flat parameters."""
    out: dict[str, str] = {}
    for key, value in config.items():
        if isinstance(value, Mapping):
            out.update(flat_config(value, f"{prefix}{key}."))
        else:
            out[prefix + key] = value if isinstance(value, str) else json.dumps(value)
    return out


def _read_state(path: Path) -> dict[str, Any] | None:
    return read_json(path)


def _write_state(path: Path, state: dict[str, Any]) -> None:
    write_json(path, state, indent=None)


# ---------------------------------------------------------------------------------------------
# TensorBoard


class TensorBoardTracker:
    """Event files under ``RUN_DIR/tb`` (``tensorboard --logdir RUN_DIR/tb``): scalars, histograms,
    the config as text. On resume after k, ``purge_step=k+1`` hides the earlier events of the
    repeated steps."""

    def __init__(self, ctx: TrackerContext) -> None:
        from torch.utils.tensorboard import SummaryWriter

        purge = None if ctx.resume_after is None else ctx.resume_after + 1
        self._writer = SummaryWriter(str(ctx.run_dir / "tb"), purge_step=purge)
        if ctx.resume_after is None:
            self._writer.add_text("config", "```\n" + json.dumps(ctx.config, indent=2) + "\n```", 0)

    def log(self, step: int, scalars: Mapping[str, float | None], histograms: Mapping[str, torch.Tensor]) -> None:
        for key, value in finite_scalars(scalars).items():
            self._writer.add_scalar(key, value, step)
        for key, values in histograms.items():
            self._writer.add_histogram(key, values.detach().float(), step)
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()


# ---------------------------------------------------------------------------------------------
# Weights & Biases


class WandbTracker:
    """A W&B run: offline by default (``WANDB_MODE`` unset), its files under ``RUN_DIR/wandb``
    (``wandb sync RUN_DIR/wandb/offline-run-*`` uploads them later); project ``WANDB_PROJECT`` or
    "gaca", run name the run directory's. Scalars and histograms; the config as the run's config.
    ``wandb-run.json`` keeps the run id and the last step logged, so a resumed run continues the
    same W&B run (``resume="allow"``) and skips the steps it holds."""

    STATE = "wandb-run.json"

    def __init__(self, ctx: TrackerContext) -> None:
        import wandb

        self._wandb = wandb
        self._state_path = ctx.run_dir / self.STATE
        state = _read_state(self._state_path) if ctx.resume_after is not None else None
        self._id = state["id"] if state else secrets.token_hex(4)
        self._last = state["step"] if state else -1
        self._skipped: list[int] = []
        self._run = wandb.init(
            project=os.environ.get("WANDB_PROJECT", DEFAULT_PROJECT), name=ctx.run_dir.name, id=self._id,
            dir=str(ctx.run_dir), mode=os.environ.get("WANDB_MODE", "offline"),
            resume="allow" if state else None, config=None if state else dict(ctx.config), reinit="create_new")
        if not state:
            _write_state(self._state_path, {"id": self._id, "step": self._last})

    def log(self, step: int, scalars: Mapping[str, float | None], histograms: Mapping[str, torch.Tensor]) -> None:
        if step <= self._last:
            self._skipped.append(step)
            return
        data: dict[str, Any] = dict(finite_scalars(scalars))
        for key, values in histograms.items():
            data[key] = self._wandb.Histogram(values.detach().float().cpu().numpy())
        self._run.log(data, step=step)
        self._last = step
        _write_state(self._state_path, {"id": self._id, "step": step})

    def close(self) -> None:
        if self._skipped:
            logger.info("wandb: steps %s were logged before the interruption; kept as they were", self._skipped)
        self._run.finish()


# ---------------------------------------------------------------------------------------------
# MLflow

#: What MLflow accepts in a metric name; anything else becomes "_".
_MLFLOW_BAD_CHARS = re.compile(r"[^\w\-./ :]")


def mlflow_key(key: str) -> str:
    """The MLflow name of metric ``key``: its first "/" kept (MLflow groups charts by it), later ones and
    characters MLflow refuses as "_" (``eval/success/<family>`` -> ``eval/success_<family>``): MLflow's file
    store makes each "/" a directory, and ``eval/success`` is a metric as well as the others' prefix."""
    namespace, sep, rest = key.partition("/")
    return _MLFLOW_BAD_CHARS.sub("_", namespace + sep + rest.replace("/", "_"))


class MlflowTracker:
    """An MLflow run in experiment ``MLFLOW_EXPERIMENT_NAME`` or "gaca", in ``MLFLOW_TRACKING_URI``
    or, when that is unset, a file store under ``RUN_DIR/mlruns`` (``mlflow ui --backend-store-uri
    RUN_DIR/mlruns`` shows it; MLflow 3 keeps its file store behind ``MLFLOW_ALLOW_FILE_STORE``,
    which this sets for that store). Scalars only (MLflow has no histograms), named by ``mlflow_key``;
    the config as the run's parameters (``ppo.lr``, ...). ``mlflow-run.json`` keeps the store and the
    run id, so a resumed run continues the same MLflow run and skips the steps it holds (read from the
    store)."""

    STATE = "mlflow-run.json"

    def __init__(self, ctx: TrackerContext) -> None:
        from mlflow import MlflowClient
        from mlflow.entities import Param

        state_path = ctx.run_dir / self.STATE
        state = _read_state(state_path) if ctx.resume_after is not None else None
        uri = state["tracking_uri"] if state else os.environ.get("MLFLOW_TRACKING_URI", "")
        if not uri:
            uri = (ctx.run_dir / "mlruns").resolve().as_uri()
        if uri.startswith("file:"):
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        self._client = MlflowClient(tracking_uri=uri)
        self._skipped: list[int] = []
        if state:
            self._run_id = state["run_id"]
            self._client.update_run(self._run_id, status="RUNNING")
            self._last = self._last_step()
            return
        name = os.environ.get("MLFLOW_EXPERIMENT_NAME", DEFAULT_PROJECT)
        experiment = self._client.get_experiment_by_name(name)
        experiment_id = experiment.experiment_id if experiment else self._client.create_experiment(name)
        run = self._client.create_run(experiment_id, run_name=ctx.run_dir.name,
                                      tags={"gaca.run_dir": str(ctx.run_dir.resolve())})
        self._run_id, self._last = run.info.run_id, -1
        self._client.log_batch(self._run_id, params=[Param(k, v) for k, v in flat_config(ctx.config).items()])
        _write_state(state_path, {"tracking_uri": uri, "run_id": self._run_id})

    def _last_step(self) -> int:
        """The last step the run holds in the store (-1: none)."""
        keys = self._client.get_run(self._run_id).data.metrics
        steps = [m.step for key in keys for m in self._client.get_metric_history(self._run_id, key)]
        return max(steps, default=-1)

    def log(self, step: int, scalars: Mapping[str, float | None], histograms: Mapping[str, torch.Tensor]) -> None:
        from mlflow.entities import Metric

        if step <= self._last:
            self._skipped.append(step)
            return
        now = int(time.time() * 1000)
        metrics = [Metric(mlflow_key(k), v, now, step) for k, v in finite_scalars(scalars).items()]
        self._client.log_batch(self._run_id, metrics=metrics)
        self._last = step

    def close(self) -> None:
        if self._skipped:
            logger.info("mlflow: steps %s were logged before the interruption; kept as they were", self._skipped)
        self._client.set_terminated(self._run_id, "FINISHED")


TRACKERS.register("tensorboard", TrackerBackend(TensorBoardTracker, module="tensorboard", extra="train",
                                                files=("tb",)))
TRACKERS.register("wandb", TrackerBackend(WandbTracker, module="wandb", extra="wandb",
                                          files=("wandb", WandbTracker.STATE)))
TRACKERS.register("mlflow", TrackerBackend(MlflowTracker, module="mlflow", extra="mlflow",
                                           files=("mlruns", MlflowTracker.STATE)))


def open_trackers(names: list[str] | tuple[str, ...], ctx: TrackerContext) -> list[Tracker]:
    """Open the trackers ``names`` lists, in order; if one fails, close those already open and re-raise."""
    opened: list[Tracker] = []
    try:
        for name in names:
            opened.append(TRACKERS[name].open(ctx))
    except BaseException:
        for tracker in reversed(opened):
            tracker.close()
        raise
    return opened


__all__ = ["DEFAULT_PROJECT", "TRACKERS", "MlflowTracker", "TensorBoardTracker", "Tracker", "TrackerBackend",
           "TrackerContext", "WandbTracker", "finite_scalars", "flat_config", "mlflow_key", "open_trackers"]
