"""The ``gaca`` command line: train, eval, plot, presets, config show.

    gaca train --preset tiny-alfworld                     # the README's main job
    gaca train --config my.toml advantage.kappa=0.5 iterations=30
    gaca train --preset tiny-alfworld --resume            # continue out_dir's checkpoint
    gaca eval runs/tiny-alfworld env.num_eval_games=48
    gaca plot runs/tiny-alfworld
    gaca config show --preset tiny-alfworld env.max_steps=20   # the resolved config, documented
    gaca lab accuracy runs/tiny-alfworld --quick               # credit against Monte-Carlo truth
    gaca lab compare experiments/<name>/matrix.toml            # settings x arms x seeds, resumable
    gaca lab dynamics experiments/<name>/matrix.toml SETTING   # training rollouts per arm over iterations
    gaca lab credit runs/tiny-alfworld                         # credit on invalid steps, NLL coupling
    gaca lab anchors runs/tiny-alfworld                        # step-level peers under each anchor kind
    gaca lab diff RUN_A RUN_B                                  # metrics and weights identical?
"""

from __future__ import annotations

import argparse
import errno
import json
import logging
import os
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

logger = logging.getLogger("gaca")


def _fmt_eval(m: dict[str, float] | None) -> str:
    if not m:
        return "n/a"
    fams = ", ".join(f"{k.split('/', 2)[2]} {v:.2f}" for k, v in sorted(m.items()) if k.startswith("eval/success/"))
    return (f"{m['eval/success']:.3f} ({int(m.get('eval/episodes', 0))} episodes; mean length "
            f"{m.get('eval/episode_length', 0):.1f}, invalid {m.get('eval/invalid_ratio', 0):.2f}; {fams})")


def cmd_train(args: argparse.Namespace) -> int:
    from gaca.train.config import load_config
    from gaca.train.loop import train
    from gaca.train.plot import plot_run

    cfg = load_config(args.config, args.overrides, preset=args.preset)
    print(f"gaca train: estimator={cfg.estimator} model={cfg.policy.model} iterations={cfg.iterations} "
          f"-> {cfg.out_dir}", flush=True)
    result = train(cfg, resume=args.resume, overwrite=args.overwrite)
    plots = plot_run(result.run_dir)
    print(f"held-out success before training: {_fmt_eval(result.eval_before)}")
    print(f"held-out success after {result.iterations} iterations: {_fmt_eval(result.eval_after)}")
    if result.timing:
        t = result.timing
        print("mean seconds per iteration: " + ", ".join(
            f"{k.split('/')[1][:-2]} {v:.2f}" for k, v in t.items()))
    print(f"wall time {result.seconds:.0f} s; run directory {result.run_dir} (metrics.jsonl, checkpoint.pt, "
          + ", ".join(p.name for p in plots) + ")")
    if result.interrupted:
        print("interrupted: continue with --resume")
        return 130
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from gaca.train.run import evaluate_checkpoint

    stats, _cfg = evaluate_checkpoint(args.checkpoint, args.overrides, keep_episodes=args.episodes is not None)
    metrics = stats.metrics()
    print(f"held-out success: {_fmt_eval(metrics)}")
    if args.json:
        print(json.dumps(metrics, indent=2, sort_keys=True))
    if args.episodes is not None:
        from gaca.persist import atomic_write
        from gaca.train.evaluate import episode_log

        atomic_write(args.episodes, "".join(json.dumps(episode_log(e)) + "\n" for e in stats.played))
        print(f"wrote {len(stats.played)} episodes (task, actions, outcome) to {args.episodes}")
    return 0


def cmd_plot(args: argparse.Namespace) -> int:
    from gaca.train.plot import plot_run

    for path in plot_run(args.run_dir):
        print(path)
    return 0


def cmd_presets(args: argparse.Namespace) -> int:
    from gaca.train.config import preset_names, preset_path

    for name in preset_names():
        first = preset_path(name).read_text().splitlines()[0].lstrip("# ").strip()
        print(f"{name:28s} {first}")
    return 0


def cmd_config_show(args: argparse.Namespace) -> int:
    from gaca.config import describe
    from gaca.train.config import load_config

    cfg = load_config(args.config, args.overrides, preset=args.preset)
    print("\n".join(describe(cfg)))
    return 0


