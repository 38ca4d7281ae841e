"""The policy's uncertainty at a step, for the estimators that weight credit by it.

Two measures of the same thing, both per step row:
- the entropy the rollout recorded (``StepBatch.entropy``): generate mode, the mean per-token
  entropy of the sampling distribution along the response; choose mode, H(π(·|s)) over the
  admissible actions;
- the sampled response's mean token NLL ℓ_i (``criticality.response_nll``), which needs nothing
  beyond the log-probs every batch carries: under the sampling policy its expectation is the
  entropy it stands for (choose mode, L = 1: E[−log π(a|s)] = H(π(·|s))), so it is a one-sample
  estimate of it. GACA's criticality reads ℓ_i.
"""

from __future__ import annotations

from typing import Literal

import torch

from gaca.advantage.batch import StepBatch
from gaca.advantage.criticality import response_nll

Uncertainty = Literal["auto", "entropy", "nll"]


def step_uncertainty(batch: StepBatch, source: Uncertainty = "auto") -> torch.Tensor:
    """Per-step uncertainty U_i from ``source``.

    entropy: U_i = ``batch.entropy``_i (an error when the batch has none)
    nll:     U_i = ℓ_i = −(1/|mask_i|) Σ_k mask_ik·logp_ik
    auto:    entropy when the batch carries it, else nll

    Args:
      batch:  the step table.
      source: which measure.
    Returns:
      [N] float64.
    Raises:
      ValueError for ``source='entropy'`` on a batch without ``entropy``.
    """
    if source not in ("auto", "entropy", "nll"):
        raise ValueError(f"uncertainty must be 'auto', 'entropy' or 'nll', got {source!r}")
    if source == "entropy" and batch.entropy is None:
        raise ValueError("option uncertainty='entropy' needs StepBatch.entropy (the rollout recorded none); "
                         "use 'nll' or 'auto' to read the sampled response's mean token NLL instead")
    if source != "nll" and batch.entropy is not None:
        return batch.entropy.to(torch.float64)
    return response_nll(batch.logprob_sum, batch.token_count)


__all__ = ["Uncertainty", "step_uncertainty"]
