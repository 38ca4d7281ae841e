"""Where each estimator puts its credit: invalid-action steps against valid ones, and how it couples
to the step's NLL.

The rollouts are drawn from a run's own policy exactly as its training iterations draw them (the
iteration's task seeds and sampling stream, ``gaca.train.schedule``), from its checkpoint or, with
``warm_start``, from the seed's warm start (the first iterations of training, identical for every
estimator of the seed). Every estimator's per-step advantage is then computed on the same steps with
the run's advantage options.

**Invalid against valid steps.** For each class: the step count, the mean step NLL ℓ_i, GACA's mean
step-level weight w_i and each estimator's mean advantage; and each estimator's gap
(mean_invalid A − mean_valid A) / std_all A, in units of its own spread (the scales differ: rloo is
not normalized). This split does not apply in the ``choose`` action mode: the policy chooses among the
admissible actions, so no step is ever invalid (the result says so and leaves the classes out).

**Coupling to the NLL.** Among the steps taken from one state s (one iteration's task group and
anchor; states with at least two steps), the correlation of ℓ and A after centering both within
their state:

    ρ_ws = Σ_i (ℓ_i − ℓ̄_s(i)) (A_i − Ā_s(i)) / sqrt(Σ_i (ℓ_i − ℓ̄_s(i))² · Σ_i (A_i − Ā_s(i))²).

A softmax policy's entropy moves by about −η·Cov_{a∼π}(log π(a|s), A(s, a)) per policy-gradient step
(Cui et al. 2025, "The Entropy Mechanism of Reinforcement Learning for Reasoning Language Models",
arXiv:2505.22617), so a positive coupling (unlikely responses credited above likely ones from the
same state) raises the policy's NLL and a negative one lowers it. Under GACA's convex mixture,
A = (1 − w)·A^E + w·A^S; each term's coupling, normalized by A's centered norm, adds up to A's. The
coupling applies in every action mode: in ``choose`` mode with ``rollout.step_nll = "decision"`` the
step's NLL is −log π(a|s) itself, the quantity of the entropy mechanism; in ``generate`` mode it is
the response's mean per-token NLL.
"""

from __future__ import annotations

import logging
import math
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch

from gaca.advantage import ESTIMATORS as REGISTERED
from gaca.advantage import compute_advantages
from gaca.lab.diagnostics.common import DiagnosticError, run_config, train_pool
from gaca.policy import CausalLMPolicy, PolicyArtifact
from gaca.registry import UnknownNameError
from gaca.rollout import collect_rollouts
from gaca.train.checkpoint import load_checkpoint
from gaca.train.config import TrainConfig
from gaca.train.run import load_checkpoint_policy
from gaca.train.schedule import iteration_generator, train_task_seeds
from gaca.train.warm_start import warm_start as make_warm_start

logger = logging.getLogger(__name__)

#: The estimators compared by default (GACA is always computed: its NLL and weight are reported).
ESTIMATORS = ("grpo", "rloo", "gigpo", "fixed_mix", "gaca")
#: Action modes in which no step can be invalid: the invalid/valid split does not apply there.
NO_INVALID_STEPS = {"choose": "the policy chooses among the admissible actions, so no step is ever invalid"}
#: What the step NLL ℓ_i is, per action mode and ``rollout.step_nll``.
NLL_MEANING = {("generate", "decision"): "the response's mean per-token NLL",
               ("generate", "tokens"): "the response's mean per-token NLL",
               ("choose", "decision"): "−log π(a|s), the decision's surprisal",
               ("choose", "tokens"): "the chosen response's mean per-token NLL"}
#: GACA's two terms under the convex mixture, (1 − w)·A^E and w·A^S.
GACA_PARTS = ("gaca_episode_part", "gaca_step_part")


@dataclass
class CreditRows:
    """Every step row of the rollouts drawn, all [N] in one order."""

    invalid: torch.Tensor
    """bool: the step's action was malformed or not admissible."""
    nll: torch.Tensor
    """ℓ_i, the step table's NLL (``AdvantageOutput.nll``)."""
    weight: torch.Tensor
    """w_i, GACA's step-level weight."""
    state: torch.Tensor
    """int64: dense id of the step's state (iteration, task group, anchor)."""
    advantage: dict[str, torch.Tensor]
    """Estimator (the ones asked for, ``gaca`` and ``GACA_PARTS``) -> A_i."""


