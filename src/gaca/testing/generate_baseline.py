"""Plain ``model.generate`` on the same prompts: the baseline of ``benchmarks/train_speed.py``."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from gaca.policy.policy import CausalLMPolicy, left_pad


@dataclass
class GenerateOutput:
    """Result of :func:`generate_baseline`."""

    response_ids: torch.Tensor
    """int64 [B, L] generated ids (right-padded by ``generate`` with the pad id)."""
    response_mask: torch.Tensor
    """bool [B, L], True up to and including each row's eos (or through L)."""
    forward_passes: int
    """Decode forward calls ``generate`` made (L: one per generated position)."""

    @property
    def num_tokens(self) -> int:
        """Generated tokens in total."""
        return int(self.response_mask.sum())


@torch.no_grad()
def generate_baseline(
    policy: CausalLMPolicy,
    prompts: list[str],
    *,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_p: float = 1.0,
    stop: str | None = None,
    seed: int = 0,
) -> GenerateOutput:
    """Sample with ``transformers``' own ``model.generate`` (KV cache, left padding).

    Same prompts and encoding as :meth:`CausalLMPolicy.sample`; stops at eos, at ``max_new_tokens`` and, if
    ``stop`` is given, at that string (``generate``'s ``stop_strings``). The draws use torch's
    global RNG, seeded with ``seed`` inside a forked RNG state. No log-probs are kept (plain
    generation is the baseline; asking for scores would slow it down).
    """
    prompt_ids = [policy.encode_prompt(p) for p in prompts]
    ids, attn = left_pad(prompt_ids, policy.pad_id)
    ids, attn = ids.to(policy.device), attn.to(policy.device)
    kwargs = dict(
        max_new_tokens=max_new_tokens,
        do_sample=temperature > 0,
        pad_token_id=policy.pad_id,
        eos_token_id=policy.eos_ids.tolist(),
    )
    if temperature > 0:
        kwargs.update(temperature=temperature, top_p=top_p, top_k=0)
    if stop:
        kwargs.update(stop_strings=[stop], tokenizer=policy.tokenizer)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        out = policy.model.generate(input_ids=ids, attention_mask=attn, **kwargs)
    resp = out[:, ids.shape[1] :].cpu()
    is_end = torch.isin(resp, policy.eos_ids)
    # mask: tokens up to and including the first eos of each row
    after_end = (is_end.long().cumsum(-1) - is_end.long()) > 0
    mask = ~after_end
    if policy.pad_id not in policy.eos_ids.tolist():  # rows cut by a stop string end in a run of pad
        mask &= ~_trailing_pad(resp, policy.pad_id)
    policy.forward_calls += resp.shape[1]
    return GenerateOutput(response_ids=resp, response_mask=mask, forward_passes=int(resp.shape[1]))


def _trailing_pad(resp: torch.Tensor, pad_id: int) -> torch.Tensor:
    """bool [B, L]: position is in the run of pad ids that ends the row."""
    is_pad = resp == pad_id
    return torch.flip(torch.cumprod(torch.flip(is_pad, [1]).long(), dim=1), [1]).bool()
