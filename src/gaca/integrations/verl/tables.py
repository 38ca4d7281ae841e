"""verl ``DataProto`` batches -> the step table of ``gaca.advantage``, and back to tokens.

Two batch layouts are understood:

- **step rows** (verl-agent): row b is one environment step of one trajectory. Non-tensor ``uid``
  (episode group), ``traj_uid`` (trajectory), ``anchor_obs`` (the observation the step started
  from); the step's env reward r_t under ``VerlSettings.step_reward_key``; its response tokens are
  ``response_mask[b]``. One step-table row per batch row.
- **trajectory rows** (verl's multi-turn agent loop): row b is a whole trajectory whose response
  holds alternating assistant turns (``response_mask`` = 1) and environment observations
  (``response_mask`` = 0). Turn k of row b is the k-th maximal run of ones; its step index is k;
  its anchor is ``hash_tokens`` of the observation tokens right before it (for k = 0: the
  prompt's tokens and any response tokens before the first span); its reward is the sum of
  ``token_level_rewards`` from its first token up to the next turn's first token (the last turn
  takes the rest of the row), so Σ_k r_k is the row's total reward. One step-table row per turn.

:class:`StepTable` keeps, for each response token of the batch, the step-table row it belongs to,
so that per-step advantages can be broadcast to exactly those tokens (and to no observation token).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from gaca.advantage import StepBatch, hash_text, hash_tokens
from gaca.integrations.verl.config import VerlSettings

logger = logging.getLogger(__name__)

_warned_row_order = False


@dataclass(frozen=True)
class StepTable:
    """A step table built from a verl batch, with the map back to the batch's tokens.

    Attributes:
      batch:      the ``StepBatch`` (N step rows).
      token_step: [B, L] int64, the step row of each response token of the verl batch; -1 on
                  tokens that belong to no step (padding, environment observations).
      layout:     'step' or 'trajectory', the layout it was read from.
    """

    batch: StepBatch
    token_step: torch.Tensor
    layout: str

    def to_tokens(self, values: torch.Tensor) -> torch.Tensor:
        """Broadcast per-step ``values`` [N] to the verl batch's tokens: [B, L], 0 off-step."""
        if values.shape != (len(self.batch),):
            raise ValueError(f"expected [N] = ({len(self.batch)},) values, got {tuple(values.shape)}")
        on_step = self.token_step >= 0
        gathered = values[self.token_step.clamp(min=0)]
        return torch.where(on_step, gathered, torch.zeros((), dtype=values.dtype))


def dense_keys(values: Sequence[Any] | np.ndarray) -> torch.Tensor:
    """[B] int64 dense ids of arbitrary hashable keys (str uuids, ints), in first-seen order."""
    ids: dict[Any, int] = {}
    out = np.empty(len(values), dtype=np.int64)
    for i, value in enumerate(values):
        key = value.item() if isinstance(value, np.generic) else value
        out[i] = ids.setdefault(key, len(ids))
    return torch.from_numpy(out)


def anchor_key(obs: Any) -> int:
    """Stable int64 anchor of one observation: text via ``hash_text``, token ids via
    ``hash_tokens``, other arrays (e.g. images) via their dtype, shape and bytes."""
    if isinstance(obs, str):
        return hash_text(obs)
    if isinstance(obs, torch.Tensor):
        obs = obs.detach().cpu().numpy()
    if isinstance(obs, list | tuple):
        obs = np.asarray(obs)
    if isinstance(obs, np.ndarray):
        if obs.dtype.kind in "iub":
            return hash_tokens(obs.astype(np.int64))
        if obs.dtype.kind in "OUS":
            return hash_text("\x1f".join(str(x) for x in obs.ravel()))
        return hash_text(f"array:{obs.dtype.str}:{obs.shape}:") ^ hash_tokens(
            np.frombuffer(np.ascontiguousarray(obs).tobytes(), dtype=np.uint8).astype(np.int64)
        )
    if obs is None:
        raise ValueError("anchor_obs has a None entry; every step needs the observation it started from")
    if isinstance(obs, bytes):
        return hash_tokens(np.frombuffer(obs, dtype=np.uint8).astype(np.int64))
    return hash_text(f"{type(obs).__name__}:{obs!r}")


def _lookup(data: Any, key: str) -> Any | None:
    """``data.non_tensor_batch[key]`` or ``data.batch[key]``, or None."""
    if key in data.non_tensor_batch:
        return data.non_tensor_batch[key]
    if data.batch is not None and key in data.batch.keys():
        return data.batch[key]
    return None


def _require(data: Any, key: str, what: str) -> Any:
    value = _lookup(data, key)
    if value is None:
        raise KeyError(f"GACA needs {what} under key {key!r} in the verl batch; it has tensor keys "
                       f"{sorted(data.batch.keys())} and non-tensor keys {sorted(data.non_tensor_batch)}. "
                       "(verl's v1 trainer passes only uid, masks, rewards and log-probs to the advantage: "
                       "run with trainer.use_v1=False; see docs/verl.md)")
    return value


