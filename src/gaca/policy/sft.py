"""Supervised warm start: fine-tune the policy on (prompt, expert response) pairs."""

from __future__ import annotations

import copy
import hashlib
import logging
import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

from gaca.policy.policy import CausalLMPolicy
from gaca.registry import Registry

logger = logging.getLogger(__name__)


#: SFT learning-rate schedules by name (``SFTConfig.lr_schedule``): multiplier of ``lr`` at (step, steps).
LR_SCHEDULES: Registry[Callable[[int, int], float]] = Registry("SFT learning-rate schedule")


@LR_SCHEDULES.register("constant")
def constant_lr(step: int, steps: int) -> float:
    """Multiplier of the base learning rate at ``step`` of ``steps``: 1 throughout."""
    return 1.0


@LR_SCHEDULES.register("cosine")
def cosine_lr(step: int, steps: int) -> float:
    """Multiplier ½·(1 + cos(π·step/steps)): 1 at the first step, falling to 0 after the last."""
    return 0.5 * (1.0 + math.cos(math.pi * step / max(1, steps)))


def sft_loss(policy: CausalLMPolicy, prompt_ids: list[torch.Tensor], responses: list[torch.Tensor]) -> torch.Tensor:
    """Token-mean negative log-likelihood of the responses given the prompts (temperature 1).

    loss = −Σ_{i,k} log π(y_{i,k} | x_i, y_{i,<k}) / Σ_i |y_i|; differentiable.
    """
    width = max(int(r.numel()) for r in responses)
    ids = torch.full((len(responses), width), policy.pad_id, dtype=torch.long)
    mask = torch.zeros((len(responses), width), dtype=torch.bool)
    for i, r in enumerate(responses):
        ids[i, : r.numel()] = r
        mask[i, : r.numel()] = True
    out = policy.score(prompt_ids, ids, mask)
    return -(out.logprobs.sum() / mask.sum().to(out.logprobs.device))


#: Version of the SFT progress layout (``sft_warm_start``'s ``progress`` / ``save_progress``).
PROGRESS_FORMAT = 1


def sft_identity(examples: Sequence[tuple[str, str]], *, steps: int, lr: float, batch_size: int, seed: int,
                 weight_decay: float, max_grad_norm: float, eval_size: int | None, lr_schedule: str) -> str:
    """A hash of what an SFT run computes (its data and settings): progress saved by one run resumes
    only a run with the same identity."""
    h = hashlib.sha1(repr((steps, lr, batch_size, seed, weight_decay, max_grad_norm, eval_size,
                           lr_schedule, len(examples))).encode())
    for prompt, response in examples:
        h.update(prompt.encode())
        h.update(b"\0")
        h.update(response.encode())
        h.update(b"\1")
    return h.hexdigest()