def cmd_lab_accuracy(args: argparse.Namespace) -> int:
    from pathlib import Path

    from gaca.config import apply_overrides, from_dict
    from gaca.lab.accuracy import (
        DEFAULT_GACA,
        AccuracyConfig,
        analyze_accuracy,
        load_accuracy_result,
        measure_accuracy,
        write_accuracy_report,
    )

    if args.from_json:
        data, command = load_accuracy_result(args.run_dir)
        out_dir = Path(args.out) if args.out else Path(args.run_dir).parent
    else:
        base = vars(AccuracyConfig.quick()) if args.quick else {}
        cfg = from_dict(AccuracyConfig, apply_overrides(dict(base), args.overrides))
        out_dir = Path(args.out) if args.out else Path(args.run_dir) / "lab-accuracy"
        data = measure_accuracy(args.run_dir, cfg)
        command = "gaca lab accuracy " + " ".join([args.run_dir, *(["--quick"] if args.quick else []),
                                                   *args.overrides])
    analysis = analyze_accuracy(data)
    paths = write_accuracy_report(data, analysis, out_dir, command=command)
    rows = analysis.undiscounted.scores["all"].settings
    print(f"{analysis.steps_scored} steps scored against Monte-Carlo truth "
          f"(noise ceiling r = {analysis.undiscounted.noise_ceiling:.2f}); Pearson r [95%]:")
    for label in ("grpo", "rloo", "gigpo", "fixed_mix w0=0.5", DEFAULT_GACA, "empg", "hgpo K=2"):
        if label in rows:
            r = rows[label].pearson
            print(f"  {label:28s} {r.value:6.3f} [{r.lo:.2f}, {r.hi:.2f}]")
    if analysis.premise is not None:
        print("  " + analysis.premise.summary())
    print("wrote " + ", ".join(str(p) for p in paths))
    return 0


def cmd_lab_compare(args: argparse.Namespace) -> int:
    import datetime as dt
    from pathlib import Path

    from gaca.lab.compare import load_matrix, quick_matrix, run_matrix, write_compare_report
    from gaca.lab.compare.scheduler import DEFERRED, ELSEWHERE, parse_deadline

    deadline = parse_deadline(args.deadline, dt.datetime.now()) if args.deadline else None
    if args.quick:
        directory = Path(args.out or "runs/compare-quick")
        matrix = quick_matrix(directory, args.root or directory / "runs")
        matrix_file = ""
    else:
        if not args.matrix:
            raise FileNotFoundError("gaca lab compare needs a matrix file (experiments/<name>/matrix.toml), "
                                    "or --quick")
        matrix = load_matrix(args.matrix, args.overrides, root=args.root or "")
        matrix_file = args.matrix
    status = {} if args.report_only else run_matrix(matrix, matrix_file, args.overrides, seeds=args.seeds,
                                                    deadline=deadline, progress=not args.no_progress)
    command = "gaca lab compare " + " ".join(
        [*([args.matrix] if args.matrix else []), *(["--quick"] if args.quick else []), *args.overrides])
    out = Path(args.out) if args.out else Path(matrix.directory)
    paths = write_compare_report(matrix, out, command=command)
    failed = {k: v for k, v in status.items() if v.startswith("failed")}
    left = [k for k, v in status.items() if v == "interrupted"]
    deferred = sum(v == DEFERRED for v in status.values())
    elsewhere = sum(v == ELSEWHERE for v in status.values())
    if not args.report_only:
        print(f"{sum(v == 'finished' for v in status.values())} of {len(status)} runs finished"
              + (f"; interrupted: {len(left)} (run the same command again to continue)" if left else "")
              + (f"; not started, predicted to end after {deadline:%Y-%m-%d %H:%M}: {deferred} (left for a "
                 "later call)" if deferred else "")
              + (f"; being run by another scheduler on this root: {elsewhere}" if elsewhere else ""))
    for name, why in failed.items():
        print(f"  {name}: {why}")
    print("wrote " + ", ".join(str(p) for p in paths))
    return 1 if failed else 130 if left else 0


def _written(paths: Sequence[object]) -> str:
    return "wrote " + ", ".join(str(p) for p in paths)


