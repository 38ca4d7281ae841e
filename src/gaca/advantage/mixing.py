"""From criticality to a per-step mixing weight, and the mixture of episode and step credit."""

from __future__ import annotations

import math
from typing import Literal

import torch

WeightMap = Literal["clip", "sigmoid"]
Mixture = Literal["convex", "additive"]
NoPeer = Literal["episode", "zero"]


def mixing_weight(
    criticality: torch.Tensor,
    has_peer: torch.Tensor,
    *,
    w0: float = 0.5,
    kappa: float = 0.25,
    w_min: float = 0.0,
    w_max: float = 1.0,
    weight_map: WeightMap = "clip",
    no_peer: NoPeer = "episode",
) -> torch.Tensor:
    """Per-step weight of the step-level signal.

    clip:    w_i = clip(w0 + κ·c_i, w_min, w_max)
    sigmoid: w_i = clip(σ(logit(w0) + κ·c_i), w_min, w_max)
    no_peer = "episode": w_i = 0 where step i has no step-group peer, so it keeps its full episode
    credit rather than being shrunk towards a step-level signal that does not exist;
    "zero": w_i as above (its A^S is 0, so the convex mixture shrinks it by 1 − w_i).
    κ = 0 gives the fixed weight w0 (``fixed_mix``). (Reconstruction of arXiv:2609.12424: "a
    per-step weight that grows with that score".)

    Args:
      criticality: [N] float c_i.
      has_peer:    [N] bool.
    Returns:
      [N] float, dtype of ``criticality``.
    """
    if weight_map == "clip":
        weight = w0 + kappa * criticality
    elif weight_map == "sigmoid":
        if not 0.0 < w0 < 1.0:
            raise ValueError(f"weight_map='sigmoid' needs 0 < w0 < 1, got w0={w0}")
        weight = torch.sigmoid(math.log(w0 / (1.0 - w0)) + kappa * criticality)
    else:
        raise ValueError(f"weight_map must be 'clip' or 'sigmoid', got {weight_map!r}")
    weight = weight.clamp(min=w_min, max=w_max)
    if no_peer == "episode":
        return torch.where(has_peer, weight, 0.0)
    if no_peer == "zero":
        return weight
    raise ValueError(f"no_peer must be 'episode' or 'zero', got {no_peer!r}")


def mix_advantages(
    episode: torch.Tensor,
    step_level: torch.Tensor,
    weight: torch.Tensor,
    *,
    mixture: Mixture = "convex",
    omega: float = 1.0,
    w0: float = 0.5,
) -> torch.Tensor:
    """Final per-step advantage from the two granularities.

    convex:   A_i = (1 − w_i)·A^E_i + w_i·A^S_i
    additive: A_i = A^E_i + ω·(w_i / w0)·A^S_i   (= GiGPO's A^E + ω·A^S when w_i ≡ w0)

    Args:
      episode, step_level, weight: [N] float.
    Returns:
      [N] float.
    """
    if mixture == "convex":
        return (1.0 - weight) * episode + weight * step_level
    if mixture == "additive":
        if w0 <= 0.0:
            raise ValueError(f"mixture='additive' divides by w0, which must be > 0, got {w0}")
        return episode + omega * (weight / w0) * step_level
    raise ValueError(f"mixture must be 'convex' or 'additive', got {mixture!r}")


__all__ = ["Mixture", "NoPeer", "WeightMap", "mix_advantages", "mixing_weight"]