def sft_warm_start(
    policy: CausalLMPolicy,
    examples: Sequence[tuple[str, str]],
    *,
    steps: int,
    lr: float,
    batch_size: int,
    seed: int,
    weight_decay: float = 0.0,
    max_grad_norm: float = 1.0,
    reset_reference: bool = True,
    eval_size: int | None = 256,
    lr_schedule: str = "constant",
    progress: dict[str, Any] | None = None,
    save_progress: Callable[[dict[str, Any]], None] | None = None,
    progress_every: int = 0,
) -> dict[str, Any]:
    """Supervised fine-tuning on ``(prompt, response)`` pairs; the loss covers response tokens only.

    Prompts are built prompts (as :meth:`CausalLMPolicy.sample` takes them, i.e. after
    :meth:`CausalLMPolicy.build_prompt`); responses are the texts the policy should generate, stop string
    included (e.g. ``"<think>…</think><action>go to desk 1</action>"``). Mini-batches are drawn
    without replacement from seeded permutations (one epoch after another), AdamW updates
    :meth:`CausalLMPolicy.trainable_parameters` at ``lr · LR_SCHEDULES[lr_schedule](step, steps)``.
    ``steps == 0`` trains nothing (but still measures the loss).

    With ``reset_reference`` (default) the reference policy becomes the warm-started policy
    (:meth:`CausalLMPolicy.reset_reference`), so RL's KL term anchors to it.

    Interruptions: with ``save_progress`` and ``progress_every > 0`` the whole training state (trainable
    weights, optimizer, schedule, sampling generator and the epoch's remaining order) is handed to
    ``save_progress`` after every ``progress_every`` steps; passing the last such state back as
    ``progress`` (to a policy built as the first was) continues from it, and the result equals the
    uninterrupted run's bit for bit. A state of another SFT run (``sft_identity``) is ignored with a warning.

    Returns:
      ``{"loss_initial", "loss_final"}`` (token-mean loss before/after training on a fixed seeded
      subset of ``eval_size`` examples, all when None), ``"losses"`` (per step), ``"steps"``,
      ``"tokens"`` (response tokens trained on), ``"seconds"`` (training time of all the processes a
      resumed run spans, up to their last saved state), ``"tokens_per_s"`` (this process's own speed).
    """
    if not examples:
        raise ValueError("sft_warm_start needs at least one example")
    if steps < 0 or batch_size < 1 or lr <= 0:
        raise ValueError(f"need steps >= 0, batch_size >= 1, lr > 0; got {steps}, {batch_size}, {lr}")
    multiplier = LR_SCHEDULES[LR_SCHEDULES.check(lr_schedule, "lr_schedule")]
    prompts = [policy.encode_prompt(p) for p, _ in examples]
    responses = [policy.encode_response(r) for _, r in examples]
    for (p, r), ids in zip(examples, responses, strict=True):
        if ids.numel() == 0:
            raise ValueError(f"empty response for prompt {p[:80]!r}: {r!r}")

    gen = torch.Generator().manual_seed(seed)
    held = torch.randperm(len(examples), generator=gen).tolist()[: eval_size or len(examples)]

    def full_loss() -> float:
        total, count = 0.0, 0
        with torch.no_grad():
            for s in range(0, len(held), batch_size):
                idx = held[s : s + batch_size]
                n = sum(int(responses[i].numel()) for i in idx)
                total += float(sft_loss(policy, [prompts[i] for i in idx], [responses[i] for i in idx])) * n
                count += n
        return total / count

    identity = None
    if progress is not None or (save_progress is not None and progress_every > 0):
        identity = sft_identity(examples, steps=steps, lr=lr, batch_size=batch_size, seed=seed,
                                weight_decay=weight_decay, max_grad_norm=max_grad_norm, eval_size=eval_size,
                                lr_schedule=lr_schedule)
    if progress is not None and (progress.get("format") != PROGRESS_FORMAT or progress.get("identity") != identity):
        logger.warning("SFT progress of another run (other data or settings): starting SFT afresh")
        progress = None
    params = policy.trainable_parameters()
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)
    schedule = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: multiplier(step, steps))
    order: list[int] = []
    losses: list[float] = []
    tokens = 0
    start = 0
    earlier_seconds = 0.0  # training seconds spent by the processes this run resumes
    if progress is None:
        loss_initial = full_loss()
    else:
        with torch.no_grad():
            for p, saved in zip(params, progress["params"], strict=True):
                p.copy_(saved)
        opt.load_state_dict(progress["optimizer"])
        schedule.load_state_dict(progress["schedule"])
        gen.set_state(progress["generator"])
        order, losses, tokens = list(progress["order"]), list(progress["losses"]), int(progress["tokens"])
        start, loss_initial = int(progress["step"]), float(progress["loss_initial"])
        earlier_seconds = float(progress.get("seconds", 0.0))
        logger.info("SFT resumed at step %d/%d", start, steps)
    tokens_before = tokens
    t0 = time.perf_counter()
    for step in range(start, steps):
        if len(order) < batch_size:
            order += torch.randperm(len(examples), generator=gen).tolist()
        idx, order = order[:batch_size], order[batch_size:]
        loss = sft_loss(policy, [prompts[i] for i in idx], [responses[i] for i in idx])
        value = float(loss.detach())
        if not math.isfinite(value):
            raise FloatingPointError(f"non-finite SFT loss at step {step}")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if max_grad_norm > 0:
            torch.nn.utils.clip_grad_norm_(params, max_grad_norm)
        opt.step()
        schedule.step()
        losses.append(value)
        tokens += sum(int(responses[i].numel()) for i in idx)
        if (step + 1) % 50 == 0:
            logger.info("sft step %d/%d loss %.4f", step + 1, steps, losses[-1])
        if save_progress is not None and progress_every > 0 and (step + 1) % progress_every == 0 and step + 1 < steps:
            save_progress({
                "format": PROGRESS_FORMAT, "identity": identity, "step": step + 1,
                "params": [p.detach().clone() for p in params], "optimizer": copy.deepcopy(opt.state_dict()),
                "schedule": schedule.state_dict(), "generator": gen.get_state(), "order": list(order),
                "losses": list(losses), "tokens": tokens, "loss_initial": loss_initial,
                "seconds": earlier_seconds + time.perf_counter() - t0,
            })
    own_seconds = time.perf_counter() - t0
    loss_final = full_loss()
    if reset_reference:
        policy.reset_reference()
    return {
        "loss_initial": loss_initial,
        "loss_final": loss_final,
        "losses": losses,
        "steps": steps,
        "tokens": tokens,
        "seconds": earlier_seconds + own_seconds,
        # this process's speed: a resumed run's earlier tokens were trained in other processes' time
        "tokens_per_s": (tokens - tokens_before) / own_seconds if own_seconds > 0 else 0.0,
    }
