"""Pure pieces of the decode loop: the sampling distribution and the stop-string check."""

from __future__ import annotations

from collections.abc import Sequence

import torch


def sampling_logprobs(logits: torch.Tensor, temperature: float = 1.0, top_p: float = 1.0) -> torch.Tensor:
    """Log-probabilities of the sampling distribution: temperature, then nucleus (top-p) truncation.

    log q(v) = z_v − logsumexp_{u∈K} z_u for v ∈ K, −inf otherwise, with z = logits / temperature and
    K the smallest set of most likely tokens whose probability mass reaches ``top_p`` (the most
    likely token is always kept). With ``top_p == 1`` this is ``log_softmax(z)`` exactly, which is
    what :meth:`CausalLMPolicy.score` computes, so sampled and scored log-probs agree.

    Args:
      logits:      [B, V] float.
      temperature: > 0.
      top_p:       in (0, 1].
    Returns:
      [B, V] float32 log-probabilities (−inf outside the nucleus).
    """
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0 here (use greedy decoding for 0), got {temperature}")
    if not 0.0 < top_p <= 1.0:
        raise ValueError(f"top_p must be in (0, 1], got {top_p}")
    z = logits.float() / temperature
    logp = torch.log_softmax(z, dim=-1)
    if top_p >= 1.0:
        return logp
    sorted_logp, order = torch.sort(logp, dim=-1, descending=True)
    mass_before = sorted_logp.exp().cumsum(dim=-1) - sorted_logp.exp()
    drop_sorted = mass_before >= top_p  # token k is dropped once the tokens before it reach top_p
    drop_sorted[..., 0] = False
    drop = torch.zeros_like(drop_sorted).scatter_(-1, order, drop_sorted)
    return torch.log_softmax(z.masked_fill(drop, float("-inf")), dim=-1)


def draw(logp: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """One token per row from ``exp(logp)`` [B, V]; returns int64 [B] on ``logp``'s device."""
    probs = logp.exp()
    if generator is not None and generator.device != probs.device:
        drawn = torch.multinomial(probs.to(generator.device), 1, generator=generator)
        return drawn.squeeze(-1).to(logp.device)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


class StopStrings:
    """Detects a stop string in the decoded text of a growing token sequence, cheaply.

    Only a token whose own text contains the stop string's last character can complete it, so the
    (slow) decode of the row's tail runs only after such a token. ``candidates`` is that per-vocab
    mask, computed once per tokenizer.
    """

    def __init__(self, tokenizer, stop: str | None, vocab_size: int) -> None:
        self.stop = stop or None
        self.tokenizer = tokenizer
        self.candidates = torch.zeros(vocab_size, dtype=torch.bool)
        if self.stop is None:
            return
        n = min(vocab_size, len(tokenizer))
        pieces = tokenizer.batch_decode(
            [[i] for i in range(n)], skip_special_tokens=False, clean_up_tokenization_spaces=False
        )
        last = self.stop[-1]
        idx = [i for i, p in enumerate(pieces) if last in p]
        self.candidates[idx] = True
        # a token's text can contribute as little as one character of the stop string
        self.tail = len(self.stop) + 2

    def hit(self, tokens: Sequence[int]) -> bool:
        """Whether the decoded text of ``tokens`` (a row's generated ids so far) ends a stop string."""
        if self.stop is None:
            return False
        text = self.tokenizer.decode(
            list(tokens[-self.tail :]), skip_special_tokens=False, clean_up_tokenization_spaces=False
        )
        return self.stop in text
