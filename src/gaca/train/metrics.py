"""Per-iteration metrics from the rollout and the advantage diagnostics (namespaced keys, docs/metrics.md)."""

from __future__ import annotations

from typing import Any

import torch

from gaca.rollout.collect import RolloutBatch
from gaca.train.evaluate import summarize_trajectories


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
    s = summarize_trajectories(batch.trajectories)
    out = {
        "env/success": s.success,
        "env/episode_length": s.episode_length,
        "env/invalid_ratio": s.invalid_ratio,
        "env/return": sum(t.env_return for t in batch.trajectories) / len(batch.trajectories),
        "env/truncated": sum(t.truncated for t in batch.trajectories) / len(batch.trajectories),
        "env/episodes": float(len(batch.trajectories)),
        "env/step_rows": float(batch.num_rows),
        "env/response_length": float(batch.response_mask.sum(1).double().mean()),
        "perf/generated_tokens": float(batch.generated_tokens),
        "perf/forward_passes_rollout": float(batch.forward_passes),
        "perf/rollout_tokens_per_s": batch.generated_tokens / max(batch.generate_s, 1e-9),
        "time/generate_s": batch.generate_s,
        "time/env_s": batch.env_s,
    }
    return out


def step_nll(batch: RolloutBatch) -> torch.Tensor:
    """[N] mean per-token NLL of each step's sampled response, ℓ_i = −mean_k logp_{i,k}."""
    m = batch.response_mask
    return -(torch.where(m, batch.logprobs, 0.0).sum(1) / m.sum(1).clamp_min(1))


def advantage_metrics(adv: Any, batch: RolloutBatch) -> tuple[dict[str, float], dict[str, torch.Tensor]]:
    """adv/… scalars and the histograms (weight, criticality, advantage, NLL) of one AdvantageOutput."""
    out: dict[str, float] = {}
    out.update(_stats("adv/advantage", adv.advantage))
    out.update(_stats("adv/weight", adv.weight))
    out.update(_stats("adv/criticality", adv.criticality))
    out["adv/episode_std"] = float(adv.episode.double().std()) if adv.episode.numel() > 1 else 0.0
    out["adv/step_level_std"] = float(adv.step_level.double().std()) if adv.step_level.numel() > 1 else 0.0
    out["adv/has_peer"] = float(adv.has_peer.double().mean())
    out["adv/abs_mean"] = float(adv.advantage.double().abs().mean())
    nll = step_nll(batch)
    out.update(_stats("adv/nll", nll))
    hists = {
        "adv/weight": adv.weight.detach().float(),
        "adv/criticality": adv.criticality.detach().float(),
        "adv/advantage": adv.advantage.detach().float(),
        "adv/nll": nll.float(),
    }
    return out, hists


__all__ = ["advantage_metrics", "rollout_metrics", "step_nll"]
