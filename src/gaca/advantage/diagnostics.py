"""What an ``AdvantageOutput`` is logged as: one set of names for the trainer, the lab and verl.

    scalars = advantage_diagnostics(out)    # {"adv/advantage_mean": ..., "adv/has_peer": ..., ...}
    hists = advantage_histograms(out)       # {"adv/weight": tensor, ...}

Each key is documented once, in docs/metrics.md (section ``adv/``).
"""

from __future__ import annotations

import torch

from gaca.advantage.estimators import AdvantageOutput


def _stats(prefix: str, x: torch.Tensor) -> dict[str, float]:
    x = x.detach().double()
    if x.numel() == 0:
        return {f"{prefix}_{k}": float("nan") for k in ("mean", "std", "min", "max")}
    return {
        f"{prefix}_mean": float(x.mean()),
        f"{prefix}_std": float(x.std()) if x.numel() > 1 else 0.0,
        f"{prefix}_min": float(x.min()),
        f"{prefix}_max": float(x.max()),
    }


def _std(x: torch.Tensor) -> float:
    return float(x.detach().double().std()) if x.numel() > 1 else 0.0


def advantage_diagnostics(out: AdvantageOutput) -> dict[str, float]:
    """The ``adv/…`` scalars of one estimate: the advantage, weight, criticality and NLL (mean, std,
    min, max over step rows), the spread of A^E and A^S, the share of rows with a step-level peer, the
    mean |A| and the number of rows."""
    scalars = {**_stats("adv/advantage", out.advantage), **_stats("adv/weight", out.weight),
               **_stats("adv/criticality", out.criticality), **_stats("adv/nll", out.nll)}
    scalars.update({
        "adv/episode_std": _std(out.episode),
        "adv/step_level_std": _std(out.step_level),
        "adv/has_peer": float(out.has_peer.double().mean()) if out.has_peer.numel() else float("nan"),
        "adv/abs_mean": float(out.advantage.detach().double().abs().mean()) if out.advantage.numel() else float("nan"),
        "adv/steps": float(out.advantage.numel()),
    })
    return scalars


def advantage_histograms(out: AdvantageOutput) -> dict[str, torch.Tensor]:
    """The per-row values worth a histogram: weight, criticality, advantage and NLL (float32 [N] each)."""
    return {"adv/weight": out.weight.detach().float(), "adv/criticality": out.criticality.detach().float(),
            "adv/advantage": out.advantage.detach().float(), "adv/nll": out.nll.detach().float()}


__all__ = ["advantage_diagnostics", "advantage_histograms"]
