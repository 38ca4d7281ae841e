"""The step table: one row per (trajectory, step), the data model every layer shares."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

_ID_FIELDS = ("group_id", "traj_id", "step", "anchor")
#: Optional per-row float fields: None, or a finite float tensor [N].
_OPTIONAL_ROW_FIELDS = ("penalty", "entropy")


def _first_bad_row(bad: torch.Tensor) -> int:
    """Index of the first True row of a bool tensor reduced to rows."""
    if bad.dim() > 1:
        bad = bad.flatten(1).any(dim=1)
    return int(torch.nonzero(bad)[0, 0])


def _check_optional_row_field(name: str, value: object, n: int) -> None:
    """None, or a finite float tensor of shape [N]; else a ValueError naming the field (and row)."""
    if value is None:
        return
    if not isinstance(value, torch.Tensor) or not value.is_floating_point():
        raise ValueError(f"StepBatch.{name} must be a float tensor or None")
    if value.shape != (n,):
        raise ValueError(f"StepBatch.{name} must have shape [N] = ({n},), got {tuple(value.shape)}")
    bad = ~torch.isfinite(value)
    if bad.any():
        raise ValueError(f"StepBatch.{name} has a non-finite value at row {_first_bad_row(bad)}")


# Rows per chunk of the masked row sums: the [chunk, L] temporary then stays in cache, which is
# 2-3x faster than one [N, L] temporary at N = 1e6 and keeps the extra memory O(chunk·L).
_ROW_CHUNK = 16384


@torch.no_grad()
def _masked_row_sums(logprobs: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(Σ_k mask_ik·logp_ik, Σ_k mask_ik) per row, in chunks of rows.

    where() rather than a product, so NaN/inf on padding cannot leak into the sum. The sums
    accumulate in float32 or wider (a float16 sum of 8,192 log-probs overflows); float32 pairwise
    summation is accurate enough for a mean.
    """
    n = logprobs.shape[0]
    acc = torch.promote_types(logprobs.dtype, torch.float32)
    sums = torch.empty(n, dtype=acc, device=logprobs.device)
    counts = torch.empty(n, dtype=torch.int32, device=logprobs.device)
    for start in range(0, n, _ROW_CHUNK):
        rows = slice(start, start + _ROW_CHUNK)
        torch.sum(torch.where(mask[rows], logprobs[rows], 0.0), dim=1, dtype=acc, out=sums[rows])
        torch.sum(mask[rows], dim=1, dtype=torch.int32, out=counts[rows])
    return sums, counts


