"""The careless user's audit: common command-line mistakes, what each prints, and what it destroys.

    python audits/cli_audit.py                          # this checkout (src/)
    python audits/cli_audit.py --src /tmp/old/src --flavor old --out /tmp/audit_old.json

Runs every case of ``CASES`` as a separate ``python -m gaca.cli`` process on a few-second tiny run
(real model, real ALFWorld games) and records its exit code, whether it printed a traceback, how
many lines its error took (log lines aside), and whether a finished run directory it pointed at
lost or changed any file. ``--flavor old`` spells the small run's settings as gaca did before
typed environment configs (``env.kwargs``, ``rollout.max_steps``), for a before/after comparison
from the same script. Prints a table and writes JSON (default ``audits/results/cli_audit.json``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
LOG_LINE = re.compile(r"^\d\d:\d\d:\d\d (DEBUG|INFO|WARNING|ERROR) ")


@dataclass
class Case:
    name: str
    argv: list[str]
    """``{run}`` is a copy of a finished run, ``{fresh}`` a new directory, ``{tmp}`` a scratch folder."""
    prepare: str = ""
    """What to do to the run copy first: ``corrupt``, ``foreign``, ``truncate_metrics``."""


def small(flavor: str, out: str, cache: str, *extra: str) -> list[str]:
    common = [f"out_dir={json.dumps(out)}", f"policy.cache_dir={json.dumps(cache)}", "policy.tiny_hidden=32",
              "policy.tiny_layers=1", "policy.tiny_heads=2", "policy.tiny_vocab=400", "env.num_train_games=2",
              "env.num_eval_games=2", "env.num_workers=1", "rollout.group_size=2", "rollout.tasks_per_iter=1",
              "rollout.max_new_tokens=6", "sft.episodes=2", "sft.steps=2", "sft.batch_size=4",
              "eval.batch_size=2", "eval.every=0", "ppo.micro_batch_size=4", "iterations=2", "checkpoint_every=1",
              "progress=false", "trackers=[]"]
    if flavor == "old":
        env = [f"env.kwargs={{ max_steps = 3, max_receptacles = 4, num_distractors = 2, "
               f"cache_dir = {json.dumps(cache)} }}", "rollout.max_steps=3"]
    else:
        env = ["env.max_steps=3", f"env.cache_dir={json.dumps(cache)}", "env.generator.max_receptacles=4",
               "env.generator.num_distractors=2"]
    return [*common, *env, *extra]


def cases(flavor: str, cache: str) -> list[Case]:
    def train(out: str, *extra: str, flags: tuple[str, ...] = ()) -> list[str]:
        return ["train", "--preset", "tiny-alfworld", *flags, *small(flavor, out, cache, *extra)]

    return [
        Case("new run into a finished run's directory", train("{run}")),
        Case("unknown estimator into a finished run's directory", train("{run}", "estimator=nope")),
        Case("eval.batch_size=0 into a finished run's directory", train("{run}", "eval.batch_size=0")),
        Case("estimator typo (gacaa)", train("{fresh}", "estimator=gacaa")),
        Case("additive mixture with w0=0", train("{fresh}", "advantage.mixture=additive", "advantage.w0=0")),
        Case("advantage.eps=0", train("{fresh}", "advantage.eps=0")),
        Case("ppo.lr=nan", train("{fresh}", "ppo.lr=nan")),
        Case("advantage.gamma=abc", train("{fresh}", "advantage.gamma=abc")),
        Case("advantage.w0=1.5", train("{fresh}", "advantage.w0=1.5")),
        Case("advantage.kappa=-1", train("{fresh}", "advantage.kappa=-1")),
        Case("unknown policy loss", train("{fresh}", "ppo.policy_loss=vanilla")),
        Case("unknown environment name", train("{fresh}", "env.name=nope")),
        Case("env.num_train_games=0", train("{fresh}", "env.num_train_games=0")),
        Case("rollout.group_size=0", train("{fresh}", "rollout.group_size=0")),
        Case("eval.batch_size=0 (new run)", train("{fresh}", "eval.batch_size=0")),
        Case("policy.device=cuda on a CPU-only machine", train("{fresh}", "policy.device=cuda")),
        Case("out_dir below a file", train("{tmp}/a_file/run")),
        Case("gaca eval of a corrupt checkpoint", ["eval", "{run}"], prepare="corrupt"),
        Case("gaca eval of a foreign torch file", ["eval", "{tmp}/foreign.pt"], prepare="foreign"),
        Case("--resume of a corrupt checkpoint", train("{run}", "iterations=3", flags=("--resume",)),
             prepare="corrupt"),
        Case("--resume with another model size", train("{run}", "iterations=3", "policy.tiny_hidden=64",
                                                       flags=("--resume",))),
        Case("--resume after a truncated metrics.jsonl", train("{run}", "iterations=3", flags=("--resume",)),
             prepare="truncate_metrics"),
        Case("gaca plot of a truncated metrics.jsonl", ["plot", "{run}"], prepare="truncate_metrics"),
        Case("--resume between the overrides", ["train", "--preset", "tiny-alfworld",
                                                *small(flavor, "{run}", cache, "iterations=3")[:2], "--resume",
                                                *small(flavor, "{run}", cache, "iterations=3")[2:]]),
    ]


@dataclass
class Result:
    case: str
    exit_code: int
    traceback: bool
    error_lines: int
    """stderr lines that are not log records."""
    data_lost: bool
    """The finished run's files were removed or changed (where the case points at it)."""
    first_line: str