def _command(args: argparse.Namespace) -> str:
    """The command line as typed (kept in a diagnostic's JSON)."""
    return "gaca " + shlex.join(args.argv)


def cmd_lab_dynamics(args: argparse.Namespace) -> int:
    from gaca.lab.compare import load_matrix
    from gaca.lab.diagnostics import dynamics
    from gaca.lab.figures import write_result

    matrix = load_matrix(args.matrix, root=args.root or "")
    result = dynamics.training_dynamics(matrix, args.setting, seeds=args.seeds, window=args.window, keys=args.keys)
    result.command = _command(args)
    out = Path(args.out) if args.out else dynamics.default_out(matrix, args.setting, args.seeds)
    print(dynamics.table(result))
    print(_written([write_result(out, result), dynamics.plot(result, out.with_suffix(".png"))]))
    return 0


def cmd_lab_credit(args: argparse.Namespace) -> int:
    from gaca.lab.diagnostics import credit
    from gaca.lab.figures import write_result

    result, _ = credit.measure_credit(args.run_dir, warm_start=args.warm_start, iterations=args.iterations,
                                      estimators=args.estimators)
    result.command = _command(args)
    print(credit.table(result))
    print(_written([write_result(Path(args.out) if args.out else credit.default_out(args.run_dir, args.warm_start),
                                 result)]))
    return 0


def cmd_lab_anchors(args: argparse.Namespace) -> int:
    from gaca.lab.diagnostics import anchors
    from gaca.lab.figures import write_result

    result = anchors.anchor_peers(args.run_dir, groups=args.groups, seed=args.seed)
    result.command = _command(args)
    print(anchors.table(result))
    print(_written([write_result(Path(args.out) if args.out else anchors.default_out(args.run_dir), result)]))
    return 0


def cmd_lab_diff(args: argparse.Namespace) -> int:
    from gaca.lab.diagnostics import diff
    from gaca.lab.figures import write_result

    result = diff.diff_runs(args.run_a, args.run_b, iterations=args.iterations)
    result.command = _command(args)
    print(diff.table(result))
    if args.out:
        print(_written([write_result(Path(args.out), result)]))
    return 0 if result.identical else 1


