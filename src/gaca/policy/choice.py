"""Choosing among candidate continuations: π(a | s) = softmax over a finite set of scored actions.

A decision point is a prompt and the responses the policy could give (in gaca's agents: the
response it was trained to write for each admissible action, tags included). Each candidate a is
scored as a continuation of the prompt, S_a = Σ_k log p(a_k | prompt, a_<k) at temperature 1, and

    π(a | s) = exp(score_a / T) / Σ_b exp(score_b / T),   score_a = S_a (``sum``) or S_a / |a| (``mean``),

as action-scoring LLM agents do (e.g. GLAM, Carta et al. 2023, arXiv:2302.02662). Tokens that every
candidate of a decision starts with (``<think></think><action>`` and any longer common prefix) get
the same log-prob for every candidate, so they are moved to the prompt side and scored once; |a|
counts the candidate's own tokens after that shared prefix.

The packed layout (``pack_choices``): one sequence per decision point, [left padding | prompt |
candidate 1 | candidate 2 | … | right padding], with a 4-D attention mask in which each candidate
sees the prompt and its own earlier tokens only, and position ids that restart at the prompt's end
for every candidate. One forward pass then scores every candidate of every decision point: the
prompt is encoded once per decision, nothing is re-encoded per candidate, and no KV cache is copied.
Rows longer than a token budget are split, each part repeating the prompt, so memory stays bounded.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import torch

ChoiceScore = Literal["sum", "mean"]


@dataclass(frozen=True)
class ChoiceSet:
    """One decision point, encoded: the prompt (with the candidates' shared prefix) and each candidate's own tokens."""

    prompt_ids: torch.Tensor
    """int64 [P]: the encoded prompt followed by the tokens every candidate starts with."""
    candidates: tuple[torch.Tensor, ...]
    """n int64 tensors [L_a >= 1]: each candidate's tokens after the shared prefix."""

    @property
    def size(self) -> int:
        return len(self.candidates)


def common_prefix_length(rows: Sequence[Sequence[int]]) -> int:
    """Length of the longest common prefix of token-id lists, capped at the shortest list's length − 1
    so that every list keeps at least one token of its own."""
    shortest = min(len(r) for r in rows)
    n = 0
    while n < shortest - 1 and all(r[n] == rows[0][n] for r in rows):
        n += 1
    return n


def split_shared_prefix(prompt_ids: torch.Tensor, responses: Sequence[Sequence[int]]) -> ChoiceSet:
    """The ``ChoiceSet`` of a prompt and its candidates' full token lists (shared prefix moved to the prompt).

    Raises:
      ValueError: no candidate, or a candidate with no token.
    """
    if not responses:
        raise ValueError("a decision point needs at least one candidate")
    if any(len(r) == 0 for r in responses):
        raise ValueError("a candidate tokenizes to no token")
    if len(responses) == 1:  # nothing to compare: keep the whole response as the candidate
        return ChoiceSet(prompt_ids, (torch.tensor(list(responses[0]), dtype=torch.long),))
    n = common_prefix_length(responses)
    shared = torch.tensor(list(responses[0][:n]), dtype=torch.long)
    return ChoiceSet(torch.cat([prompt_ids, shared]),
                     tuple(torch.tensor(list(r[n:]), dtype=torch.long) for r in responses))


@dataclass
class PackedChoices:
    """The packed forward input of several decision points (see module docstring).

    R packed rows of width T = W + S (W: the longest prompt, left-padded; S: the longest candidate
    run); Q candidate tokens in all.
    """

    input_ids: torch.Tensor
    """int64 [R, T]."""
    allowed: torch.Tensor
    """bool [R, 1, T, T]: query t may attend to key u (causal, a candidate sees the prompt and itself)."""
    position_ids: torch.Tensor
    """int64 [R, T]."""
    prompt_width: int
    """W: logits are needed from position W − 1 on (``logits_to_keep = T − W + 1``)."""
    token_row: torch.Tensor
    """int64 [Q]: the packed row of each candidate token."""
    token_logit: torch.Tensor
    """int64 [Q]: index into the kept logits (0 = the prompt's last position) that predicts the token."""
    token_id: torch.Tensor
    """int64 [Q]: the token."""
    token_candidate: torch.Tensor
    """int64 [Q]: flat index (decision b, candidate c) -> b * C + c of the candidate it belongs to."""
    num_decisions: int
    max_candidates: int
    """C: the most candidates of any decision point."""


def _plan_rows(sets: Sequence[ChoiceSet], chunk_tokens: int) -> list[tuple[int, list[int]]]:
    """(decision b, candidate indices) per packed row: a decision's candidates in order, split where
    their tokens would exceed ``chunk_tokens`` (each part holds at least one candidate)."""
    rows: list[tuple[int, list[int]]] = []
    for b, s in enumerate(sets):
        part: list[int] = []
        used = 0
        for c, cand in enumerate(s.candidates):
            n = int(cand.numel())
            if part and used + n > chunk_tokens:
                rows.append((b, part))
                part, used = [], 0
            part.append(c)
            used += n
        rows.append((b, part))
    return rows


def pack_choices(sets: Sequence[ChoiceSet], pad_id: int, *, chunk_tokens: int = 4096) -> PackedChoices:
    """Pack decision points into one forward input (module docstring); candidate tokens of a packed
    row are at most ``chunk_tokens`` unless a single candidate is longer."""
    if not sets:
        raise ValueError("pack_choices needs at least one decision point")
    plan = _plan_rows(sets, chunk_tokens)
    width = max(int(sets[b].prompt_ids.numel()) for b, _ in plan)
    runs = [sum(int(sets[b].candidates[c].numel()) for c in cands) for b, cands in plan]
    total = width + max(runs)
    num_rows = len(plan)
    ids = torch.full((num_rows, total), pad_id, dtype=torch.long)
    positions = torch.zeros((num_rows, total), dtype=torch.long)
    segment = torch.full((num_rows, total), -2, dtype=torch.long)  # -2 padding, -1 prompt, k candidate k of the row
    max_cands = max(s.size for s in sets)
    rows_q, logit_q, id_q, cand_q = [], [], [], []
    for r, (b, cands) in enumerate(plan):
        prompt = sets[b].prompt_ids
        p = int(prompt.numel())
        ids[r, width - p : width] = prompt
        positions[r, width - p : width] = torch.arange(p)
        segment[r, width - p : width] = -1
        start = width
        for k, c in enumerate(cands):
            cand = sets[b].candidates[c]
            n = int(cand.numel())
            ids[r, start : start + n] = cand
            positions[r, start : start + n] = torch.arange(p, p + n)
            segment[r, start : start + n] = k
            where = torch.arange(start, start + n)
            rows_q.append(torch.full((n,), r, dtype=torch.long))
            logit_q.append(torch.where(where == start, 0, where - width))  # first token: the prompt's last position
            id_q.append(cand)
            cand_q.append(torch.full((n,), b * max_cands + c, dtype=torch.long))
            start += n
    real = segment > -2
    t = torch.arange(total)
    causal = t[None, :] <= t[:, None]  # [T(query), T(key)]
    same = (segment[:, None, :] == -1) | (segment[:, None, :] == segment[:, :, None])  # key is prompt, or own candidate
    allowed = causal[None] & same & real[:, None, :]
    allowed |= torch.eye(total, dtype=torch.bool)[None]  # padding queries see themselves (never read): no empty row
    return PackedChoices(
        input_ids=ids, allowed=allowed[:, None], position_ids=positions, prompt_width=width,
        token_row=torch.cat(rows_q), token_logit=torch.cat(logit_q), token_id=torch.cat(id_q).long(),
        token_candidate=torch.cat(cand_q), num_decisions=len(sets), max_candidates=max_cands,
    )


@dataclass
class CandidateScores:
    """Per decision point b and candidate c (padded to C candidates)."""

    logprob_sum: torch.Tensor
    """float32 [B, C]: S_bc = Σ_k log p(token k | prompt, earlier tokens), 0 on padding."""
    num_tokens: torch.Tensor
    """int64 [B, C]: the candidate's own tokens (0 on padding)."""
    token_logprob: torch.Tensor
    """float32 [Q]: every candidate token's log-prob, candidate after candidate."""
    token_candidate: torch.Tensor
    """int64 [Q]: the flat index b * C + c of the candidate each token belongs to."""

    def candidate_tokens(self, b: int, c: int) -> torch.Tensor:
        """float32 [L]: the token log-probs of candidate c of decision b, in order."""
        return self.token_logprob[self.token_candidate == b * self.logprob_sum.shape[1] + c]

    @property
    def mask(self) -> torch.Tensor:
        """bool [B, C]: a real candidate."""
        return self.num_tokens > 0


def choice_logits(scores: CandidateScores, how: ChoiceScore) -> torch.Tensor:
    """[B, C] score_a: the summed token log-prob (``sum``) or its mean over the candidate's tokens (``mean``)."""
    if how == "sum":
        return scores.logprob_sum
    if how == "mean":
        return scores.logprob_sum / scores.num_tokens.clamp_min(1)
    raise ValueError(f"choice score must be 'sum' or 'mean', got {how!r}")


def choice_logprobs(logits: torch.Tensor, mask: torch.Tensor, temperature: float) -> torch.Tensor:
    """log π(a | s) = log_softmax(score / T) over each row's real candidates; −inf on padding.

    Args:
      logits: float [B, C] candidate scores (``choice_logits``).
      mask: bool [B, C] real candidates (>= 1 per row).
      temperature: T > 0.
    Returns:
      float [B, C].
    """
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    z = (logits / temperature).masked_fill(~mask, float("-inf"))
    return torch.log_softmax(z, dim=-1)


def choice_entropy(logprobs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """[B] H(π(· | s)) = −Σ_a π(a|s) log π(a|s) over each row's real candidates."""
    safe = torch.where(mask, logprobs, torch.zeros((), dtype=logprobs.dtype, device=logprobs.device))
    return -(safe.exp() * safe).masked_fill(~mask, 0.0).sum(-1)


__all__ = [
    "CandidateScores",
    "ChoiceScore",
    "ChoiceSet",
    "PackedChoices",
    "choice_entropy",
    "choice_logits",
    "choice_logprobs",
    "common_prefix_length",
    "pack_choices",
    "split_shared_prefix",
]