def snapshot(run: Path) -> dict[str, str]:
    return {str(p.relative_to(run)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(run.rglob("*")) if p.is_file()}


def prepare(kind: str, run: Path, tmp: Path) -> None:
    if kind == "corrupt":
        data = (run / "checkpoint.pt").read_bytes()
        (run / "checkpoint.pt").write_bytes(data[: len(data) // 2])
    elif kind == "foreign":
        torch.save({"state_dict": {}}, tmp / "foreign.pt")
    elif kind == "truncate_metrics":
        with open(run / "metrics.jsonl", "a") as f:
            f.write('{"iteration": 3, "env/succ')


def expected_changes(case: Case, exit_code: int) -> tuple[str, ...]:
    """Files a case may change without destroying anything: a successful resume continues the run,
    a plot redraws its figures."""
    plots = ("success.png", "diagnostics.png")
    if case.argv[0] == "plot":
        return plots
    if "--resume" in case.argv and exit_code == 0:
        return ("metrics.jsonl", "checkpoint.pt", "config.json", *plots)
    return ()


def gaca(src: Path, argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(src), "OMP_NUM_THREADS": "1"}
    env.pop("GACA_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "gaca.cli", *argv], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=900)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", type=Path, default=ROOT / "src", help="the gaca source tree to audit")
    ap.add_argument("--flavor", choices=["new", "old"], default="new", help="how the small run's settings are spelt")
    ap.add_argument("--out", type=Path, default=ROOT / "audits" / "results" / "cli_audit.json")
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="gaca-cli-audit-"))
    cache = str(work / "cache")
    finished = work / "finished"
    made = gaca(args.src, ["train", "--preset", "tiny-alfworld", *small(args.flavor, str(finished), cache)], work)
    if made.returncode != 0:
        print(made.stderr[-3000:], file=sys.stderr)
        raise SystemExit("could not make the finished run the cases start from")
    results = []
    for k, case in enumerate(cases(args.flavor, cache)):
        tmp = work / f"case{k}"
        tmp.mkdir()
        (tmp / "a_file").write_text("x")
        run = tmp / "run"
        shutil.copytree(finished, run)
        prepare(case.prepare, run, tmp)
        before = snapshot(run)
        argv_k = [a.replace("{run}", str(run)).replace("{fresh}", str(tmp / "fresh")).replace("{tmp}", str(tmp))
                  for a in case.argv]
        proc = gaca(args.src, argv_k, tmp)
        errors = [line for line in proc.stderr.splitlines() if line.strip() and not LOG_LINE.match(line)]
        after = snapshot(run)
        lost = any(k not in after or after[k] != v for k, v in before.items()
                   if k not in expected_changes(case, proc.returncode))
        results.append(Result(case.name, proc.returncode, "Traceback (most recent call last)" in proc.stderr,
                              len(errors), lost, (errors[0] if errors else "")[:160]))
        print(f"{case.name:48s} exit {proc.returncode:3d}  traceback {results[-1].traceback!s:5s}  "
              f"lines {len(errors):3d}  lost {lost!s:5s}  {results[-1].first_line[:90]}", flush=True)
    summary = {
        "cases": len(results),
        "clear_errors": sum(1 for r in results if r.exit_code != 0 and not r.traceback and r.error_lines == 1),
        "tracebacks": sum(r.traceback for r in results),
        "data_lost": sum(r.data_lost for r in results),
        "succeeded": sum(r.exit_code == 0 for r in results),
    }
    print(json.dumps(summary))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"src": str(args.src), "flavor": args.flavor, "summary": summary,
                                    "results": [asdict(r) for r in results]}, indent=1) + "\n")
    print(f"wrote {args.out}")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