@dataclass(frozen=True)
class StepBatch:
    """A flat step table. Row order carries no meaning.

    Args:
      group_id: [N] int64, the episode group (N rollouts of the same task from one initial state).
      traj_id:  [N] int64, the trajectory; unique within its group (it may repeat across groups).
      step:     [N] int64 >= 0, orders the rows of one trajectory (0 = first step). Discounting
                counts rows, so steps need not be contiguous, but must be distinct in a trajectory.
      anchor:   [N] int64, key of the environment state the step started from (``hash_text`` of
                the observation); steps of one group with equal anchors form a GiGPO step group.
      reward:   [N] float, the step's environment reward r_t (sparse: success at the end).
      logprobs: [N, L] float, sampling-policy log-probs of the step's response tokens.
      mask:     [N, L] bool, True on the response tokens; every row needs at least one.
      anchor_text: optional N strings, the anchors' texts; needed only for GiGPO's similarity grouping.
      penalty:  optional [N] float, the step's invalid-action penalty (>= 0 in practice), kept apart
                from ``reward`` so that ``AdvantageOptions.conventions`` decides where it applies
                (gaca: subtracted from the step reward before any return; verl-agent: subtracted
                after discounting, from the row's own scores). None: no penalty.
      entropy:  optional [N] float, the policy's entropy at the step as the rollout measured it
                (generate mode: the mean per-token entropy of the sampling distribution along the
                response; choose mode: the entropy of π(·|s) over the admissible actions). Read by
                estimators that weight by the policy's uncertainty (``empg``); where it is None they
                fall back to the response's mean token NLL, a one-sample estimate of it
                (``AdvantageOptions.uncertainty``). Finite; >= 0 in exact arithmetic.
      count:    optional [N] int64 >= 1, how many rows of the trainer's batch hold this step: 1 plus
                the copies a trainer made of it to pad its batch (verl-agent's ``adjust_batch``).
                Under ``conventions='verl-agent'`` every statistic over step rows counts the row
                ``count`` times, as verl-agent's own code (which sees the copies as rows) does;
                gaca's conventions count each step once (a copy is padding, not another sample).
                Returns, episode returns and criticality always see each step once. None: 1.

    Derived at construction (one pass over the log-probs, which is also the finiteness check):
      logprob_sum: [N] float32 or wider, Σ_k mask_ik·logp_ik.   token_count: [N] int32, |mask_i|.

    Raises:
      ValueError naming the field (and the first bad row) for wrong types, dtypes, shapes,
      non-finite rewards or log-probs (on response tokens), negative steps or empty masks.
    """

    group_id: torch.Tensor
    traj_id: torch.Tensor
    step: torch.Tensor
    anchor: torch.Tensor
    reward: torch.Tensor
    logprobs: torch.Tensor
    mask: torch.Tensor
    anchor_text: Sequence[str] | None = None
    penalty: torch.Tensor | None = None
    entropy: torch.Tensor | None = None
    count: torch.Tensor | None = None
    # Σ_k mask·logp per row, computed once during validation (it is also the finiteness check).
    logprob_sum: torch.Tensor = field(init=False, repr=False, compare=False)
    token_count: torch.Tensor = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name in (*_ID_FIELDS, "reward", "logprobs", "mask"):
            value = getattr(self, name)
            if not isinstance(value, torch.Tensor):
                raise ValueError(f"StepBatch.{name} must be a torch.Tensor, got {type(value).__name__}")
        n = self.group_id.shape[0] if self.group_id.dim() == 1 else -1
        for name in _ID_FIELDS:
            value = getattr(self, name)
            if value.dtype != torch.int64:
                raise ValueError(f"StepBatch.{name} must be int64, got {value.dtype}")
            if value.dim() != 1 or value.shape[0] != n:
                raise ValueError(
                    f"StepBatch.{name} must have shape [N] with N = len(group_id) = {n}, got {tuple(value.shape)}"
                )
        if n == 0:
            raise ValueError("StepBatch is empty: group_id has no rows")
        if not self.reward.is_floating_point():
            raise ValueError(f"StepBatch.reward must be a float tensor, got {self.reward.dtype}")
        if self.reward.shape != (n,):
            raise ValueError(f"StepBatch.reward must have shape [N] = ({n},), got {tuple(self.reward.shape)}")
        if not self.logprobs.is_floating_point():
            raise ValueError(f"StepBatch.logprobs must be a float tensor, got {self.logprobs.dtype}")
        if self.logprobs.dim() != 2 or self.logprobs.shape[0] != n:
            raise ValueError(
                f"StepBatch.logprobs must have shape [N, L] with N = {n}, got {tuple(self.logprobs.shape)}"
            )
        if self.mask.dtype != torch.bool:
            raise ValueError(f"StepBatch.mask must be bool, got {self.mask.dtype}")
        if self.mask.shape != self.logprobs.shape:
            raise ValueError(
                f"StepBatch.mask must have the shape of logprobs {tuple(self.logprobs.shape)}, "
                f"got {tuple(self.mask.shape)}"
            )
        if self.anchor_text is not None and len(self.anchor_text) != n:
            raise ValueError(f"StepBatch.anchor_text must have N = {n} entries, got {len(self.anchor_text)}")
        for name in _OPTIONAL_ROW_FIELDS:
            _check_optional_row_field(name, getattr(self, name), n)
        if self.count is not None:
            if not isinstance(self.count, torch.Tensor) or self.count.dtype != torch.int64:
                raise ValueError("StepBatch.count must be an int64 tensor or None")
            if self.count.shape != (n,):
                raise ValueError(f"StepBatch.count must have shape [N] = ({n},), got {tuple(self.count.shape)}")
            bad = self.count < 1
            if bad.any():
                raise ValueError(f"StepBatch.count must be >= 1; row {_first_bad_row(bad)} has "
                                 f"{int(self.count[bad][0])}")
        bad = self.step < 0
        if bad.any():
            raise ValueError(f"StepBatch.step must be >= 0; row {_first_bad_row(bad)} has {int(self.step[bad][0])}")
        bad = ~torch.isfinite(self.reward)
        if bad.any():
            raise ValueError(f"StepBatch.reward has a non-finite value at row {_first_bad_row(bad)}")
        logprob_sum, token_count = _masked_row_sums(self.logprobs, self.mask)
        bad = token_count == 0
        if bad.any():
            raise ValueError(f"StepBatch.mask: row {_first_bad_row(bad)} has an empty response (no True token)")
        bad = ~torch.isfinite(logprob_sum)
        if bad.any():
            row = _first_bad_row(bad)
            raise ValueError(f"StepBatch.logprobs has a non-finite value on a response token at row {row}")
        object.__setattr__(self, "logprob_sum", logprob_sum)
        object.__setattr__(self, "token_count", token_count)

    def __len__(self) -> int:
        return int(self.group_id.shape[0])


__all__ = ["StepBatch"]
