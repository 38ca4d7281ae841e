"""Run a comparison matrix: ``parallel`` worker processes at a time, skipping finished runs, resuming the rest.

    matrix = load_matrix("experiments/decisive/phase2/matrix.toml")
    run_matrix(matrix, "experiments/decisive/phase2/matrix.toml")   # hours; interrupt, call again to continue
    write_compare_report(matrix, out_dir, command=...)               # gaca.lab.compare.report

Each run is a child process (``gaca.lab.compare.worker``). A run whose warm start another running
run is computing waits for it, so that SFT is paid once per (setting, seed) and every arm starts from
that policy. Ctrl-C (or SIGTERM) passes SIGTERM to the children, which checkpoint at their next
iteration boundary, and returns when they have; a second one aborts.

With a deadline (``gaca lab compare … --deadline 20:30``) no run is started that the records predict to
end after it (``analysis.predicted_seconds``: its arm's measured time, plus SFT where its warm start is not
made); those are left for a later call, so that an allocation that ends (a batch job's wall time, a
machine lent for a session) cuts no run half-way. A run nothing measured yet can predict is started.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import math
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from gaca.lab.compare.analysis import collect, predicted_seconds
from gaca.lab.compare.matrix import CompareMatrix, RunSpec, run_spec_json
from gaca.lab.compare.worker import RUN_BUSY, lock_run
from gaca.train.run import Interrupt
from gaca.train.warm_start import WarmStartCache, warm_start_key

logger = logging.getLogger(__name__)

#: A run's status when it was not started because it was predicted to end after the deadline.
DEFERRED = "deferred (predicted to end after the deadline)"
#: A run's status when another scheduler's worker is running it (it holds the run's lock).
ELSEWHERE = "running elsewhere (another worker holds its lock)"


def run_finished(run: RunSpec) -> bool:
    """Trained to its last iteration and evaluated on every split, and the seed's warm start evaluated
    too: the records say so (the run directory may be gone)."""
    record = run.record()
    warm = run.matrix.store.warm_start(run.setting.name, run.seed)
    return (record is not None and record.finished(run.eval_splits)
            and all(s in warm.evaluations for s in run.eval_splits))


def _log_path(run: RunSpec) -> Path:
    return run.matrix.root_dir / "logs" / (run.name.replace("/", "__").replace(" ", "_") + ".log")


def run_lock_path(run: RunSpec) -> Path:
    """The lock file the run's worker holds while it lives (beside its log and spec)."""
    return _log_path(run).with_suffix(".lock")


def running_elsewhere(run: RunSpec) -> bool:
    """Another process's worker holds the run's lock (``worker.lock_run``)."""
    lock = lock_run(run_lock_path(run))
    if lock is not None:
        lock.close()
    return lock is None


def _start(run: RunSpec, matrix_file: str, overrides: list[str]) -> subprocess.Popen:
    log_path = _log_path(run)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    spec_path = log_path.with_suffix(".json")
    spec_path.write_text(json.dumps(run_spec_json(run, matrix_file, overrides), indent=1) + "\n")
    log = open(log_path, "a")
    log.write(f"\n=== {time.strftime('%Y-%m-%d %H:%M:%S')} start {run.name}\n")
    log.flush()
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, "-m", "gaca.lab.compare.worker", str(spec_path)], stdout=log,
                            stderr=subprocess.STDOUT, env=env, start_new_session=True)


def parse_deadline(text: str, now: dt.datetime) -> dt.datetime:
    """``--deadline``: a clock time ``HH:MM`` (its next occurrence after ``now``), a date and time
    ``2026-12-07T20:30``, or a duration from ``now`` such as ``+2h30m``, ``+90m`` or ``+1.5h``."""
    duration = re.fullmatch(r"\+(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?", text.strip())
    if duration and any(duration.groups()):
        hours, minutes = (float(g or 0) for g in duration.groups())
        return now + dt.timedelta(hours=hours, minutes=minutes)
    clock = re.fullmatch(r"(\d{1,2}):(\d{2})", text.strip())
    try:
        if clock:
            at = now.replace(hour=int(clock[1]), minute=int(clock[2]), second=0, microsecond=0)
            return at if at > now else at + dt.timedelta(days=1)
        at = dt.datetime.fromisoformat(text.strip())
        return at.astimezone().replace(tzinfo=None) if at.tzinfo else at  # compared with local naive times
    except ValueError:
        pass
    raise ValueError(f"--deadline {text!r}: give a clock time (20:30), a date and time (2026-12-07T20:30) or a "
                     "duration from now (+2h30m)")