def _config_source(parser: argparse.ArgumentParser) -> None:
    src = parser.add_mutually_exclusive_group()
    src.add_argument("--config", help="TOML config file")
    src.add_argument("--preset", help="a shipped preset (see `gaca presets`)")
    parser.add_argument("overrides", nargs="*", help="dotted key=value, e.g. advantage.kappa=0.5 iterations=10")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``gaca``."""
    p = argparse.ArgumentParser(prog="gaca", description="Granularity-Adaptive Credit Assignment: train and "
                                "evaluate LLM agents on multi-turn text environments (offline).")
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    p.add_argument("--debug", action="store_true",
                   help="show the full traceback of an error (also: environment variable GACA_DEBUG=1)")
    sub = p.add_subparsers(dest="command", required=True)

    t = sub.add_parser("train", help="train a policy (config file or preset, plus key=value overrides)")
    _config_source(t)
    t.add_argument("--resume", action="store_true", help="continue the run in out_dir from its checkpoint.pt")
    t.add_argument("--overwrite", action="store_true",
                   help="start over in a non-empty out_dir, removing the earlier run's files (otherwise refused)")
    t.set_defaults(func=cmd_train)

    e = sub.add_parser("eval", help="evaluate a checkpoint on the held-out tasks")
    e.add_argument("checkpoint", help="run directory or checkpoint.pt")
    e.add_argument("overrides", nargs="*", help="key=value changes to the saved config, e.g. eval.temperature=0.5")
    e.add_argument("--json", action="store_true", help="also print all metrics as JSON")
    e.add_argument("--episodes", metavar="PATH",
                   help="write every held-out episode (task, each step's observation and action, outcome) to PATH "
                        "as JSON lines, to read what the agent did")
    e.set_defaults(func=cmd_eval)

    pl = sub.add_parser("plot", help="write success and diagnostics PNGs into a run directory")
    pl.add_argument("run_dir")
    pl.set_defaults(func=cmd_plot)

    pr = sub.add_parser("presets", help="list the shipped presets")
    pr.set_defaults(func=cmd_presets)

    c = sub.add_parser("config", help="inspect configs")
    csub = c.add_subparsers(dest="config_command", required=True)
    show = csub.add_parser("show", help="print the resolved config, each field with its documentation")
    _config_source(show)
    show.set_defaults(func=cmd_config_show)

    lab = sub.add_parser("lab", help="measure credit assignment (accuracy against Monte-Carlo truth), compare "
                         "estimators, diagnose runs")
    lsub = lab.add_subparsers(dest="lab_command", required=True)
    acc = lsub.add_parser("accuracy", help="score every estimator's credit on a checkpoint's steps against "
                          "Monte-Carlo advantages")
    acc.add_argument("run_dir", help="run directory (or checkpoint.pt) of a trained policy")
    acc.add_argument("overrides", nargs="*", help="AccuracyConfig key=value, e.g. steps=200 continuations=8")
    acc.add_argument("--quick", action="store_true", help="a run of about two minutes (4 groups, 48 steps, M=4)")
    acc.add_argument("--out", help="report directory (default: RUN_DIR/lab-accuracy)")
    acc.add_argument("--from-json", action="store_true",
                     help="RUN_DIR is a report's result.json: analyze its measured data again, measure nothing")
    acc.set_defaults(func=cmd_lab_accuracy)
    cmp_ = lsub.add_parser("compare", help="train a matrix of runs (settings x arms x seeds), two at a time, "
                           "resumable; then the paired comparison report")
    cmp_.add_argument("matrix", nargs="?", help="matrix TOML (experiments/<name>/matrix.toml; its records/ are next "
                      "to it)")
    cmp_.add_argument("overrides", nargs="*", help="matrix key=value, e.g. seeds=[0,1,2,3,4] parallel=1")
    cmp_.add_argument("--quick", action="store_true", help="two tiny runs of two iterations (a minute or two)")
    cmp_.add_argument("--root", help="scratch directory of the runs and warm starts (default: runs/<matrix dir name>)")
    cmp_.add_argument("--out", help="report directory (default: the matrix file's directory)")
    cmp_.add_argument("--report-only", action="store_true", help="write the report from the finished runs, run nothing")
    cmp_.add_argument("--no-progress", action="store_true", help="no progress bar")
    cmp_.add_argument("--deadline", help="start no run the finished runs' measured time predicts to end after "
                      "this: a clock time (20:30), a date and time (2026-12-07T20:30) or a duration from now "
                      "(+2h30m); the runs under way finish")
    cmp_.add_argument("--seeds", type=int, nargs="+", help="run only these seeds' runs now, e.g. --seeds 0 1 "
                      "after any overrides (the matrix's other runs stay left to run; the report covers every "
                      "finished run)")
    cmp_.set_defaults(func=cmd_lab_compare)
    _lab_diagnostics(lsub)
    return p


def _lab_diagnostics(lsub: argparse._SubParsersAction) -> None:
    """``gaca lab dynamics|credit|anchors|diff`` (``gaca.lab.diagnostics``)."""
    dyn = lsub.add_parser(
        "dynamics", help="each arm's training rollouts over iterations, mean over seeds (from the records)",
        description="Per arm of one setting of a matrix: the training series (success, invalid actions, NLL, "
        "episode length) in windows of iterations, mean over seeds, read from the records (and from the run "
        "directories for keys or runs the records lack). Writes JSON and a PNG.")
    dyn.add_argument("matrix", help="matrix TOML (experiments/<name>/matrix.toml)")
    dyn.add_argument("setting", help="one of the matrix's settings")
    dyn.add_argument("--seeds", type=int, nargs="+", help="these seeds only (default: all of the matrix's)")
    dyn.add_argument("--window", type=int, default=10, help="iterations per window (default 10)")
    dyn.add_argument("--keys", nargs="+", help="metrics keys (default: those the records keep per iteration)")
    dyn.add_argument("--root", help="scratch directory of the matrix's runs, read where the records lack a series "
                     "(default: runs/<matrix dir name>)")
    dyn.add_argument("--out", help="JSON file, the PNG beside it (default: <matrix dir>/dynamics/<setting>.json)")
    dyn.set_defaults(func=cmd_lab_dynamics)

    cr = lsub.add_parser(
        "credit", help="each estimator's credit on invalid against valid steps, and its coupling to the step NLL",
        description="Draw a run's training rollouts (its checkpoint, or the seed's warm start) and compute every "
        "estimator's advantage on the same steps: its mean on invalid against valid steps (not applicable in "
        "choose mode, where no step is invalid) and its within-state correlation with the step's NLL.")
    cr.add_argument("run_dir", help="a gaca train run directory")
    cr.add_argument("--warm-start", action="store_true",
                    help="draw from the seed's warm start, not the run's checkpoint (default iterations 0-3)")
    cr.add_argument("--iterations", type=int, nargs="+", help="whose task seeds and sampling streams to use "
                    "(default: the 4 after the checkpoint's, or 0-3 with --warm-start)")
    cr.add_argument("--estimators", nargs="+", help="registered estimators (default: grpo rloo gigpo fixed_mix gaca)")
    cr.add_argument("--out", help="JSON file (default: RUN_DIR/lab-credit[-warm-start].json)")
    cr.set_defaults(func=cmd_lab_credit)

    an = lsub.add_parser(
        "anchors", help="how often a step finds a step-level peer under each anchor kind",
        description="Play one rollout of a run's checkpointed policy on its training games and recompute the "
        "anchors of the same steps under every kind (rollout.anchor): the share of steps with a peer, the step "
        "groups and their size.")
    an.add_argument("run_dir", help="a gaca train run directory")
    an.add_argument("--groups", type=int, default=16, help="episode groups (training games) to play (default 16)")
    an.add_argument("--seed", type=int, default=0, help="draws the games and seeds the sampling (default 0)")
    an.add_argument("--out", help="JSON file (default: RUN_DIR/lab-anchors.json)")
    an.set_defaults(func=cmd_lab_anchors)

    df = lsub.add_parser(
        "diff", help="two run directories metric for metric and weight for weight (exit 0: identical)",
        description="The reproducibility check: per iteration the metrics one run lacks or whose values differ "
        "(wall-clock times and speeds skipped), and whether the final checkpoints hold bit-identical weights. "
        "Exits 0 when the runs are identical, 1 otherwise.")
    df.add_argument("run_a", help="a gaca train run directory")
    df.add_argument("run_b", help="another")
    df.add_argument("--iterations", type=int, help="compare the metrics of the first N iterations only")
    df.add_argument("--out", help="also write the comparison as JSON")
    df.set_defaults(func=cmd_lab_diff)


def _one_line(e: BaseException) -> tuple[str, int]:
    """The message and exit code an error gets without ``--debug``."""
    from gaca.config import ConfigError
    from gaca.lab.diagnostics.common import DiagnosticError
    from gaca.policy import DeviceNotAvailableError
    from gaca.train.checkpoint import CheckpointError
    from gaca.train.rundir import RunError
    from gaca.train.update import NonFiniteLossError

    if isinstance(e, ConfigError):
        return f"config error: {e}", 2
    if isinstance(e, DiagnosticError):
        return str(e), 2
    if isinstance(e, (RunError, CheckpointError, FileNotFoundError, DeviceNotAvailableError)):
        return str(e), 2
    if isinstance(e, OSError) and e.errno == errno.ENOSPC:
        return (f"the disk is full (writing {e.filename or 'a file'}): free some space, then continue the run "
                "with --resume"), 1
    if isinstance(e, NonFiniteLossError):
        return f"{e} (lower ppo.lr, or check the advantages' options)", 1
    if isinstance(e, OSError):
        return f"{type(e).__name__}: {e}", 1
    return f"error: {type(e).__name__}: {e} (run with --debug, or GACA_DEBUG=1, for the traceback)", 1


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``gaca`` console script."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    # key=value overrides may stand on either side of the flags (``... a=b --resume c=d``)
    stray = [x for x in extra if x.startswith("-") or "=" not in x or not hasattr(args, "overrides")]
    if stray:
        parser.error(f"unrecognized arguments: {' '.join(stray)}")
    if extra:
        args.overrides = [*args.overrides, *extra]
    args.argv = list(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    debug = args.debug or os.environ.get("GACA_DEBUG", "") not in ("", "0")
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        print("gaca: interrupted", file=sys.stderr)
        return 130
    except Exception as e:
        if debug:
            raise
        message, code = _one_line(e)
        print(f"gaca: {message}", file=sys.stderr)
        return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
