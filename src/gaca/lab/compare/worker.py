"""One run of a comparison matrix, in its own process: ``python -m gaca.lab.compare.worker RUN.json``.

RUN.json is what ``gaca.lab.compare.matrix.run_spec_json`` writes: the matrix file, the scratch root,
and which (setting, arm, seed). The worker trains the run's config (``--resume`` when its directory holds a checkpoint,
nothing when the checkpoint is final), evaluates the final policy on every held-out split (per-game
outcomes, saved split by split in ``lab-eval.json`` so an interruption loses at most one split),
writes the run's record, and evaluates the seed's warm start once per (setting, seed). SIGTERM from
the scheduler ends training at the next iteration boundary, checkpointed (the trainer's own
interrupt handling); the next call of the matrix resumes it. The worker holds the run's lock file
(``RUN.lock``, beside RUN.json) while it lives: a second scheduler on the same scratch root (started
twice by mistake) cannot start a run that one of the first's workers is training.
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import logging
import signal
import sys
import tempfile
from pathlib import Path
from typing import IO, Any

from gaca.config import to_dict
from gaca.lab.compare.matrix import RunSpec, load_run
from gaca.lab.compare.records import RunRecord, SplitEvaluation, WarmStartRecord
from gaca.persist import read_json, write_json
from gaca.train.checkpoint import CHECKPOINT_NAME, load_checkpoint
from gaca.train.logger import read_metrics
from gaca.train.loop import train
from gaca.train.run import eval_pool, load_checkpoint_policy, run_eval
from gaca.train.warm_start import WarmStartCache, warm_start

logger = logging.getLogger(__name__)

#: The run directory's evaluation file: the final policy's evaluation per split, as it is made.
EVAL_FILE = "lab-eval.json"
#: A worker's exit code when another process holds its run's lock (EX_TEMPFAIL: nothing done, try later).
RUN_BUSY = 75


def lock_run(path: Path) -> IO[str] | None:
    """Take the lock file ``path`` (created if missing) for as long as the returned file stays open;
    None when another process holds it. The kernel releases it when its holder exits, however it exits."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = open(path, "a")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        return None
    return handle


def evaluate_splits(policy: Any, cfg: Any, splits: list[str], done: dict[str, SplitEvaluation],
                    save: Any) -> dict[str, SplitEvaluation]:
    """Evaluate ``policy`` on every split not in ``done``, calling ``save(done)`` after each."""
    for split in splits:
        if split in done:
            continue
        split_cfg = dataclasses.replace(cfg, env=dataclasses.replace(cfg.env, eval_split=split))
        with eval_pool(split_cfg) as pool:
            done[split] = SplitEvaluation.of(run_eval(policy, pool, split_cfg))
        save(done)
        logger.info("%s: success %.3f", split, done[split].success())
    return done


def final_iteration(run_dir: Path) -> int | None:
    """The iteration of the run's checkpoint (None: no checkpoint)."""
    if not (run_dir / CHECKPOINT_NAME).is_file():
        return None
    return int(load_checkpoint(run_dir)["trainer"]["iteration"])


def train_and_evaluate(run: RunSpec) -> RunRecord | None:
    """Train (or resume) the run to its last iteration, evaluate its final policy, save its record.

    Returns the record, or None when training was interrupted (checkpointed).
    """
    cfg = run.config()
    run_dir = Path(cfg.out_dir)
    done = final_iteration(run_dir)
    if done is None or done < cfg.iterations:
        resume = done is not None
        overwrite = not resume and run_dir.is_dir() and any(run_dir.iterdir())
        logger.info("%s: %s", run.name, "resuming" if resume else "training")
        if train(cfg, resume=resume, overwrite=overwrite).interrupted:
            return None
    policy, final_cfg = load_checkpoint_policy(run_dir)
    saved = read_json(run_dir / EVAL_FILE, {})
    evaluations = {s: SplitEvaluation.from_json(e) for s, e in saved.items()}
    evaluations = evaluate_splits(policy, final_cfg, run.eval_splits, evaluations, lambda d: write_json(
        run_dir / EVAL_FILE, {s: e.to_json() for s, e in d.items()}))
    record = RunRecord.from_metrics(read_metrics(run_dir), to_dict(cfg), WarmStartCache.of(cfg).fingerprint(cfg),
                                    evaluations, run.eval_splits)
    run.save_record(record)
    return record


