"""How often does a step find a step-level peer, under each anchor kind (``rollout.anchor``)?

GiGPO's step level compares a step only with the steps of its episode group that start from the same
anchor state; a step without such a peer gets no step-level credit. Which texts count as "the same
state" is the anchor: the observation alone, the observation with the admissible actions, or the
environment's own state key (WebShop reports one: page, query, result page, item, selected options;
ALFWorld does not). This plays one rollout of a trained run's policy on its training games, sampled as
training samples, and recomputes the anchors of the same steps under every kind: per kind, the share
of rows with a peer (GiGPO's ``has_peer``), the number of step groups (distinct (episode group,
anchor) pairs) and the mean rows per step group.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from gaca.advantage import compute_advantages, hash_text
from gaca.envs.episodes import Step
from gaca.lab.diagnostics.common import DiagnosticError, train_pool
from gaca.rollout import RolloutBatch, anchor_text, collect_rollouts
from gaca.train.run import load_checkpoint_policy

logger = logging.getLogger(__name__)

#: The anchor kinds of ``RolloutConfig.anchor``.
KINDS = ("observation", "observation+actions", "state")


@dataclass(frozen=True)
class AnchorPeers:
    """The step groups one anchor kind makes of the rollout's rows."""

    has_peer: float
    """Share of rows whose step group has another row."""
    step_groups: int
    rows_per_step_group: float


@dataclass
class AnchorResult:
    """``gaca lab anchors``."""

    run_dir: str
    env: str
    groups: int
    """Episode groups played (distinct training games)."""
    group_size: int
    rows: int
    rollout_s: float
    success: float
    """Training success of the rollout's episodes."""
    invalid_ratio: float
    anchors: dict[str, AnchorPeers]
    """Anchor kind -> its step groups."""
    unavailable: dict[str, str] = field(default_factory=dict)
    """Anchor kind -> why it could not be measured (``state`` on an environment without state keys)."""
    command: str = ""


def row_steps(batch: RolloutBatch) -> list[Step]:
    """The recorded step of each row of the batch's table, in row order."""
    by_key = {(s.turn.episode, s.turn.step): s for e in batch.episodes if e.error is None for s in e.steps}
    table = batch.steps
    return [by_key[(int(k), int(t))] for k, t in zip(table.traj_id.tolist(), table.step.tolist(), strict=True)]


def peer_stats(batch: RolloutBatch, texts: list[str]) -> AnchorPeers:
    """GiGPO's step groups of ``batch`` when the rows' anchors are ``texts``."""
    table = batch.steps
    anchors = torch.tensor([hash_text(a) for a in texts], dtype=torch.int64)
    out = compute_advantages(dataclasses.replace(table, anchor=anchors, anchor_text=texts), "gigpo")
    groups = len(set(zip(table.group_id.tolist(), anchors.tolist(), strict=True)))
    return AnchorPeers(float(out.has_peer.double().mean()), groups, table.group_id.numel() / groups)


def anchor_peers(run_dir: str | Path, *, groups: int = 16, seed: int = 0) -> AnchorResult:
    """Play ``groups`` training games (drawn with ``seed``, which also seeds the sampling) with the run's
    checkpointed policy and measure every anchor kind's step groups on the same rows."""
    if groups < 1:
        raise DiagnosticError(f"--groups must be >= 1, got {groups}")
    policy, cfg = load_checkpoint_policy(run_dir)
    gen = torch.Generator().manual_seed(seed)
    seeds = torch.randperm(cfg.env.num_train_games, generator=gen)[:groups].tolist()
    t0 = time.perf_counter()
    with train_pool(cfg, len(seeds)) as pool:
        batch = collect_rollouts(policy, pool, seeds, cfg.rollout, generator=gen)
    seconds = time.perf_counter() - t0
    steps = row_steps(batch)
    anchors, unavailable = {}, {}
    for kind in KINDS:
        try:
            texts = [anchor_text(s.turn.observation, s.turn.admissible_actions, kind, s.turn.info.get("state_key"))
                     for s in steps]
        except ValueError as e:  # the environment does not give what this kind needs (a state key)
            unavailable[kind] = str(e)
            continue
        anchors[kind] = peer_stats(batch, texts)
    played = [e for e in batch.episodes if e.error is None]
    logger.info("%s: %d step rows in %d groups of %d (%.0f s)", cfg.env.name, batch.num_rows, len(seeds),
                cfg.rollout.group_size, seconds)
    return AnchorResult(str(run_dir), cfg.env.name, len(seeds), cfg.rollout.group_size, batch.num_rows, seconds,
                        sum(e.won for e in played) / len(played), float(batch.invalid.double().mean()), anchors,
                        unavailable)


def table(result: AnchorResult) -> str:
    """The result as markdown, one row per anchor kind."""
    lines = [f"{result.env}: {result.rows} step rows in {result.groups} groups of {result.group_size} (success "
             f"{result.success:.3f}, invalid {result.invalid_ratio:.2f}; {result.rollout_s:.0f} s)", "",
             "| anchor | rows with a peer | step groups | rows per step group |", "|---|---|---|---|"]
    for kind in KINDS:
        if kind in result.anchors:
            a = result.anchors[kind]
            lines.append(f"| {kind} | {a.has_peer:.3f} | {a.step_groups} | {a.rows_per_step_group:.2f} |")
        else:
            lines.append(f"| {kind} | (not measured) | | |")
    lines += [f"{kind}: {why}" for kind, why in result.unavailable.items()]
    return "\n".join(lines)


def default_out(run_dir: str | Path) -> Path:
    """``RUN_DIR/lab-anchors.json``."""
    return Path(run_dir) / "lab-anchors.json"


__all__ = ["KINDS", "AnchorPeers", "AnchorResult", "anchor_peers", "default_out", "peer_stats", "row_steps", "table"]
