"""Run a comparison matrix: two runs at a time, skipping finished ones and resuming interrupted ones.

    matrix = load_matrix()                 # gaca/configs/lab/compare.toml, or a file of yours
    run_matrix(matrix)                     # hours; interrupt and call again to continue
    write_compare_report(matrix, out_dir)  # gaca.lab.compare_report, from whatever has finished

Each run is a child process (``python -m gaca.lab.compare RUN.json``) that trains the run's config
(``--resume`` when its directory holds a checkpoint, skipped when the checkpoint is final), then
evaluates the final policy, and the seed's warm-start policy, on every held-out split of the
matrix, writing ``lab-eval.json`` (per-game outcomes, for paired statistics) after each split,
and at the end the run's record (``gaca.lab.records``), by which later calls know it finished.
A run whose warm start another running run is computing waits for it, so that SFT is paid once per
(setting, seed) and every estimator starts from that policy. Ctrl-C stops the children at their
next iteration boundary (they checkpoint) and returns.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from gaca.lab.matrix import CompareMatrix, RunSpec
from gaca.lab.records import (
    EVAL_FILE,
    build_record,
    is_complete,
    load_record,
    load_warmstart,
    other_warm_start,
    read_json,
    read_record,
    save_record,
    write_json,
)

logger = logging.getLogger(__name__)

def _eval_record(stats: Any) -> dict[str, Any]:
    return {"metrics": stats.metrics(), "outcomes": stats.outcomes, "seconds": stats.seconds}


def _evaluate_splits(policy: Any, cfg: Any, splits: list[str], path: Path, key: str) -> None:
    """Evaluate ``policy`` on every split missing from ``path``'s ``key`` table, saving after each."""
    from gaca.train.run import eval_pool, run_eval

    record = read_json(path)
    for split in splits:
        if split in record.get(key, {}):
            continue
        split_cfg = dataclasses.replace(cfg, env=dataclasses.replace(cfg.env, eval_split=split))
        with eval_pool(split_cfg) as pool:
            stats = run_eval(policy, pool, split_cfg)
        record = read_json(path)
        record.setdefault(key, {})[split] = _eval_record(stats)
        write_json(path, record)
        logger.info("%s on %s: success %.3f", key, split, stats.success)


def _final_iteration(run_dir: Path) -> int | None:
    from gaca.train.checkpoint import CHECKPOINT_NAME, load_checkpoint

    if not (run_dir / CHECKPOINT_NAME).is_file():
        return None
    return int(load_checkpoint(run_dir)["trainer"]["iteration"])


def run_one(spec: dict[str, Any]) -> None:
    """One run of the matrix, in its own process (see module docstring)."""
    from gaca.train.config import load_config

    cfg = load_config(spec["config"] or None, spec["overrides"], preset=spec["preset"] or None)
    splits = list(spec["eval_splits"])
    if not is_complete(read_record(Path(spec["record"])), splits):
        _train_and_evaluate(cfg, splits, Path(spec["record"]), spec["name"])
    record_path = Path(spec["warmstart_record"])
    if not all(s in read_json(record_path).get("warmstart", {}) for s in splits):
        _evaluate_warm_start(cfg, splits, record_path)
    ours, seeds = read_json(Path(spec["record"])).get("warm_start"), read_json(record_path).get("fingerprint")
    if other_warm_start(ours, seeds):
        logger.error("%s started from warm start %s, not the seed's recorded %s (computed on another machine: "
                     "CPU numerics differ); the report leaves it out. To run the seed here, delete its records",
                     spec["name"], ours, seeds)


def _train_and_evaluate(cfg: Any, splits: list[str], record: Path, name: str) -> None:
    """Train (or resume) the run to its last iteration, evaluate its final policy, save its record."""
    from gaca.train.loop import train
    from gaca.train.run import load_checkpoint_policy
    from gaca.train.warmstart import WarmStartCache

    run_dir = Path(cfg.out_dir)
    done = _final_iteration(run_dir)
    if done is None or done < cfg.iterations:
        resume = done is not None
        overwrite = not resume and run_dir.is_dir() and any(run_dir.iterdir())
        logger.info("%s: %s", name, "resuming" if resume else "training")
        if train(cfg, resume=resume, overwrite=overwrite).interrupted:
            raise SystemExit(130)  # checkpointed; the next call of the matrix resumes it
    policy, final_cfg = load_checkpoint_policy(run_dir)
    _evaluate_splits(policy, final_cfg, splits, run_dir / EVAL_FILE, "final")
    evaluation = read_json(run_dir / EVAL_FILE)
    evaluation["complete"] = all(s in evaluation.get("final", {}) for s in splits)
    write_json(run_dir / EVAL_FILE, evaluation)
    if evaluation["complete"]:
        save_record(record, {**build_record(run_dir), "warm_start": WarmStartCache.of(cfg).fingerprint(cfg)})