def seed_warm_start(run: RunSpec, record: WarmStartRecord, files_dir: Path) -> tuple[Any, dict[str, float], str | None]:
    """The seed's warm start (from the cache, or made there: a committed record's scratch root was cleaned),
    its ``sft/…`` summary and fingerprint; refused when ``record``, the seed's, names another one.
    ``files_dir`` receives the policy's tokenizer files."""
    cfg = run.config()
    policy, summary = warm_start(cfg, files_dir)
    ours = WarmStartCache.of(cfg).fingerprint(cfg)
    if record.fingerprint is not None and ours != record.fingerprint:
        raise WarmStartMismatch(f"{run.name}: the warm start computed here ({ours}) is not the seed's recorded one "
                                f"({record.fingerprint}); CPU numerics differ between machines after thousands "
                                "of SFT steps: finish this seed where it started, or delete its records")
    return policy, summary, ours


def evaluate_warm_start(run: RunSpec) -> WarmStartRecord:
    """Evaluate the seed's warm start (``seed_warm_start``) on every split its record lacks."""
    store, setting = run.matrix.store, run.setting.name
    record = store.warm_start(setting, run.seed)
    if all(s in record.evaluations for s in run.eval_splits):
        return record
    cfg = run.config()
    policy, summary, ours = seed_warm_start(run, record, Path(cfg.out_dir) / "warm-start-eval")
    record.fingerprint = ours
    if record.sft_seconds is None and "sft/seconds" in summary:  # a cached warm start keeps its SFT's time
        record.sft_seconds = float(summary["sft/seconds"])
    evaluate_splits(policy, cfg, run.eval_splits, record.evaluations,
                    lambda _: store.save_warm_start(setting, run.seed, record))
    store.save_warm_start(setting, run.seed, record)
    return record


class WarmStartMismatch(RuntimeError):
    """A run's warm start is not its seed's recorded one (refused: its runs would not pair)."""


def run_one(run: RunSpec) -> int:
    """The whole job of one run (module docstring); the process's exit code."""
    record = run.record()
    if record is None or not record.finished(run.eval_splits):
        if final_iteration(run.out_dir) is None:  # a fresh start: from the seed's warm start or not at all
            with tempfile.TemporaryDirectory() as files:  # not in the run directory, which is not begun yet
                seed_warm_start(run, run.matrix.store.warm_start(run.setting.name, run.seed), Path(files))
        record = train_and_evaluate(run)
        if record is None:
            return 130  # interrupted: checkpointed, resumed by the next call of the matrix
    warm = evaluate_warm_start(run)
    if record.warm_start != warm.fingerprint:
        raise WarmStartMismatch(f"{run.name} started from warm start {record.warm_start}, not the seed's "
                                f"recorded {warm.fingerprint}; delete the run's record and directory to rerun it")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the worker process."""
    args = sys.argv[1:] if argv is None else argv
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        datefmt="%H:%M:%S")
    spec_path = Path(args[0])
    lock = lock_run(spec_path.with_suffix(".lock"))
    if lock is None:
        logger.error("%s: another worker holds its lock (%s) and is running it", spec_path.stem,
                     spec_path.with_suffix(".lock"))
        return RUN_BUSY
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the scheduler sends SIGTERM; Ctrl-C goes to it alone
    with lock:
        spec = json.loads(spec_path.read_text())
        return run_one(load_run(spec, spec.get("overrides")))


__all__ = ["EVAL_FILE", "RUN_BUSY", "WarmStartMismatch", "evaluate_splits", "evaluate_warm_start", "final_iteration",
           "lock_run", "main", "run_one", "seed_warm_start",
           "train_and_evaluate"]

if __name__ == "__main__":  # pragma: no cover - the scheduler's child process
    sys.exit(main())
