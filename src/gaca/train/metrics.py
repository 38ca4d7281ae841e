"""One iteration's metrics, assembled in one place (namespaced keys, one line each in docs/metrics.md)."""

from __future__ import annotations

import torch

from gaca.advantage import AdvantageOutput
from gaca.rollout.collect import RolloutBatch
from gaca.train.evaluate import EvalStats, summarize_episodes
from gaca.train.timing import Stopwatch
from gaca.train.update import UpdateStats


def _stats(prefix: str, x: torch.Tensor) -> dict[str, float]:
    x = x.detach().double()
    return {
        f"{prefix}_mean": float(x.mean()),
        f"{prefix}_std": float(x.std()) if x.numel() > 1 else 0.0,
        f"{prefix}_min": float(x.min()),
        f"{prefix}_max": float(x.max()),
    }


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


def advantage_metrics(adv: AdvantageOutput) -> tuple[dict[str, float], dict[str, torch.Tensor]]:
    """adv/… scalars and the histograms (weight, criticality, advantage, NLL) of one AdvantageOutput."""
    out: dict[str, float] = {}
    out.update(_stats("adv/advantage", adv.advantage))
    out.update(_stats("adv/weight", adv.weight))
    out.update(_stats("adv/criticality", adv.criticality))
    out["adv/episode_std"] = float(adv.episode.double().std()) if adv.episode.numel() > 1 else 0.0
    out["adv/step_level_std"] = float(adv.step_level.double().std()) if adv.step_level.numel() > 1 else 0.0
    out["adv/has_peer"] = float(adv.has_peer.double().mean())
    out["adv/abs_mean"] = float(adv.advantage.double().abs().mean())
    nll = adv.nll  # the step table's NLL: generate, the mean token NLL; choose, −log π(a|s) by default
    out.update(_stats("adv/nll", nll))
    hists = {
        "adv/weight": adv.weight.detach().float(),
        "adv/criticality": adv.criticality.detach().float(),
        "adv/advantage": adv.advantage.detach().float(),
        "adv/nll": nll.float(),
    }
    return out, hists


def iteration_metrics(batch: RolloutBatch, adv: AdvantageOutput, update: UpdateStats, clock: Stopwatch,
                      evaluation: EvalStats | None = None) -> tuple[dict[str, float], dict[str, torch.Tensor]]:
    """Every scalar metric of one iteration and its histograms (see docs/metrics.md)."""
    adv_scalars, hists = advantage_metrics(adv)
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


__all__ = ["advantage_metrics", "iteration_metrics", "rollout_metrics"]
