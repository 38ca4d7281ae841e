"""Two run directories metric for metric and weight for weight: the reproducibility check.

Two runs of one config (on one machine, or one run and its kill-and-resume) must log the same metrics
at every iteration and end with bit-identical weights. Per iteration logged by both, this lists the
keys only one run logged and those whose values differ (NaN equals NaN); the keys that describe the
machine rather than the run (``MACHINE_KEYS``: wall-clock times and speeds, a cached warm start) are
skipped. The final
checkpoints' policies (``gaca.policy.PolicyArtifact``) are compared tensor by tensor (names, dtypes,
shapes and every bit) and by fingerprint (weights and tokenizer files).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from gaca.lab.diagnostics.common import DiagnosticError
from gaca.train.checkpoint import load_checkpoint
from gaca.train.logger import read_metrics

#: Metric keys (prefixes) that describe the machine, not the run: wall-clock times and speeds, and whether
#: the warm start came from the cache (``sft/cached``, logged only then). Skipped.
MACHINE_KEYS = ("time/", "perf/rollout_tokens_per_s", "perf/update_tokens_per_s", "perf/advantage_share",
                "sft/seconds", "sft/tokens_per_s", "sft/cached")
#: Run A's values shown per iteration.
SHOWN = ("env/success", "loss/policy", "adv/weight_mean", "adv/advantage_std", "eval/success")


@dataclass
class IterationDiff:
    """One iteration logged by both runs."""

    iteration: int
    only_a: list[str]
    only_b: list[str]
    differ: list[str]
    shown: dict[str, float]
    """Run A's values of the ``SHOWN`` keys it logged."""


@dataclass
class RunDiff:
    """``gaca lab diff``."""

    run_a: str
    run_b: str
    iterations: list[IterationDiff]
    only_in_a: list[int]
    """Iterations only run A logged (within ``--iterations``)."""
    only_in_b: list[int]
    tensors_differ: list[str]
    """Names of the policy tensors that differ (or exist in one policy only)."""
    fingerprint_a: str
    fingerprint_b: str
    weights_identical: bool
    identical: bool
    """The same metrics at every iteration and bit-identical final weights."""
    command: str = ""


def _same(x: Any, y: Any) -> bool:
    if isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y):
        return True
    return bool(x == y)


def iteration_diff(a: dict[str, Any], b: dict[str, Any]) -> IterationDiff:
    """The difference of two metrics records of one iteration (machine keys skipped)."""
    ka = {k for k in a if not k.startswith(MACHINE_KEYS)}
    kb = {k for k in b if not k.startswith(MACHINE_KEYS)}
    return IterationDiff(int(a["iteration"]), sorted(ka - kb), sorted(kb - ka),
                         sorted(k for k in ka & kb if not _same(a[k], b[k])),
                         {k: float(a[k]) for k in SHOWN if k in a})


def flat_tensors(state: dict[str, Any], prefix: str = "") -> dict[str, torch.Tensor]:
    """A policy state's tensors by dotted name (a policy's state nests its model's)."""
    out: dict[str, torch.Tensor] = {}
    for key, value in state.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, dict):
            out.update(flat_tensors(value, name))
        elif isinstance(value, torch.Tensor):
            out[name] = value
    return out


def differing_tensors(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """Names of the tensors of two states that are not bit-identical (dtype, shape and values), or in one only."""
    fa, fb = flat_tensors(a), flat_tensors(b)
    return sorted(set(fa) ^ set(fb)) + sorted(
        k for k in set(fa) & set(fb)
        if fa[k].dtype != fb[k].dtype or fa[k].shape != fb[k].shape or not torch.equal(fa[k], fb[k]))


def diff_runs(run_a: str | Path, run_b: str | Path, *, iterations: int | None = None) -> RunDiff:
    """Compare two run directories (module docstring); ``iterations``: the first N iterations only
    (their metrics; the weights compared are always the final checkpoints')."""
    if iterations is not None and iterations < 0:
        raise DiagnosticError(f"--iterations must be >= 0, got {iterations}")

    def logged(run: str | Path) -> dict[int, dict[str, Any]]:
        return {int(m["iteration"]): m for m in read_metrics(run)
                if iterations is None or int(m["iteration"]) <= iterations}

    ma, mb = logged(run_a), logged(run_b)
    pa, pb = load_checkpoint(run_a)["policy"], load_checkpoint(run_b)["policy"]
    rows = [iteration_diff(ma[i], mb[i]) for i in sorted(set(ma) & set(mb))]
    only_a, only_b = sorted(set(ma) - set(mb)), sorted(set(mb) - set(ma))
    tensors = differing_tensors(pa.state, pb.state)
    same_metrics = not only_a and not only_b and not any(r.differ or r.only_a or r.only_b for r in rows)
    return RunDiff(str(run_a), str(run_b), rows, only_a, only_b, tensors, pa.fingerprint, pb.fingerprint,
                   weights_identical=not tensors, identical=same_metrics and not tensors)


def table(result: RunDiff) -> str:
    """Per iteration the counts of differing and one-sided keys (named below the row) and run A's
    main numbers; then the iterations one run lacks and the weights' verdict."""
    lines = ["| iteration | differ | only A | only B | " + " | ".join(SHOWN) + " |",
             "|---|" + "---|" * (3 + len(SHOWN))]
    for r in result.iterations:
        lines.append(f"| {r.iteration} | {len(r.differ)} | {len(r.only_a)} | {len(r.only_b)} | "
                     + " | ".join(f"{r.shown[k]:.4f}" if k in r.shown else "" for k in SHOWN) + " |")
    for r in result.iterations:
        for name, keys in (("differ", r.differ), ("only in A", r.only_a), ("only in B", r.only_b)):
            if keys:
                lines.append(f"iteration {r.iteration}, {name}: {', '.join(keys)}")
    for name, its in (("A", result.only_in_a), ("B", result.only_in_b)):
        if its:
            lines.append(f"iterations only {name} logged: {', '.join(map(str, its))}")
    verdict = "bit-identical" if result.weights_identical else (
        f"differ in {len(result.tensors_differ)} tensors (first: {result.tensors_differ[0]})")
    lines.append(f"final weights {verdict}; fingerprints {result.fingerprint_a} and {result.fingerprint_b}")
    return "\n".join(lines)


__all__ = ["MACHINE_KEYS", "SHOWN", "IterationDiff", "RunDiff", "diff_runs", "differing_tensors", "flat_tensors",
           "iteration_diff", "table"]
