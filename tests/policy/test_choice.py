"""Choosing among candidates: packed one-pass scoring against a slow one-candidate-at-a-time reference."""

from __future__ import annotations

import pytest
import torch

from gaca.policy import PolicyConfig, load_policy
from gaca.policy.choice import (
    ChoiceSet,
    choice_entropy,
    choice_logits,
    choice_logprobs,
    common_prefix_length,
    pack_choices,
    split_shared_prefix,
)

# Candidates that share token prefixes, one that is a prefix of another ("desk 1" / "desk 10"), a
# decision with a single candidate, and one whose candidates differ only at the end.
CANDIDATES = [
    ["go to desk 1", "go to desk 10", "take mug 1 from desk 1", "look", "go to drawer 2"],
    ["look"],
    ["go to shelf 2", "go to shelf 2 now"],
    ["put pen 1 in/on cabinet 3", "put pen 1 in/on cabinet 30", "put pen 1 in/on countertop 1"],
]


def responses(actions: list[str]) -> list[str]:
    return [f"<think></think><action>{a}</action>" for a in actions]


def reference_scores(policy, prompt: str, candidates: list[str], shared: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Each candidate scored alone: the prompt and the whole response re-encoded, one forward pass per
    candidate. Returns (sum over the candidate's own tokens after the ``shared`` common ones, their count)."""
    sums, counts = [], []
    for text in candidates:
        ids = policy.encode_response(text)[None]
        logp = policy.score([policy.encode_prompt(prompt)], ids, torch.ones_like(ids, dtype=torch.bool)).logprobs[0]
        sums.append(logp[shared:].sum())
        counts.append(ids.shape[1] - shared)
    return torch.stack(sums), torch.tensor(counts)


@pytest.fixture(params=["tiny", "llama-eager"])
def any_policy(request, tiny_config, tiny_tokenizer, llama_dir, cache_dir):
    if request.param == "tiny":
        return load_policy(tiny_config(), tokenizer=tiny_tokenizer)
    policy = load_policy(PolicyConfig(model=llama_dir, cache_dir=cache_dir))
    policy.model.config._attn_implementation = "eager"  # the additive-mask path
    return policy


@pytest.mark.parametrize("how", ["sum", "mean"])
@pytest.mark.parametrize("temperature", [1.0, 0.4])
def test_choice_logprobs_equal_one_at_a_time_reference(any_policy, corpus, how, temperature):
    policy = any_policy
    prompts = corpus[0][: len(CANDIDATES)]
    sets = policy.encode_choices(prompts, [responses(c) for c in CANDIDATES])
    with torch.no_grad():
        scores = policy.score_choices(sets)
        logp = choice_logprobs(choice_logits(scores, how), scores.mask, temperature)
    for b, (prompt, cands) in enumerate(zip(prompts, CANDIDATES, strict=True)):
        full = [policy.encode_response(r).tolist() for r in responses(cands)]
        shared = 0 if len(full) == 1 else common_prefix_length(full)
        with torch.no_grad():
            ref_sum, ref_count = reference_scores(policy, prompt, responses(cands), shared)
        ref_score = ref_sum if how == "sum" else ref_sum / ref_count
        ref_logp = torch.log_softmax(ref_score / temperature, 0)
        n = len(cands)
        torch.testing.assert_close(scores.num_tokens[b, :n], ref_count)
        torch.testing.assert_close(scores.logprob_sum[b, :n], ref_sum, atol=2e-5, rtol=1e-5)
        torch.testing.assert_close(logp[b, :n], ref_logp, atol=2e-5, rtol=1e-5)
        assert torch.isinf(logp[b, n:]).all() and not scores.mask[b, n:].any()
    assert logp[1, 0] == 0.0  # a single candidate is chosen with probability 1


def test_chunked_packing_gives_the_same_scores(tiny_config, tiny_tokenizer, corpus):
    policy = load_policy(tiny_config(), tokenizer=tiny_tokenizer)
    sets = policy.encode_choices(corpus[0][:4], [responses(c) for c in CANDIDATES])
    with torch.no_grad():
        whole = policy.score_choices(sets)
        policy.config.choice_chunk_tokens = 3  # most candidates get a packed row (and a prompt copy) of their own
        assert len(pack_choices(sets, policy.pad_id, chunk_tokens=3).input_ids) > len(sets)
        parts = policy.score_choices(sets)
    torch.testing.assert_close(parts.logprob_sum, whole.logprob_sum, atol=1e-5, rtol=1e-5)
    assert torch.equal(parts.num_tokens, whole.num_tokens)


def test_gradient_equals_the_references(tiny_config, tiny_tokenizer, corpus):
    # d/dθ of Σ_b log π(a_b | s_b): packed scoring against the one-at-a-time reference.
    prompts = corpus[0][: len(CANDIDATES)]
    chosen = [1, 0, 1, 2]
    grads = []
    for packed in (True, False):
        policy = load_policy(tiny_config(), tokenizer=tiny_tokenizer)
        if packed:
            sets = policy.encode_choices(prompts, [responses(c) for c in CANDIDATES])
            scores = policy.score_choices(sets)
            logp = choice_logprobs(choice_logits(scores, "sum"), scores.mask, 0.7)
            total = logp.gather(1, torch.tensor(chosen)[:, None]).sum()
        else:
            total = torch.zeros(())
            for prompt, cands, c in zip(prompts, CANDIDATES, chosen, strict=True):
                sums, _ = reference_scores(policy, prompt, responses(cands), 0)
                total = total + torch.log_softmax(sums / 0.7, 0)[c]
        total.backward()
        grads.append(torch.cat([p.grad.flatten() for p in policy.trainable_parameters()]))
    assert grads[0].abs().sum() > 0
    torch.testing.assert_close(grads[0], grads[1], atol=1e-5, rtol=1e-4)


def test_packed_mask_keeps_candidates_apart():
    sets = [ChoiceSet(torch.tensor([5, 6]), (torch.tensor([7, 8]), torch.tensor([9]))),
            ChoiceSet(torch.tensor([5]), (torch.tensor([3]),))]
    p = pack_choices(sets, pad_id=0)
    # row 0: [5 6 | 7 8 | 9], row 1: [pad 5 | 3 | pad pad]
    assert p.input_ids.tolist() == [[5, 6, 7, 8, 9], [0, 5, 3, 0, 0]]
    assert p.position_ids[0].tolist() == [0, 1, 2, 3, 2] and p.position_ids[1, 1:3].tolist() == [0, 1]
    a = p.allowed[0, 0]
    assert a[4].tolist() == [True, True, False, False, True]  # candidate 2 sees the prompt and itself only
    assert a[3].tolist() == [True, True, True, True, False]
    assert p.allowed[1, 0, 2].tolist() == [False, True, True, False, False]  # no padding
    assert p.token_id.tolist() == [7, 8, 9, 3]
    # kept logits start at the prompt's last position (index 0), which predicts every first token; token 8
    # (position 3) is predicted from position 2, kept index 1
    assert p.token_logit.tolist() == [0, 1, 0, 0]
    assert p.token_candidate.tolist() == [0, 0, 1, 2]  # b * C + c with C = 2


def test_shared_prefix_and_bad_candidates():
    assert common_prefix_length([[1, 2, 3], [1, 2, 4]]) == 2
    assert common_prefix_length([[1, 2], [1, 2, 3]]) == 1  # every candidate keeps a token
    s = split_shared_prefix(torch.tensor([9]), [[1, 2, 3], [1, 2, 4]])
    assert s.prompt_ids.tolist() == [9, 1, 2] and [c.tolist() for c in s.candidates] == [[3], [4]]
    with pytest.raises(ValueError, match="at least one candidate"):
        split_shared_prefix(torch.tensor([9]), [])
    with pytest.raises(ValueError, match="no token"):
        split_shared_prefix(torch.tensor([9]), [[1], []])


def test_entropy_of_the_choice_distribution():
    logits = torch.tensor([[0.0, 0.0, 5.0], [1.0, 2.0, 0.0]])
    mask = torch.tensor([[True, True, False], [True, True, True]])
    logp = choice_logprobs(logits, mask, 1.0)
    assert choice_entropy(logp, mask)[0].item() == pytest.approx(torch.log(torch.tensor(2.0)).item())
    p = torch.softmax(logits[1], 0)
    assert choice_entropy(logp, mask)[1].item() == pytest.approx(float(-(p * p.log()).sum()), rel=1e-6)
    with pytest.raises(ValueError, match="temperature"):
        choice_logprobs(logits, mask, 0.0)


def test_choosing_with_lora_and_a_local_model_directory(tiny_config, tiny_tokenizer, llama_dir, cache_dir, corpus):
    # the HF policy path (a local model directory, its own tokenizer and sdpa attention) with LoRA adapters:
    # candidates score through the adapters, the reference is the base model, gradients reach adapters only
    policy = load_policy(PolicyConfig(model=llama_dir, cache_dir=cache_dir, lora_rank=4))
    sets = policy.encode_choices(corpus[0][:2], [responses(c) for c in CANDIDATES[:2]])
    scores = policy.score_choices(sets)
    logp = choice_logprobs(choice_logits(scores, "sum"), scores.mask, 1.0)
    logp[0, 1].backward()
    grads = {n: p.grad for n, p in policy.model.named_parameters() if p.grad is not None}
    assert grads and all("lora_" in n for n in grads)
    with torch.no_grad():
        ref = policy.score_choices(sets, reference=True)
        now = policy.score_choices(sets)
    torch.testing.assert_close(ref.logprob_sum, now.logprob_sum)  # B = 0 at init: the adapters change nothing yet
    with torch.no_grad():
        for p in policy.trainable_parameters():
            p.add_(0.05)
        moved = policy.score_choices(sets)
        still = policy.score_choices(sets, reference=True)
    assert not torch.allclose(moved.logprob_sum, ref.logprob_sum) and torch.allclose(still.logprob_sum,
                                                                                     ref.logprob_sum)