def _as_vector(value: Any, dtype: torch.dtype, name: str, size: int) -> torch.Tensor:
    tensor = value if isinstance(value, torch.Tensor) else torch.as_tensor(np.asarray(value, dtype=np.float64))
    tensor = tensor.reshape(-1).to(dtype)
    if tensor.shape[0] != size:
        raise ValueError(f"{name} must have one value per batch row ({size}), got {tensor.shape[0]}")
    return tensor


def logprob_tensor(data: Any, settings: VerlSettings) -> torch.Tensor:
    """The sampling policy's per-token log-probs [B, L] by ``settings.logprobs``."""
    if settings.logprobs == "auto":
        for key in ("rollout_log_probs", "old_log_probs"):
            if key in data.batch.keys():
                return data.batch[key]
        raise KeyError("GACA needs the rollout's log-probs: the batch has neither 'rollout_log_probs' "
                       "(set actor_rollout_ref.rollout.calculate_log_probs=True) nor 'old_log_probs'")
    return _require(data, settings.logprobs, "per-token log-probs")


def _row_order_steps(traj: torch.Tensor) -> torch.Tensor:
    """Step index of each row = its rank among its trajectory's rows in batch order."""
    order = torch.sort(traj, stable=True).indices
    sorted_traj = traj[order]
    first = torch.ones_like(sorted_traj, dtype=torch.bool)
    first[1:] = sorted_traj[1:] != sorted_traj[:-1]
    position = torch.arange(len(traj))
    segment_start = torch.cummax(torch.where(first, position, 0), dim=0).values
    return torch.empty_like(traj).index_copy_(0, order, position - segment_start)


def step_rows_table(data: Any, settings: VerlSettings, *, need_text: bool = False) -> StepTable:
    """Step table of a batch with one row per environment step (verl-agent layout).

    Args:
      data:      verl ``DataProto`` with tensor ``response_mask`` [B, L], ``token_level_rewards``
                 [B, L], log-probs [B, L]; non-tensor ``uid``, ``traj_uid``, ``anchor_obs``.
      settings:  where to find the step reward, the step index and the log-probs.
      need_text: also fill ``StepBatch.anchor_text`` (similarity grouping; needs text anchors).
    """
    global _warned_row_order
    mask = data.batch["response_mask"].bool()
    size = mask.shape[0]
    group = dense_keys(_require(data, "uid", "the episode-group id"))
    traj = dense_keys(_require(data, "traj_uid", "the trajectory id"))
    anchor_obs = _require(data, "anchor_obs", "the step's anchor observation")
    anchor = torch.tensor([anchor_key(obs) for obs in anchor_obs], dtype=torch.int64)
    anchor_text = None
    if need_text:
        if not all(isinstance(obs, str) for obs in anchor_obs):
            raise ValueError("algorithm.gaca.similarity needs text anchor_obs (str) on every row")
        anchor_text = [str(obs) for obs in anchor_obs]
    step_value = _lookup(data, settings.step_key)
    if step_value is None:
        if not _warned_row_order:
            logger.warning("verl batch has no %r key: taking each trajectory's rows to be in step order "
                           "(disable trainer.balance_batch or record the step index)", settings.step_key)
            _warned_row_order = True
        step = _row_order_steps(traj)
    else:
        step = _as_vector(step_value, torch.int64, settings.step_key, size)
    reward_value = _lookup(data, settings.step_reward_key)
    token_rewards = data.batch["token_level_rewards"]
    if reward_value is None:
        reward = (token_rewards * mask).sum(dim=-1).to(torch.float32)
    else:
        reward = _as_vector(reward_value, torch.float32, settings.step_reward_key, size)
    logprobs = logprob_tensor(data, settings)
    batch = StepBatch(
        group_id=group, traj_id=traj, step=step, anchor=anchor, reward=reward,
        logprobs=logprobs.float(), mask=mask, anchor_text=anchor_text,
    )
    token_step = torch.where(mask, torch.arange(size).unsqueeze(1), -1)
    return StepTable(batch=batch, token_step=token_step, layout="step")