@dataclass(frozen=True)
class StepClass:
    """The invalid (or the valid) steps."""

    steps: int
    nll: float
    gaca_weight: float
    advantage: dict[str, float]
    """Estimator -> its mean advantage over the class (NaN for an empty class)."""


@dataclass(frozen=True)
class Coupling:
    """Each estimator's coupling of its advantage to the step NLL (module docstring)."""

    steps: int
    """Rows in states with at least two rows (those the within-state correlation uses)."""
    within_state: dict[str, float]
    """Estimator -> ρ_ws."""
    gaca_parts: dict[str, float] | None
    """GACA's two terms' shares of its ρ_ws (convex mixture only; they add up to it)."""
    overall: dict[str, float]
    """Estimator -> the plain correlation of ℓ and A over all rows (between states too)."""


@dataclass(frozen=True)
class ValiditySplit:
    """Invalid against valid steps."""

    invalid: StepClass
    valid: StepClass
    gap_std: dict[str, float]
    """Estimator -> (mean_invalid A − mean_valid A) / std_all A (NaN when a class is empty)."""


@dataclass
class CreditResult:
    """``gaca lab credit``."""

    run_dir: str
    warm_start: bool
    """Drawn from the seed's warm start, not the run's checkpoint."""
    iterations: list[int]
    """Whose task seeds and sampling streams the rollouts used."""
    policy: str
    """Fingerprint of the policy that drew the rollouts (``gaca.policy.PolicyArtifact``)."""
    action_mode: str
    nll: str
    """What ℓ_i is in this run's action mode."""
    steps: int
    validity: ValiditySplit | None
    """None where the split does not apply (``not_applicable`` says why)."""
    not_applicable: str
    """Why the run's action mode has no invalid steps ('' where the split applies)."""
    coupling: Coupling
    command: str = ""


def within_state_correlation(x: torch.Tensor, y: torch.Tensor, state: torch.Tensor, *,
                             norm_of: torch.Tensor | None = None) -> tuple[float, int]:
    """corr(x − x̄_s, y − ȳ_s) over the rows of states s with at least two rows, and their count.

    ρ = Σ_i cx_i·cy_i / sqrt(Σ_i cx_i² · Σ_i cn_i²), with cv_i = v_i − mean_{j: s_j = s_i} v_j and cn = cy,
    or the centered ``norm_of`` when given: the values of the parts of a sum y = y1 + y2 (each with
    ``norm_of=y``) then add up to y's. NaN when there is no such row or a centered vector is zero.

    Args:
      x, y, norm_of: [N] float.
      state:         [N] int64, the state id of each row.
    """
    _, inverse, counts = torch.unique(state, return_inverse=True, return_counts=True)
    shared = counts.index_select(0, inverse) > 1

    def centered(v: torch.Tensor) -> torch.Tensor:
        v = v.to(torch.float64)
        sums = torch.zeros(len(counts), dtype=torch.float64).index_add_(0, inverse, v)
        return (v - (sums / counts).index_select(0, inverse))[shared]

    cx, cy = centered(x), centered(y)
    cn = cy if norm_of is None else centered(norm_of)
    denominator = float(((cx * cx).sum() * (cn * cn).sum()).sqrt())
    rho = float((cx * cy).sum()) / denominator if denominator > 0 else math.nan
    return rho, int(shared.sum())


def correlation(x: torch.Tensor, y: torch.Tensor) -> float:
    """Pearson's r of two [N] tensors (NaN when one is constant)."""
    cx, cy = x.double() - x.double().mean(), y.double() - y.double().mean()
    denominator = float(((cx * cx).sum() * (cy * cy).sum()).sqrt())
    return float((cx * cy).sum()) / denominator if denominator > 0 else math.nan


