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

import bisect
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from gaca.advantage import StepBatch, hash_text, hash_tokens
from gaca.advantage.estimators import OPTIONAL_INPUTS
from gaca.advantage.segments import pair_ids
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
      row_mask:   [B, L] bool when each batch row holds one step on exactly its masked tokens
                  (step layout), else None; broadcasting is then one masked multiply.
      row_step:   [B] int64 with ``row_mask``: the step row batch row b holds (a trainer's padding
                  copy holds its original's); None: step row b.
    """

    batch: StepBatch
    token_step_: torch.Tensor | None
    layout: str
    row_mask: torch.Tensor | None = None
    row_step: torch.Tensor | None = None

    @property
    def token_step(self) -> torch.Tensor:
        """[B, L] int64, the step row of each response token, -1 off-step (built on demand)."""
        if self.token_step_ is None:
            assert self.row_mask is not None
            size = self.row_mask.shape[0]
            rows = torch.arange(size) if self.row_step is None else self.row_step
            object.__setattr__(self, "token_step_", torch.where(self.row_mask, rows.unsqueeze(1), -1))
        return self.token_step_

    def to_tokens(self, values: torch.Tensor) -> torch.Tensor:
        """Broadcast per-step ``values`` [N] to the verl batch's tokens: [B, L], 0 off-step."""
        if values.shape != (len(self.batch),):
            raise ValueError(f"expected [N] = ({len(self.batch)},) values, got {tuple(values.shape)}")
        if self.row_mask is not None:
            per_row = values if self.row_step is None else values.index_select(0, self.row_step)
            return torch.where(self.row_mask, per_row.unsqueeze(1), torch.zeros((), dtype=values.dtype))
        # one extra slot holding 0 for the off-step tokens (-1), so a single gather does it
        padded = torch.cat([values, torch.zeros(1, dtype=values.dtype, device=values.device)])
        index = torch.where(self.token_step >= 0, self.token_step, len(values))
        return padded.index_select(0, index.reshape(-1)).view(self.token_step.shape)


def dense_keys(values: Sequence[Any] | np.ndarray) -> torch.Tensor:
    """[B] int64 dense ids of arbitrary hashable keys (str uuids, ints), in first-seen order.

    verl repeats each prompt's uid over consecutive rows, so only the first row of each run of equal
    keys is looked up (a dict of Python keys is the cost; comparing neighbours is vectorized).
    """
    items = np.asarray(values, dtype=object) if not isinstance(values, np.ndarray) else values.astype(object)
    if len(items) == 0:
        return torch.zeros(0, dtype=torch.int64)
    new = np.ones(len(items), dtype=bool)
    new[1:] = items[1:] != items[:-1]
    heads = items[new].tolist()  # numpy scalars -> Python values
    ids: dict[Any, int] = {}
    head_ids = np.fromiter((ids.setdefault(v, len(ids)) for v in heads), dtype=np.int64, count=len(heads))
    return torch.from_numpy(head_ids[np.cumsum(new) - 1])


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
        if obs.dtype.kind == "O" and obs.ndim > 0:  # e.g. images collated into an object array
            numeric = np.asarray(obs.tolist())
            obs = numeric if numeric.dtype.kind in "iubf" else obs
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


def _chain_by_sorting(traj: torch.Tensor, reward: torch.Tensor, returns: torch.Tensor, gamma: float,
                      also_equal: torch.Tensor | None, *, rtol: float, atol: float) -> torch.Tensor | None:
    """``recover_step_order``'s answer when ordering each trajectory by |G|, smallest first, is a
    valid chain (a reward at the end only, as in ALFWorld and WebShop, discounts to |G| growing
    along the episode): vectorized. None when the check fails (the general search then decides, or
    says why it cannot)."""
    t = traj.numpy()
    r, g = reward.double().numpy(), returns.double().numpy()
    d = g - r
    order = np.lexsort((np.abs(g), t))
    t_o, d_o, g_o = t[order], d[order], g[order]
    last = np.ones(len(t_o), dtype=bool)
    last[:-1] = t_o[1:] != t_o[:-1]
    scale = np.zeros(int(t.max()) + 1)
    np.maximum.at(scale, t, np.abs(g))
    tol = atol + rtol * scale[t_o]
    after = np.where(last, 0.0, np.roll(g_o, -1))
    if not bool(np.all(np.abs(d_o - gamma * after) <= tol)):
        return None
    if also_equal is not None:  # neighbours that could swap must agree on it too
        e_o = also_equal.double().numpy()[order]
        tie = ~last[:-1] & (np.abs(d_o[1:] - d_o[:-1]) <= tol[:-1]) & (np.abs(g_o[1:] - g_o[:-1]) <= tol[:-1])
        if bool(np.any(tie & (e_o[1:] != e_o[:-1]))):
            return None
    first = np.ones(len(t_o), dtype=bool)
    first[1:] = t_o[1:] != t_o[:-1]
    start = np.maximum.accumulate(np.where(first, np.arange(len(t_o)), 0))
    step = np.empty(len(t_o), dtype=np.int64)
    step[order] = np.arange(len(t_o)) - start
    return torch.from_numpy(step)


def recover_step_order(traj: torch.Tensor, reward: torch.Tensor, returns: torch.Tensor, gamma: float, *,
                       also_equal: torch.Tensor | None = None, rtol: float = 1e-4, atol: float = 1e-5
                       ) -> torch.Tensor:
    """Step index of each row, rebuilt from its trajectory's discounted returns.

    Walks each trajectory back from its end: the last step is the row with G = r (no return after
    it), and the step before one with return G' is the row with G = r + γ·G'. Rows that fit the same
    position with the same r (hence the same G) and the same ``also_equal`` value are
    interchangeable (any order gives the same results) and keep their batch order.

    Args:
      traj:    [N] int64 dense trajectory ids.
      reward:  [N] float, each row's step reward r_t.
      returns: [N] float, each row's discounted return G_t = Σ_k γ^(k−t) r_k.
      gamma:   the discount the returns were computed with.
      also_equal: [N] float that must match too for rows to be interchangeable (a penalty that will
               enter the returns computed from this order), or None.
    Returns:
      [N] int64 step index within the trajectory.
    Raises:
      ValueError naming the trajectory when no row fits a position, or two rows with different
      rewards do (then the order cannot be known, and it matters): record the step index instead.
    """
    fast = _chain_by_sorting(traj, reward, returns, gamma, also_equal, rtol=rtol, atol=atol)
    if fast is not None:
        return fast
    step = torch.empty(len(traj), dtype=torch.int64)
    r, g = reward.double().tolist(), returns.double().tolist()
    e = also_equal.double().tolist() if also_equal is not None else [0.0] * len(r)
    rows_of: dict[int, list[int]] = {}
    for i, t in enumerate(traj.tolist()):
        rows_of.setdefault(t, []).append(i)
    for t, rows in rows_of.items():
        # Rows with the same (r, G, also_equal) are interchangeable: keep them together, in batch order,
        # indexed by d = G − r, the discounted return after them that they need (γ·G_next).
        groups: dict[tuple[float, float, float], list[int]] = {}
        for i in rows:
            groups.setdefault((r[i], g[i], e[i]), []).append(i)
        keys = sorted(groups, key=lambda k: k[1] - k[0])
        need = [k[1] - k[0] for k in keys]
        tol = atol + rtol * max(abs(g[i]) for i in rows)
        after = 0.0
        for position in range(len(rows) - 1, -1, -1):
            lo = bisect.bisect_left(need, gamma * after - tol)
            hi = bisect.bisect_right(need, gamma * after + tol)
            fits = [keys[k] for k in range(lo, hi) if groups[keys[k]]]
            if not fits or any(abs(k[0] - fits[0][0]) > tol or k[2] != fits[0][2] for k in fits[1:]):
                raise ValueError(
                    f"cannot recover the step order of trajectory {t} from its returns ({len(rows)} rows: "
                    f"{'none' if not fits else 'several different ones'} fit position {position}); record each "
                    "row's step index in the batch (VerlSettings.step_key; in verl-agent's trainer the "
                    "integration records it when installed in the trainer's process, see docs/verl-agent.md)")
            i = groups[fits[0]].pop(0)
            step[i] = position
            after = g[i]
    return step


@dataclass(frozen=True)
class DistinctSteps:
    """The distinct (trajectory, step) pairs of a step-layout batch whose trainer padded it with
    copies of rows (verl-agent's ``adjust_batch``).

    Attributes:
      first:    [D] int64, the batch row of each distinct step's first occurrence, in batch order.
      row_step: [B] int64, the distinct step each batch row holds.
      count:    [D] int64, how many batch rows hold it (1 + its copies).
    """

    first: torch.Tensor
    row_step: torch.Tensor
    count: torch.Tensor


def distinct_steps(traj: torch.Tensor, step: torch.Tensor) -> DistinctSteps | None:
    """The batch's distinct steps (see ``DistinctSteps``), or None when no two rows share a
    (trajectory, step): then every row is its own step.

    Args:
      traj: [B] int64 dense trajectory ids.
      step: [B] int64 step index within the trajectory.
    """
    size = traj.shape[0]
    pair, num = pair_ids(traj, step)
    if num == size:
        return None
    first = torch.full((num,), size, dtype=torch.int64).scatter_reduce_(0, pair, torch.arange(size), reduce="amin")
    order = torch.argsort(first)
    rank = torch.empty_like(order).index_copy_(0, order, torch.arange(num))
    row_step = rank.index_select(0, pair)
    return DistinctSteps(first=first.index_select(0, order), row_step=row_step,
                         count=torch.bincount(row_step, minlength=num))


def _check_copies(steps: DistinctSteps, named: dict[str, torch.Tensor | None], step_key: str) -> None:
    """A row that shares its (trajectory, step) with an earlier one must be a copy of it."""
    original = steps.first.index_select(0, steps.row_step)
    for name, values in named.items():
        if values is None:
            continue
        differs = values != values.index_select(0, original)
        if bool(differs.any()):
            row = int(torch.nonzero(differs)[0, 0])
            raise ValueError(f"verl batch rows {int(original[row])} and {row} hold the same step of one trajectory "
                             f"(key {step_key!r}) but differ in their {name}: a step index must identify a step "
                             "(only a trainer's padding copies of a row may repeat it)")


def record_rollout_steps(data: Any, step_key: str = "step") -> bool:
    """Record each row's step index in ``data`` (non-tensor ``step_key``, [B] int64): its rank
    among the rows of its trajectory (``traj_uid``) in batch order.

    Meant for a batch straight out of verl-agent's rollout, where each trajectory's rows are in the
    order its steps were taken (the order its ``compute_step_discounted_returns`` discounts in),
    before its trainer copies rows (``adjust_batch``) or moves them (``balance_batch``): the index
    then travels with each row and its copies. Does nothing to a batch without ``traj_uid`` or one
    that already has ``step_key``. Returns whether it recorded.
    """
    if "traj_uid" not in data.non_tensor_batch or _lookup(data, step_key) is not None:
        return False
    steps = _row_order_steps(dense_keys(data.non_tensor_batch["traj_uid"]))
    data.non_tensor_batch[step_key] = steps.numpy()
    return True


def _row_order_steps(traj: torch.Tensor) -> torch.Tensor:
    """Step index of each row = its rank among its trajectory's rows in batch order."""
    order = torch.sort(traj, stable=True).indices
    sorted_traj = traj[order]
    first = torch.ones_like(sorted_traj, dtype=torch.bool)
    first[1:] = sorted_traj[1:] != sorted_traj[:-1]
    position = torch.arange(len(traj))
    segment_start = torch.cummax(torch.where(first, position, 0), dim=0).values
    return torch.empty_like(traj).index_copy_(0, order, position - segment_start)


def row_penalty(data: Any, settings: VerlSettings) -> torch.Tensor | None:
    """[B] invalid-action penalty of each row by ``settings.penalty`` (see ``VerlSettings``), or None.

    verl-agent subtracts ``invalid_action_penalty_coef`` from the episode score it writes into an
    invalid step's ``token_level_rewards`` (and from its discounted return); the difference to the
    unpenalised ``episode_rewards`` is that penalty, exactly, whatever the coefficient.
    """
    if settings.penalty == "none":
        return None
    size = data.batch["response_mask"].shape[0]
    if settings.penalty != "auto":
        return _as_vector(_require(data, settings.penalty, "the invalid-action penalty"), torch.float32,
                          settings.penalty, size)
    episode, valid = _lookup(data, "episode_rewards"), _lookup(data, "is_action_valid")
    if episode is None or valid is None:
        return None
    score = data.batch["token_level_rewards"].double().sum(dim=-1)
    penalty = _as_vector(episode, torch.float64, "episode_rewards", size) - score
    valid = _as_vector(valid, torch.float64, "is_action_valid", size) > 0.5
    off = valid & (penalty.abs() > 1e-4 * (1 + score.abs()))
    if bool(off.any()):
        row = int(torch.nonzero(off)[0, 0])
        raise ValueError(f"row {row} is a valid action but its token_level_rewards sum {float(score[row]):g} differs "
                         f"from its episode_rewards {float(score[row] + penalty[row]):g}: these rewards are not "
                         "verl-agent's episode scores; set algorithm.gaca.penalty=none (or the key of the penalty)")
    return penalty.to(torch.float32)


def step_rows_table(data: Any, settings: VerlSettings, *, need_text: bool = False, gamma: float = 0.95,
                    penalty_in_returns: bool = True) -> StepTable:
    """Step table of a batch with one row per environment step (verl-agent layout).

    Args:
      data:      verl ``DataProto`` with tensor ``response_mask`` [B, L], ``token_level_rewards``
                 [B, L], log-probs [B, L]; non-tensor ``uid``, ``traj_uid``, ``anchor_obs``.
      settings:  where to find the step reward, the step index, the penalty and the log-probs.
      need_text: also fill ``StepBatch.anchor_text`` (similarity grouping; needs text anchors).
      gamma:     the discount of the recorded returns (to recover the step order without a step key).
      penalty_in_returns: the penalty will enter the returns (gaca's conventions), so rows differing
                 in it are not interchangeable when the order is recovered.
    """
    global _warned_row_order
    mask = data.batch["response_mask"].bool()
    size = mask.shape[0]
    group = dense_keys(_require(data, "uid", "the episode-group id"))
    traj = dense_keys(_require(data, "traj_uid", "the trajectory id"))
    anchor_obs = _require(data, "anchor_obs", "the step's anchor observation")
    known: dict[str, int] = {}  # observations repeat across a group: hash each text once
    anchor = torch.tensor([known.setdefault(obs, anchor_key(obs)) if isinstance(obs, str) else anchor_key(obs)
                           for obs in anchor_obs], dtype=torch.int64)
    anchor_text = None
    if need_text:
        if not all(isinstance(obs, str) for obs in anchor_obs):
            raise ValueError("algorithm.gaca.similarity needs text anchor_obs (str) on every row")
        anchor_text = [str(obs) for obs in anchor_obs]
    reward_value = _lookup(data, settings.step_reward_key)
    token_rewards = data.batch["token_level_rewards"]
    if reward_value is None:
        reward = (token_rewards * mask).sum(dim=-1).to(torch.float32)
    else:
        reward = _as_vector(reward_value, torch.float32, settings.step_reward_key, size)
    penalty = row_penalty(data, settings)
    step_value, returns_value = _lookup(data, settings.step_key), _lookup(data, settings.returns_key)
    if step_value is not None:
        step = _as_vector(step_value, torch.int64, settings.step_key, size)
    elif returns_value is not None and reward_value is not None:
        returns = _as_vector(returns_value, torch.float64, settings.returns_key, size)
        unpenalised = returns + (0.0 if penalty is None else penalty.double())
        step = recover_step_order(traj, reward, unpenalised, gamma,
                                  also_equal=penalty if penalty_in_returns else None)
    else:
        if not _warned_row_order:
            logger.warning("verl batch has no %r key and no %r returns: taking each trajectory's rows to be in "
                           "step order (disable trainer.balance_batch or record the step index)",
                           settings.step_key, settings.returns_key)
            _warned_row_order = True
        step = _row_order_steps(traj)
    logprobs = logprob_tensor(data, settings)
    copies = distinct_steps(traj, step)
    if copies is None:
        batch = StepBatch(
            group_id=group, traj_id=traj, step=step, anchor=anchor, reward=reward,
            logprobs=logprobs.float(), mask=mask, anchor_text=anchor_text, penalty=penalty,
        )
        return StepTable(batch=batch, token_step_=None, layout="step", row_mask=mask)
    # A trainer's padding copies (verl-agent's adjust_batch): one step row per distinct step, with
    # its count; every copy gets its original's advantage.
    _check_copies(copies, {"episode group": group, "anchor_obs": anchor, "step reward": reward,
                           "invalid-action penalty": penalty}, settings.step_key)
    first = copies.first
    batch = StepBatch(
        group_id=group[first], traj_id=traj[first], step=step[first], anchor=anchor[first], reward=reward[first],
        logprobs=logprobs.index_select(0, first).float(), mask=mask.index_select(0, first),
        anchor_text=None if anchor_text is None else [anchor_text[i] for i in first.tolist()],
        penalty=None if penalty is None else penalty[first], count=copies.count,
    )
    return StepTable(batch=batch, token_step_=None, layout="step", row_mask=mask, row_step=copies.row_step)


def span_starts(mask: torch.Tensor) -> torch.Tensor:
    """[B, L] bool, True on the first token of each maximal run of True in ``mask`` [B, L]."""
    start = mask.clone()
    start[:, 1:] &= ~mask[:, :-1]
    return start


def turn_spans(mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The assistant-turn spans of each row of a response mask.

    Args:
      mask: [B, L] bool, True on tokens the model generated.
    Returns:
      start:     [B, L] bool, True on the first token of each span (maximal run of True).
      started:   [B, L] int64, number of spans started at or before each position.
      num_turns: [B] int64, spans per row.
    """
    start = span_starts(mask)
    started = torch.cumsum(start.to(torch.int64), dim=1)
    return start, started, started[:, -1].clone()


def trajectory_rows_table(data: Any, settings: VerlSettings, *, needs: frozenset[str] = OPTIONAL_INPUTS
                          ) -> StepTable:
    """Step table of a batch with one row per multi-turn trajectory (verl agent-loop layout).

    Args:
      data: verl ``DataProto`` with tensor ``responses`` [B, L] (token ids), ``response_mask``
            [B, L], ``token_level_rewards`` [B, L], log-probs [B, L]; optional ``prompts`` [B, P]
            and ``attention_mask`` [B, P + L] (padding is left out of the anchors); non-tensor
            ``uid``.
      settings: where to find the log-probs.
      needs:    which optional inputs the estimator reads (``gaca.advantage.estimator_inputs``);
                the others are left as placeholders (anchors 0; one log-prob of 0 per step).
    """
    mask = data.batch["response_mask"].bool()
    size = mask.shape[0]
    # one turn per row whose tokens come first (right-padded single-turn responses): no span to cut
    if not needs and bool(mask[:, 0].all()) and not bool((mask[:, 1:] > mask[:, :-1]).any()):
        return _single_turn_table(data, mask)
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

    anchor = (_turn_anchors(data, responses, mask, started, num_turns) if "anchor" in needs
              else torch.zeros(num_steps, dtype=torch.int64))
    group = dense_keys(_require(data, "uid", "the episode-group id"))
    batch = StepBatch(
        group_id=group[step_row], traj_id=step_row.clone(), step=step, anchor=anchor,
        reward=reward.to(torch.float32), logprobs=packed, mask=packed_mask,
    )
    return StepTable(batch=batch, token_step_=token_step, layout="trajectory")


def _single_turn_table(data: Any, mask: torch.Tensor) -> StepTable:
    """The trajectory layout for an estimator that reads neither anchors nor log-probs (GRPO, RLOO)
    when every row is one assistant turn (a single-turn batch): one step row per batch row, its
    reward the row's sum, placeholders for the rest, the row's response tokens mapped to it."""
    size = mask.shape[0]
    zeros = torch.zeros(size, dtype=torch.int64)
    batch = StepBatch(
        group_id=dense_keys(_require(data, "uid", "the episode-group id")), traj_id=torch.arange(size),
        step=zeros, anchor=zeros, reward=data.batch["token_level_rewards"].sum(dim=-1).to(torch.float32),
        logprobs=torch.zeros(size, 1), mask=torch.ones(size, 1, dtype=torch.bool),
    )
    return StepTable(batch=batch, token_step_=None, layout="trajectory", row_mask=mask)


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


def build_step_table(data: Any, settings: VerlSettings, *, need_text: bool = False, gamma: float = 0.95,
                     penalty_in_returns: bool = True, needs: frozenset[str] = OPTIONAL_INPUTS) -> StepTable:
    """Step table of a verl batch in either layout (``settings.layout``; 'auto' looks for ``traj_uid``)."""
    layout = settings.layout
    if layout == "auto":
        layout = "step" if "traj_uid" in data.non_tensor_batch else "trajectory"
    if layout == "step":
        return step_rows_table(data, settings, need_text=need_text, gamma=gamma,
                               penalty_in_returns=penalty_in_returns)
    if need_text:
        raise ValueError("algorithm.gaca.similarity needs text anchors, which the trajectory layout "
                         "does not have (its anchors are token hashes); use exact anchors")
    return trajectory_rows_table(data, settings, needs=needs)


__all__ = [
    "DistinctSteps",
    "StepTable",
    "anchor_key",
    "build_step_table",
    "dense_keys",
    "distinct_steps",
    "logprob_tensor",
    "record_rollout_steps",
    "recover_step_order",
    "row_penalty",
    "step_rows_table",
    "trajectory_rows_table",
    "turn_spans",
]
