"""One iteration's metrics, assembled in one place (namespaced keys, one line each in docs/metrics.md)."""

from __future__ import annotations

import torch

from gaca.advantage import AdvantageOutput
from gaca.advantage.diagnostics import advantage_diagnostics, advantage_histograms
from gaca.rollout.collect import RolloutBatch
from gaca.train.evaluate import EvalStats, summarize_episodes
from gaca.train.timing import Stopwatch
from gaca.train.update import UpdateStats


def rollout_metrics(batch: RolloutBatch) -> dict[str, float]:
    """env/… (training episodes) and perf/… (sampling) metrics of one rollout."""
    s = summarize_episodes(batch.episodes)
    played = [e for e in batch.episodes if e.error is None]
    return {
        "env/success": s.success,
        "env/episode_length": s.episode_length,
        "env/invalid_ratio": s.invalid_ratio,
        "env/return": sum(e.env_return for e in played) / len(played),
        "env/truncated": sum(e.truncated for e in played) / len(played),
        "env/episodes": float(len(played)),
        "env/crashed": float(s.crashed),
        "env/step_rows": float(batch.num_rows),
        "env/response_length": float(batch.rows.mask.sum(1).double().mean()),
        "perf/generated_tokens": float(batch.generated_tokens),
        "perf/forward_passes_rollout": float(batch.forward_passes),
        "perf/rollout_tokens_per_s": batch.generated_tokens / max(batch.generate_s, 1e-9),
        "time/generate_s": batch.generate_s,
        "time/env_s": batch.env_s,
    }


def iteration_metrics(batch: RolloutBatch, adv: AdvantageOutput, update: UpdateStats, clock: Stopwatch,
                      evaluation: EvalStats | None = None) -> tuple[dict[str, float], dict[str, torch.Tensor]]:
    """Every scalar metric of one iteration and its histograms (see docs/metrics.md)."""
    adv_scalars, hists = advantage_diagnostics(adv), advantage_histograms(adv)
    t = clock.seconds
    core = t["rollout"] + t["advantage"] + t["update"]
    metrics = {
        **rollout_metrics(batch), **adv_scalars, **update.metrics,
        "perf/forward_passes": float(batch.forward_passes + update.forward_passes),
        "perf/forward_passes_update": float(update.forward_passes),
        "time/rollout_s": t["rollout"],
        "time/advantage_s": t["advantage"],
        "time/update_s": t["update"],
        "perf/advantage_share": t["advantage"] / max(core, 1e-9),
    }
    if evaluation is not None:
        metrics.update(evaluation.metrics())
        metrics["time/eval_s"] = evaluation.seconds
    metrics["time/iteration_s"] = clock.elapsed()
    return metrics, hists


__all__ = ["iteration_metrics", "rollout_metrics"]