def draw_rows(policy: CausalLMPolicy, cfg: TrainConfig, iterations: list[int], estimators: list[str]) -> CreditRows:
    """The rollouts of ``iterations`` as the run's training draws them, and every estimator's credit."""
    parts: dict[str, list[torch.Tensor]] = {k: [] for k in ("invalid", "nll", "weight", "state_key")}
    computed = list(dict.fromkeys([*estimators, "gaca"]))
    advantage: dict[str, list[torch.Tensor]] = {k: [] for k in [*computed, *GACA_PARTS]}
    with train_pool(cfg) as pool:
        for it in iterations:
            batch = collect_rollouts(policy, pool, train_task_seeds(cfg, it), cfg.rollout,
                                     generator=iteration_generator(cfg.seed, it))
            outputs = {est: compute_advantages(batch.steps, est, cfg.advantage) for est in computed}
            gaca = outputs["gaca"]
            parts["invalid"].append(batch.invalid)
            parts["nll"].append(gaca.nll)
            parts["weight"].append(gaca.weight)
            parts["state_key"].append(torch.stack([torch.full_like(batch.steps.group_id, it), batch.steps.group_id,
                                                   batch.steps.anchor], 1))
            for est in computed:
                advantage[est].append(outputs[est].advantage)
            advantage["gaca_episode_part"].append((1.0 - gaca.weight) * gaca.episode)
            advantage["gaca_step_part"].append(gaca.weight * gaca.step_level)
            logger.info("iteration %d: %d step rows, %d invalid", it, batch.num_rows, int(batch.invalid.sum()))
    _, state = torch.unique(torch.cat(parts["state_key"]), dim=0, return_inverse=True)
    return CreditRows(invalid=torch.cat(parts["invalid"]), nll=torch.cat(parts["nll"]),
                      weight=torch.cat(parts["weight"]), state=state,
                      advantage={k: torch.cat(v) for k, v in advantage.items()})


def step_class(rows: CreditRows, mask: torch.Tensor, estimators: list[str]) -> StepClass:
    """The means of ``rows`` over the rows of ``mask``."""
    def mean(v: torch.Tensor) -> float:
        return float(v[mask].double().mean()) if mask.any() else math.nan

    return StepClass(int(mask.sum()), mean(rows.nll), mean(rows.weight),
                     {est: mean(rows.advantage[est]) for est in estimators})


def coupling(rows: CreditRows, estimators: list[str], convex: bool) -> Coupling:
    """Every estimator's coupling to the NLL; GACA's parts under the convex mixture."""
    within = {est: within_state_correlation(rows.nll, rows.advantage[est], rows.state) for est in estimators}
    parts = None
    if convex:
        parts = {p: within_state_correlation(rows.nll, rows.advantage[p], rows.state, norm_of=rows.advantage["gaca"])[0]
                 for p in GACA_PARTS}
    steps = within[estimators[0]][1]
    return Coupling(steps, {est: rho for est, (rho, _) in within.items()}, parts,
                    {est: correlation(rows.nll, rows.advantage[est]) for est in estimators})


def validity_split(rows: CreditRows, estimators: list[str]) -> ValiditySplit:
    """The two step classes and each estimator's gap between them."""
    invalid, valid = step_class(rows, rows.invalid, estimators), step_class(rows, ~rows.invalid, estimators)
    gap = {}
    for est in estimators:
        std = float(rows.advantage[est].double().std()) if len(rows.invalid) > 1 else math.nan
        gap[est] = (invalid.advantage[est] - valid.advantage[est]) / std if std > 0 else math.nan
    return ValiditySplit(invalid, valid, gap)


def next_iterations(run_dir: str | Path, count: int = 4) -> list[int]:
    """The ``count`` iterations after the checkpoint's (those the run would play next)."""
    done = int(load_checkpoint(run_dir)["trainer"]["iteration"])
    return list(range(done, done + count))


def warm_start_policy(run_dir: str | Path) -> tuple[CausalLMPolicy, TrainConfig]:
    """The seed's warm start of a run, as the run's first iteration had it, and the run's config."""
    cfg = run_config(run_dir)
    if cfg.threads > 0:
        torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)  # as a fresh run seeds before its warm start
    with tempfile.TemporaryDirectory(prefix="gaca-credit-") as tmp:  # its tokenizer files go there
        return make_warm_start(cfg, Path(tmp))[0], cfg