def run_matrix(matrix: CompareMatrix, matrix_file: str = "", overrides: list[str] | None = None, *,
               seeds: list[int] | None = None, deadline: dt.datetime | None = None, progress: bool = True,
               poll_s: float = 2.0) -> dict[str, str]:
    """Run every unfinished run of ``matrix`` (loaded from ``matrix_file`` with ``overrides``; "" for
    ``quick_matrix``), ``matrix.parallel`` at a time; with ``seeds``, only the runs of those seeds (the
    declared matrix is unchanged: its other runs stay left to run); with ``deadline``, only runs predicted
    to end before it (module docstring).

    Returns:
      run name -> "finished" | "failed (exit N, see LOG)" | "interrupted" | ``DEFERRED`` | ``ELSEWHERE``,
      for every run it was asked to run.
    """
    if seeds is not None and not set(seeds) <= set(matrix.seeds):
        raise ValueError(f"--seeds {sorted(set(seeds) - set(matrix.seeds))} are not seeds of the matrix {matrix.seeds}")
    runs = [run for run in matrix.runs() if seeds is None or run.seed in seeds]
    configs = {run.name: run.config() for run in runs}  # every config error now, before any run starts
    status = {run.name: "finished" for run in runs if run_finished(run)}
    pending = [run for run in runs if run.name not in status]
    keys = {run.name: (warm_start_key(configs[run.name]), WarmStartCache.of(configs[run.name]).path(configs[run.name]))
            for run in pending}
    running: dict[str, tuple[RunSpec, subprocess.Popen]] = {}
    measured = collect(matrix) if deadline is not None else {}

    def ready(run: RunSpec) -> bool:  # unless another running run is computing the warm start it needs
        key, path = keys[run.name]
        return path.is_file() or all(keys[other][0] != key for other in running)

    def in_time(run: RunSpec) -> bool:  # predicted to end before the deadline, or unpredictable
        if deadline is None:
            return True
        seconds = predicted_seconds(measured, run, warm_start_made=keys[run.name][1].is_file())
        if not math.isfinite(seconds):
            logger.warning("%s: no finished run of its setting predicts its time; started despite the deadline",
                           run.name)
            return True
        end = dt.datetime.now() + dt.timedelta(seconds=seconds)
        if end > deadline:
            logger.info("%s: not started, predicted to end at %s, after the deadline %s", run.name,
                        end.strftime("%H:%M"), deadline.strftime("%H:%M"))
        return end <= deadline

    def stop_children() -> None:
        for _, proc in running.values():
            proc.terminate()  # SIGTERM: each run checkpoints at its next iteration boundary

    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(runs), initial=len(status), desc="runs", unit="run", dynamic_ncols=True)
    interrupt = Interrupt("stopping the runs at their next iteration boundary", on_first=stop_children)
    with interrupt.installed():
        while pending or running:
            while not interrupt.requested and len(running) < matrix.parallel:
                run = next((r for r in pending if ready(r)), None)
                if run is None:
                    break
                pending.remove(run)
                if not in_time(run):
                    status[run.name] = DEFERRED
                elif running_elsewhere(run):
                    status[run.name] = ELSEWHERE
                    logger.warning("%s: %s; not started", run.name, ELSEWHERE)
                else:
                    running[run.name] = (run, _start(run, matrix_file, list(overrides or [])))
            for name, (run, proc) in list(running.items()):
                code = proc.poll()
                if code is None:
                    continue
                del running[name]
                if code == 0 and run_finished(run):
                    status[name] = "finished"
                    measured = collect(matrix) if deadline is not None else measured  # one more measured run
                elif interrupt.requested or code == 130:
                    status[name] = "interrupted"
                elif code == RUN_BUSY:  # another scheduler started it between our look and its start
                    status[name] = ELSEWHERE
                else:
                    status[name] = f"failed (exit {code}, see {_log_path(run)})"
                    logger.error("%s %s", name, status[name])
                if bar is not None:
                    bar.update(1)
            if interrupt.requested and not running:
                break
            time.sleep(poll_s)
    if bar is not None:
        bar.close()
    status.update({run.name: "interrupted" for run in pending})
    return status


__all__ = ["DEFERRED", "ELSEWHERE", "parse_deadline", "run_finished", "run_lock_path", "run_matrix",
           "running_elsewhere"]