def _evaluate_warm_start(cfg: Any, splits: list[str], record: Path) -> None:
    """Evaluate the seed's warm start (from the SFT cache; recomputed, and cached, when the cache is
    gone, e.g. a record kept from an earlier sitting whose scratch root was cleaned)."""
    from gaca.train.warmstart import WarmStartCache, warm_start

    scratch = Path(cfg.out_dir) / "warmstart-eval"  # the tokenizer files of a tiny policy land here
    policy, _ = warm_start(cfg, scratch)
    ours, saved = WarmStartCache.of(cfg).fingerprint(cfg), read_json(record)
    if saved.get("warmstart") and other_warm_start(ours, saved.get("fingerprint")):
        return  # another machine's warm start: its splits must not be mixed with this one's (run_one says so)
    write_json(record, {**saved, "fingerprint": ours})
    _evaluate_splits(policy, cfg, splits, record, "warmstart")


def run_finished(run: RunSpec) -> bool:
    """Trained to its last iteration and evaluated on every split, and the seed's warm start
    evaluated too: the records say so (the run directory may be gone)."""
    warm = load_warmstart(run.matrix, run.setting.name, run.seed)
    return is_complete(load_record(run), run.eval_splits) and all(s in warm for s in run.eval_splits)


def _warm_key_and_file(run: RunSpec) -> tuple[str, Path]:
    from gaca.train.warmstart import WarmStartCache, warmstart_key

    cfg = run.config()  # its sft.cache_dir is the matrix's warm-start directory
    return warmstart_key(cfg), WarmStartCache.of(cfg).path(cfg)


def run_matrix(matrix: CompareMatrix, *, progress: bool = True, poll_s: float = 2.0) -> dict[str, str]:
    """Run every unfinished run of ``matrix``, ``matrix.parallel`` at a time.

    Returns:
      run name -> "finished" | "failed (exit N, see LOG)" | "interrupted" for each run this call started
      (runs found finished are "finished" too).
    """
    root = Path(matrix.root)
    (root / "logs").mkdir(parents=True, exist_ok=True)
    runs = matrix.runs()
    for run in runs:
        run.config()  # every config error now, before any run starts
    status = {run.name: "finished" for run in runs if run_finished(run)}
    pending = [run for run in runs if run.name not in status]
    keys = {run.name: _warm_key_and_file(run) for run in pending}
    running: dict[str, tuple[RunSpec, subprocess.Popen]] = {}
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(runs), initial=len(status), desc="runs", unit="run", dynamic_ncols=True)
    stop = {"requested": False}

    def on_signal(signum: int, frame: Any) -> None:
        stop["requested"] = True
        for _, proc in running.values():
            proc.send_signal(signal.SIGTERM)  # each run checkpoints at its next iteration boundary

    previous = signal.signal(signal.SIGINT, on_signal)
    try:
        while pending or running:
            while not stop["requested"] and len(running) < matrix.parallel:
                run = next((r for r in pending if _ready(r, keys, running)), None)
                if run is None:
                    break
                pending.remove(run)
                running[run.name] = (run, _start(run))
            for name, (run, proc) in list(running.items()):
                code = proc.poll()
                if code is None:
                    continue
                del running[name]
                if code == 0 and run_finished(run):
                    status[name] = "finished"
                elif stop["requested"]:
                    status[name] = "interrupted"
                else:
                    status[name] = f"failed (exit {code}, see {_log_path(run)})"
                    logger.error("%s %s", name, status[name])
                if bar is not None:
                    bar.update(1)
            if stop["requested"] and not running:
                break
            time.sleep(poll_s)
    finally:
        signal.signal(signal.SIGINT, previous)
        if bar is not None:
            bar.close()
    return status


def _ready(run: RunSpec, keys: dict[str, tuple[str, Path]], running: dict[str, Any]) -> bool:
    """A run may start unless another running run is computing the warm start it needs."""
    key, path = keys[run.name]
    return path.is_file() or all(keys[other][0] != key for other in running)


def _log_path(run: RunSpec) -> Path:
    return Path(run.matrix.root) / "logs" / (run.name.replace("/", "__") + ".log")


def _start(run: RunSpec) -> subprocess.Popen:
    spec_path = _log_path(run).with_suffix(".json")
    spec_path.write_text(json.dumps(run.to_json(), indent=1) + "\n")
    log = open(_log_path(run), "a")
    log.write(f"\n=== {time.strftime('%Y-%m-%d %H:%M:%S')} start {run.name}\n")
    log.flush()
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, "-m", "gaca.lab.compare", str(spec_path)], stdout=log,
                            stderr=subprocess.STDOUT, env=env, start_new_session=True)


def main(argv: list[str] | None = None) -> int:
    """The child process of one run: ``python -m gaca.lab.compare RUN.json``."""
    args = sys.argv[1:] if argv is None else argv
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        datefmt="%H:%M:%S")
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the scheduler sends SIGTERM; Ctrl-C goes to it alone
    run_one(json.loads(Path(args[0]).read_text()))
    return 0


__all__ = ["EVAL_FILE", "main", "run_finished", "run_matrix", "run_one"]

if __name__ == "__main__":  # pragma: no cover - the scheduler's child process
    sys.exit(main())