def measure_credit(run_dir: str | Path, *, warm_start: bool = False, iterations: list[int] | None = None,
                   estimators: list[str] | None = None) -> tuple[CreditResult, CreditRows]:
    """``gaca lab credit``: the credit of each estimator on a run's rollouts (module docstring).

    Args:
      run_dir:    a ``gaca train`` run directory (read, never written).
      warm_start: draw from the seed's warm start (loaded from the run's warm-start cache, or
                  recomputed as the run computed it and stored there) instead of the run's checkpoint.
      iterations: whose task seeds and sampling streams to use (default: 0-3 from the warm start; the
                  4 after the checkpoint's from the checkpoint).
      estimators: registered estimators (default ``ESTIMATORS``).
    Returns:
      The result and the rows it summarizes.
    """
    estimators = list(estimators or ESTIMATORS)
    try:
        for est in estimators:
            REGISTERED.check(est, "--estimators")
    except UnknownNameError as e:
        raise DiagnosticError(str(e)) from e
    if iterations is not None and (not iterations or min(iterations) < 0):
        raise DiagnosticError(f"iterations must be >= 0, got {iterations}")
    if warm_start:
        policy, cfg = warm_start_policy(run_dir)
        iterations = iterations or [0, 1, 2, 3]
    else:
        iterations = iterations or next_iterations(run_dir)
        policy, cfg = load_checkpoint_policy(run_dir)
    rows = draw_rows(policy, cfg, iterations, estimators)
    mode = cfg.rollout.action_mode
    not_applicable = NO_INVALID_STEPS.get(mode, "")
    result = CreditResult(
        str(run_dir), warm_start, list(iterations), PolicyArtifact.of(policy).fingerprint, mode,
        NLL_MEANING.get((mode, cfg.rollout.step_nll), "the step NLL"),
        steps=len(rows.invalid), validity=None if not_applicable else validity_split(rows, estimators),
        not_applicable=not_applicable, coupling=coupling(rows, estimators, cfg.advantage.mixture == "convex"))
    return result, rows


def table(result: CreditResult) -> str:
    """The result as markdown: the two step classes (or why not) and the coupling."""
    ests = list(result.coupling.within_state)
    source = "warm start" if result.warm_start else "checkpoint"
    head = (f"{result.steps} steps drawn by policy {result.policy} ({source}, iterations "
            f"{', '.join(map(str, result.iterations))}; {result.action_mode} mode; ℓ is {result.nll})")
    lines = [head, "", "| rows | steps | ℓ | GACA w | " + " | ".join(f"A {e}" for e in ests) + " |",
             "|---|" + "---|" * (3 + len(ests))]
    split = result.validity
    if split is None:
        lines = [head, "", f"invalid against valid steps: not applicable in {result.action_mode} mode "
                 f"({result.not_applicable})"]
    else:
        for name, c in (("invalid", split.invalid), ("valid", split.valid)):
            lines.append(f"| {name} | {c.steps} | {c.nll:.4g} | {c.gaca_weight:.4g} | "
                         + " | ".join(f"{c.advantage[e]:.4g}" for e in ests) + " |")
        lines.append("| gap / std | | | | " + " | ".join(f"{split.gap_std[e]:.4g}" for e in ests) + " |")
    c = result.coupling
    lines += ["", f"coupling of A to ℓ ({c.steps} steps in states with a peer):",
              "| correlation | " + " | ".join(ests) + " |", "|---|" + "---|" * len(ests),
              "| within state | " + " | ".join(f"{c.within_state[e]:+.4f}" for e in ests) + " |",
              "| overall | " + " | ".join(f"{c.overall[e]:+.4f}" for e in ests) + " |"]
    if c.gaca_parts is not None:
        lines.append("GACA's within-state coupling by term: " + ", ".join(
            f"{p.removeprefix('gaca_').replace('_', ' ')} {v:+.4f}" for p, v in c.gaca_parts.items()))
    return "\n".join(lines)


def default_out(run_dir: str | Path, warm_start: bool) -> Path:
    """``RUN_DIR/lab-credit[-warm-start].json``."""
    return Path(run_dir) / ("lab-credit-warm-start.json" if warm_start else "lab-credit.json")


__all__ = ["ESTIMATORS", "GACA_PARTS", "NO_INVALID_STEPS", "Coupling", "CreditResult", "CreditRows", "StepClass",
           "ValiditySplit", "correlation", "coupling", "default_out", "draw_rows", "measure_credit", "next_iterations",
           "step_class", "table", "validity_split", "warm_start_policy", "within_state_correlation"]
