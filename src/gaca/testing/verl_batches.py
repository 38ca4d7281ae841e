"""Build verl ``DataProto`` batches of both layouts (and verl-agent's) from a known ``StepBatch``
(tests and benchmarks; needs ``verl``).

Each builder returns the batch and ``owner`` [B, L]: the StepBatch row whose response each token
is (-1 elsewhere), built here independently of ``gaca.integrations.verl.tables``, so that the
expected token advantages are ``where(owner >= 0, A[owner], 0)`` with A from ``gaca.advantage``
on the original StepBatch.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from verl import DataProto

from gaca.advantage import StepBatch

PAD, OBS_OPEN, OBS_CLOSE, TRAILER = 0, 11, 12, 13


def step_rows_batch(sb: StepBatch, *, with_step: bool = True, seed: int = 0) -> tuple[DataProto, torch.Tensor]:
    """verl-agent layout: one row per StepBatch row, same order.

    ``token_level_rewards`` carries the *episode* return on each row's last token (as verl-agent's
    reward manager does), so a test passes only if the step rewards come from ``rewards``.
    """
    n = len(sb)
    mask = sb.mask
    episode = torch.zeros(n)
    for g, t in {(int(g), int(t)) for g, t in zip(sb.group_id, sb.traj_id, strict=True)}:
        rows = (sb.group_id == g) & (sb.traj_id == t)
        episode[rows] = sb.reward[rows].sum()
    last = mask.long().sum(1) - 1
    token_rewards = torch.zeros(mask.shape)
    token_rewards[torch.arange(n), last] = episode
    gen = torch.Generator().manual_seed(seed)
    non_tensors = {
        "uid": np.array([f"group-{int(g)}" for g in sb.group_id], dtype=object),
        "traj_uid": np.array([f"traj-{int(g)}-{int(t)}" for g, t in zip(sb.group_id, sb.traj_id, strict=True)],
                             dtype=object),
        "anchor_obs": np.array([f"You are in state {int(a)}." for a in sb.anchor], dtype=object),
        "rewards": sb.reward.numpy().astype(np.float32),
    }
    if with_step:
        non_tensors["step"] = sb.step.numpy()
    # Noise on padding positions must not matter.
    logprobs = torch.where(mask, sb.logprobs, -torch.rand(mask.shape, generator=gen) * 50)
    data = DataProto.from_dict(
        tensors={
            "response_mask": mask.long(),
            "token_level_rewards": token_rewards,
            "old_log_probs": logprobs,
            "responses": torch.randint(100, 200, mask.shape, generator=gen),
        },
        non_tensors=non_tensors,
    )
    owner = torch.where(mask, torch.arange(n).unsqueeze(1), -1)
    return data, owner


def trajectory_rows_batch(
    sb: StepBatch, *, seed: int = 0, prompt_len: int = 6
) -> tuple[DataProto, torch.Tensor]:
    """verl multi-turn agent-loop layout: one row per trajectory, rows shuffled.

    Row = span(step 0), obs(step 1), span(step 1), ..., span(last)[, trailer obs], padding.
    obs(k) = [OBS_OPEN, 1000 + anchor_k, OBS_CLOSE]; step 0's observation is in the prompt
    (left-padded ``[1, 500 + group, 1000 + anchor_0, 2]``). Step k's reward sits on its span's
    last token or on the first token of the observation after it (chosen at random), both of
    which belong to turn k.
    """
    gen = torch.Generator().manual_seed(seed)
    pairs = sorted({(int(g), int(t)) for g, t in zip(sb.group_id, sb.traj_id, strict=True)})
    order = torch.randperm(len(pairs), generator=gen).tolist()
    rows = []
    for index in order:
        g, t = pairs[index]
        members = torch.nonzero((sb.group_id == g) & (sb.traj_id == t)).flatten()
        members = members[torch.argsort(sb.step[members])]
        tokens, mask, logp, reward, owner = [], [], [], [], []
        pending = []  # (position, value): rewards placed on a token appended later
        for k, i in enumerate(members.tolist()):
            if k > 0:
                tokens += [OBS_OPEN, 1000 + int(sb.anchor[i]), OBS_CLOSE]
                mask += [0] * 3
                logp += [0.0] * 3
                reward += [0.0] * 3
                owner += [-1] * 3
            span = sb.logprobs[i][sb.mask[i]].tolist()
            tokens += torch.randint(100, 200, (len(span),), generator=gen).tolist()
            mask += [1] * len(span)
            logp += span
            reward += [0.0] * len(span)
            owner += [i] * len(span)
            on_obs = k + 1 < len(members) and bool(torch.rand((), generator=gen) < 0.5)
            # On the next observation's first token (appended next iteration) or the span's last.
            pending.append((len(reward) if on_obs else len(reward) - 1, float(sb.reward[i])))
        for position, value in pending:
            reward[position] += value
        if bool(torch.rand((), generator=gen) < 0.5):  # final environment feedback after the last turn
            tokens += [TRAILER, TRAILER]
            mask += [0, 0]
            logp += [0.0, 0.0]
            reward += [0.0, 0.0]
            owner += [-1, -1]
        prompt = [1, 500 + g, 1000 + int(sb.anchor[members[0]]), 2]
        rows.append((prompt, tokens, mask, logp, reward, owner))
    width = max(len(r[1]) for r in rows)
    size = len(rows)

    def padded(i: int, fill: float, dtype: torch.dtype) -> torch.Tensor:
        out = torch.full((size, width), fill, dtype=dtype)
        for b, row in enumerate(rows):
            out[b, : len(row[i])] = torch.tensor(row[i], dtype=dtype)
        return out

    responses = padded(1, PAD, torch.int64)
    response_mask = padded(2, 0, torch.int64)
    logprobs = padded(3, 0.0, torch.float32)
    rewards = padded(4, 0.0, torch.float32)
    owner = padded(5, -1, torch.int64)
    valid = torch.zeros(size, width, dtype=torch.int64)
    prompts = torch.full((size, prompt_len), PAD, dtype=torch.int64)
    prompt_valid = torch.zeros(size, prompt_len, dtype=torch.int64)
    for b, row in enumerate(rows):
        valid[b, : len(row[1])] = 1
        prompts[b, prompt_len - len(row[0]):] = torch.tensor(row[0])
        prompt_valid[b, prompt_len - len(row[0]):] = 1
    logprobs = torch.where(response_mask.bool(), logprobs, -torch.rand(size, width, generator=gen) * 50)
    data = DataProto.from_dict(
        tensors={
            "prompts": prompts,
            "responses": responses,
            "input_ids": torch.cat([prompts, responses], dim=1),
            "attention_mask": torch.cat([prompt_valid, valid], dim=1),
            "response_mask": response_mask,
            "token_level_rewards": rewards,
            "rollout_log_probs": logprobs,
            "old_log_probs": logprobs + 0.5,  # must be ignored: rollout_log_probs wins in 'auto'
        },
        non_tensors={"uid": np.array([f"group-{pairs[i][0]}" for i in order], dtype=object)},
    )
    return data, owner


def expected_tokens(advantage: torch.Tensor, owner: torch.Tensor) -> torch.Tensor:
    """[B, L] token advantages: A[owner] on owned tokens, 0 elsewhere."""
    return torch.where(owner >= 0, advantage[owner.clamp(min=0)], torch.zeros((), dtype=advantage.dtype))


def pad_with_copies(data: DataProto, copies: int, *, seed: int = 0) -> DataProto:
    """verl-agent's ``adjust_batch`` (mode 'copy') for a known number of copies: ``copies`` distinct
    random rows appended again at the end of the batch."""
    if copies == 0:
        return data
    rows = np.random.default_rng(seed).choice(len(data), copies, replace=False)
    return DataProto.concat([data, data.select_idxs(rows)])


def verl_agent_batch(sb: StepBatch, invalid: torch.Tensor, *, coef: float = 0.1, gamma: float = 0.95,
                     seed: int = 0, copies: int = 0, adjust: Callable[[DataProto], DataProto] | None = None,
                     ) -> tuple[DataProto, torch.Tensor, StepBatch]:
    """A batch as verl-agent's trainer hands it to ``compute_advantage`` (from its published pipeline):
    rows in rollout order (each trajectory's steps in order) without a step index; ``step_rewards`` =
    their discounted returns; then ``adjust`` (verl-agent's ``adjust_batch``; default: append
    ``copies`` copies of random rows, ``pad_with_copies``); the rows shuffled (``balance_batch``);
    the invalid-action penalty ``coef`` subtracted from an invalid row's episode score (on its last
    token) and from its ``step_rewards``; ``rewards``, ``episode_rewards``, ``is_action_valid`` as
    its rollout records them.

    Returns the batch, ``owner`` (as ``step_rows_batch``, into the returned StepBatch) and the
    StepBatch (with ``penalty``, and ``count`` where rows were copied) the expected advantages come
    from: one row per step, in the order of the steps' first rows in the batch.
    """
    n = len(sb)
    returns, episode = torch.zeros(n, dtype=torch.float64), torch.zeros(n)
    for g, t in {(int(g), int(t)) for g, t in zip(sb.group_id, sb.traj_id, strict=True)}:
        rows = torch.nonzero((sb.group_id == g) & (sb.traj_id == t)).flatten()
        rows = rows[torch.argsort(sb.step[rows])]
        episode[rows] = sb.reward[rows].sum()
        acc = 0.0
        for i in reversed(rows.tolist()):
            acc = float(sb.reward[i]) + gamma * acc
            returns[i] = acc
    fields = ("group_id", "traj_id", "step", "anchor", "reward", "logprobs", "mask")
    rollout = torch.from_numpy(np.lexsort((sb.step.numpy(), sb.traj_id.numpy(), sb.group_id.numpy())))
    data, _ = step_rows_batch(StepBatch(**{k: getattr(sb, k)[rollout] for k in fields}), with_step=False, seed=seed)
    data.batch["step_rewards"] = returns[rollout].float()
    data.non_tensor_batch["episode_rewards"] = episode[rollout].numpy()
    data.non_tensor_batch["is_action_valid"] = (~invalid[rollout]).numpy()
    data.non_tensor_batch["sb_row"] = rollout.numpy()  # which StepBatch row each row is (dropped below)
    data = adjust(data) if adjust is not None else pad_with_copies(data, copies, seed=seed)
    data = data[torch.randperm(len(data), generator=torch.Generator().manual_seed(seed))]  # balance_batch
    sb_row = torch.from_numpy(data.non_tensor_batch.pop("sb_row").astype(np.int64))
    penalty = invalid.float() * coef
    mask = sb.mask[sb_row]
    last = mask.long().sum(1) - 1
    scores = torch.zeros(mask.shape)
    scores[torch.arange(len(data)), last] = episode[sb_row] - penalty[sb_row]
    data.batch["token_level_rewards"] = scores
    data.batch["step_rewards"] = data.batch["step_rewards"] - penalty[sb_row]
    # expected rows: the distinct steps in order of first appearance, each with its number of rows
    first_seen = dict.fromkeys(sb_row.tolist())
    order = torch.tensor(list(first_seen))
    position = torch.full((n,), -1, dtype=torch.int64).index_copy_(0, order, torch.arange(len(order)))
    count = torch.bincount(position[sb_row], minlength=len(order))
    expected = StepBatch(**{k: getattr(sb, k)[order] for k in fields}, penalty=penalty[order],
                         count=count if len(data) > len(order) else None)
    owner = torch.where(mask, position[sb_row].unsqueeze(1), -1)
    return data, owner, expected