def turn_spans(mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The assistant-turn spans of each row of a response mask.

    Args:
      mask: [B, L] bool, True on tokens the model generated.
    Returns:
      start:     [B, L] bool, True on the first token of each span (maximal run of True).
      started:   [B, L] int64, number of spans started at or before each position.
      num_turns: [B] int64, spans per row.
    """
    previous = torch.zeros_like(mask)
    previous[:, 1:] = mask[:, :-1]
    start = mask & ~previous
    started = torch.cumsum(start.to(torch.int64), dim=1)
    return start, started, started[:, -1].clone()


def trajectory_rows_table(data: Any, settings: VerlSettings) -> StepTable:
    """Step table of a batch with one row per multi-turn trajectory (verl agent-loop layout).

    Args:
      data: verl ``DataProto`` with tensor ``responses`` [B, L] (token ids), ``response_mask``
            [B, L], ``token_level_rewards`` [B, L], log-probs [B, L]; optional ``prompts`` [B, P]
            and ``attention_mask`` [B, P + L] (padding is left out of the anchors); non-tensor
            ``uid``.
      settings: where to find the log-probs.
    """
    mask = data.batch["response_mask"].bool()
    size = mask.shape[0]
    responses = _require(data, "responses", "the response token ids")
    start, started, num_turns = turn_spans(mask)
    if bool((num_turns == 0).any()):
        row = int(torch.nonzero(num_turns == 0)[0, 0])
        raise ValueError(f"verl batch row {row} has no assistant token (empty response_mask)")
    offset = torch.cumsum(num_turns, 0) - num_turns  # first step-table row of each batch row
    num_steps = int(num_turns.sum())
    step_row = torch.repeat_interleave(torch.arange(size), num_turns)  # [N] batch row of each step
    step = torch.arange(num_steps) - offset[step_row]

    # Turn of every position: span k and the observation after it belong to turn k (positions
    # before the first span to turn 0), so rewards anywhere in the row are kept.
    region = offset.unsqueeze(1) + (started - 1).clamp(min=0)
    token_rewards = data.batch["token_level_rewards"].to(torch.float64)
    reward = torch.zeros(num_steps, dtype=torch.float64).index_add_(0, region.reshape(-1), token_rewards.reshape(-1))
    token_step = torch.where(mask, region, -1)

    # Pack each turn's log-probs into its own row, at its position within the span. Spans in
    # row-major order are the step rows in order (row b's turns start at offset[b]).
    flat = torch.nonzero(mask.reshape(-1)).squeeze(1)  # flat positions of all response tokens
    step_of_token = region.reshape(-1)[flat]
    span_start = torch.nonzero(start.reshape(-1)).squeeze(1)  # [N] flat position of each span's start
    within = flat - span_start[step_of_token]
    width = int(within.max()) + 1
    logprobs = logprob_tensor(data, settings).reshape(-1)[flat].float()
    slot = step_of_token * width + within
    packed = torch.zeros(num_steps * width, dtype=torch.float32).index_copy_(0, slot, logprobs)
    packed_mask = torch.zeros(num_steps * width, dtype=torch.bool).index_fill_(0, slot, True)
    packed, packed_mask = packed.view(num_steps, width), packed_mask.view(num_steps, width)

    anchor = _turn_anchors(data, responses, mask, started, num_turns)
    group = dense_keys(_require(data, "uid", "the episode-group id"))
    batch = StepBatch(
        group_id=group[step_row], traj_id=step_row.clone(), step=step, anchor=anchor,
        reward=reward.to(torch.float32), logprobs=packed, mask=packed_mask,
    )
    return StepTable(batch=batch, token_step=token_step, layout="trajectory")


def _turn_anchors(
    data: Any, responses: torch.Tensor, mask: torch.Tensor, started: torch.Tensor, num_turns: torch.Tensor
) -> torch.Tensor:
    """[N] anchors: ``hash_tokens`` of the observation tokens right before each turn."""
    size, length = mask.shape
    attention = data.batch["attention_mask"].bool() if "attention_mask" in data.batch.keys() else None
    response_valid = attention[:, -length:] if attention is not None else torch.ones_like(mask)
    prompts = data.batch["prompts"] if "prompts" in data.batch.keys() else None
    observation = ~mask & response_valid
    anchors: list[int] = []
    tokens_np = responses.cpu().numpy()
    started_np = started.cpu().numpy()
    observation_np = observation.cpu().numpy()
    for b in range(size):
        turns = int(num_turns[b])
        obs_positions = np.nonzero(observation_np[b])[0]
        # An observation token with c spans started before it precedes turn c.
        turn_of = started_np[b, obs_positions]
        keep = turn_of < turns
        obs_positions, turn_of = obs_positions[keep], turn_of[keep]
        bounds = np.searchsorted(turn_of, np.arange(turns + 1))
        for k in range(turns):
            tokens = tokens_np[b, obs_positions[bounds[k]:bounds[k + 1]]]
            if k == 0 and prompts is not None:
                prompt = prompts[b]
                if attention is not None:
                    prompt = prompt[attention[b, : prompts.shape[1]]]
                tokens = np.concatenate([prompt.cpu().numpy(), tokens])
            anchors.append(hash_tokens(tokens))
    return torch.tensor(anchors, dtype=torch.int64)


def build_step_table(data: Any, settings: VerlSettings, *, need_text: bool = False) -> StepTable:
    """Step table of a verl batch in either layout (``settings.layout``; 'auto' looks for ``traj_uid``)."""
    layout = settings.layout
    if layout == "auto":
        layout = "step" if "traj_uid" in data.non_tensor_batch else "trajectory"
    if layout == "step":
        return step_rows_table(data, settings, need_text=need_text)
    if need_text:
        raise ValueError("algorithm.gaca.similarity needs text anchors, which the trajectory layout "
                         "does not have (its anchors are token hashes); use exact anchors")
    return trajectory_rows_table(data, settings)


__all__ = [
    "StepTable",
    "anchor_key",
    "build_step_table",
    "dense_keys",
    "logprob_tensor",
    "step_rows_table",
    "trajectory_rows_table",
    "turn_spans",
]
