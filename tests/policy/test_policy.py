"""CausalLMPolicy.sample / CausalLMPolicy.score on the tiny preset and on a local random Llama directory."""

from __future__ import annotations

import pytest
import torch

from gaca.policy import (
    CausalLMPolicy,
    ModelNotFoundError,
    Policy,
    PolicyArtifact,
    PolicyConfig,
    SamplingPolicy,
    load_policy,
)
from gaca.testing.generate_baseline import generate_baseline


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@pytest.fixture
def llama_policy(llama_dir, cache_dir):
    return load_policy(PolicyConfig(model=llama_dir, cache_dir=cache_dir))


@pytest.mark.parametrize("which", ["tiny", "llama"])
@pytest.mark.parametrize("temperature", [1.0, 0.6])
def test_sampled_logprobs_equal_teacher_forced(which, temperature, request, corpus, monkeypatch):
    from transformers import cache_utils

    policy = request.getfixturevalue("tiny_policy" if which == "tiny" else "llama_policy")
    prompts = corpus[0][:12]
    pruned: list[int] = []
    select = cache_utils.DynamicCache.batch_select_indices

    def spy(cache, indices):
        pruned.append(len(indices))
        return select(cache, indices)

    monkeypatch.setattr(cache_utils.DynamicCache, "batch_select_indices", spy)
    # stop on a frequent character so that rows end at different times (exercises cache pruning)
    out = policy.sample(prompts, max_new_tokens=20, temperature=temperature, stop="e", generator=_gen())
    assert out.response_ids.shape == out.response_mask.shape == out.logprobs.shape
    lengths = out.response_mask.sum(1)
    assert lengths.min() < lengths.max(), "rows should finish at different steps"
    assert pruned and all(0 < n < len(prompts) for n in pruned), "finished rows should leave the batch"
    with torch.no_grad():
        sc = policy.score(out.prompt_ids, out.response_ids, out.response_mask, temperature=temperature,
                          with_entropy=True)
    torch.testing.assert_close(sc.logprobs, out.logprobs, atol=1e-4, rtol=1e-4)
    # the entropy of each token's sampling distribution, as the rollout records it for the step table
    torch.testing.assert_close(sc.entropy, out.entropy, atol=1e-4, rtol=1e-4)
    assert (out.logprobs[~out.response_mask] == 0).all() and (out.entropy[~out.response_mask] == 0).all()
    assert (out.logprobs[out.response_mask] <= 0).all()


def test_top_p_logprobs_are_renormalized(tiny_policy, corpus):
    out = tiny_policy.sample(corpus[0][:8], max_new_tokens=12, top_p=0.5, generator=_gen())
    with torch.no_grad():
        full = tiny_policy.score(out.prompt_ids, out.response_ids, out.response_mask).logprobs
    m = out.response_mask
    # q = p / mass(nucleus) >= p, and equality only when the nucleus is the whole vocabulary
    assert (out.logprobs[m] >= full[m] - 1e-5).all()
    assert (out.logprobs[m] > full[m] + 1e-3).any()


def test_seeded_determinism(tiny_policy, corpus):
    prompts = corpus[0][:6]
    a = tiny_policy.sample(prompts, max_new_tokens=16, generator=_gen(3))
    b = tiny_policy.sample(prompts, max_new_tokens=16, generator=_gen(3))
    c = tiny_policy.sample(prompts, max_new_tokens=16, generator=_gen(4))
    assert torch.equal(a.response_ids, b.response_ids) and torch.equal(a.logprobs, b.logprobs)
    assert a.texts == b.texts
    assert not torch.equal(a.response_ids, c.response_ids)


def test_same_seed_same_init(tiny_config, tiny_tokenizer):
    a = load_policy(tiny_config(seed=5), tokenizer=tiny_tokenizer)
    b = load_policy(tiny_config(seed=5), tokenizer=tiny_tokenizer)
    c = load_policy(tiny_config(seed=6), tokenizer=tiny_tokenizer)
    sa, sb, sc = a.model.state_dict(), b.model.state_dict(), c.model.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert not all(torch.equal(sa[k], sc[k]) for k in sa)


def test_stop_eos_and_length(tiny_policy, corpus):
    tok = tiny_policy.tokenizer
    out = tiny_policy.sample(corpus[0][:16], max_new_tokens=10, stop="a", generator=_gen(1))
    reasons = set(out.finish_reasons)
    assert "stop" in reasons and "length" in reasons
    for i, reason in enumerate(out.finish_reasons):
        ids = out.response_ids[i, out.response_mask[i]].tolist()
        text = tok.decode(ids)
        if reason == "stop":
            assert "a" in text and "a" not in tok.decode(ids[:-1])
        elif reason == "length":
            assert len(ids) == 10 and "a" not in text
        else:
            assert ids[-1] in tiny_policy.eos_ids.tolist()
    assert out.forward_passes == int(out.response_mask.sum(1).max())
    assert out.texts[0] == tok.decode(out.response_ids[0, out.response_mask[0]], skip_special_tokens=True)


def test_eos_stops_a_row(tiny_policy, corpus):
    # make eos the most likely token by a large bias on its output-embedding row... via logits hook
    eos = tiny_policy.tokenizer.eos_token_id
    head = tiny_policy.model.get_output_embeddings()

    def bias(_module, _inp, out):
        out = out.clone()
        out[..., eos] += 50.0
        return out

    handle = head.register_forward_hook(bias)
    try:
        out = tiny_policy.sample(corpus[0][:3], max_new_tokens=8, generator=_gen())
    finally:
        handle.remove()
    assert out.finish_reasons == ["eos"] * 3
    assert out.response_mask.sum().item() == 3 and out.forward_passes == 1
    assert out.texts == ["", "", ""]


def test_greedy_is_deterministic_without_generator(tiny_policy, corpus):
    a = tiny_policy.sample(corpus[0][:4], max_new_tokens=8, temperature=0)
    b = tiny_policy.sample(corpus[0][:4], max_new_tokens=8, temperature=0)
    assert torch.equal(a.response_ids, b.response_ids)
    assert (a.logprobs == 0).all()


@pytest.mark.parametrize("which", ["tiny", "llama"])
def test_padding_does_not_change_scores(which, request, corpus):
    policy = request.getfixturevalue("tiny_policy" if which == "tiny" else "llama_policy")
    short, long = corpus[0][0], corpus[0][3] + " and a much longer prompt than the first one"
    out = policy.sample([short, long], max_new_tokens=12, stop=None, generator=_gen())
    with torch.no_grad():
        both = policy.score(out.prompt_ids, out.response_ids, out.response_mask).logprobs
        n0 = int(out.response_mask[0].sum())
        alone = policy.score(out.prompt_ids[:1], out.response_ids[:1, :n0], out.response_mask[:1, :n0]).logprobs
        # extra right padding columns
        ids = torch.cat([out.response_ids, torch.zeros(2, 5, dtype=torch.long)], 1)
        mask = torch.cat([out.response_mask, torch.zeros(2, 5, dtype=torch.bool)], 1)
        wide = policy.score(out.prompt_ids, ids, mask).logprobs
    torch.testing.assert_close(both[0, :n0], alone[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(wide[:, : both.shape[1]], both, atol=1e-5, rtol=1e-5)
    assert (wide[:, both.shape[1] :] == 0).all()


def test_score_grad_entropy_and_reference(tiny_policy, corpus):
    out = tiny_policy.sample(corpus[0][:4], max_new_tokens=10, generator=_gen())
    sc = tiny_policy.score(out.prompt_ids, out.response_ids, out.response_mask, with_entropy=True)
    assert sc.logprobs.requires_grad
    sc.logprobs.sum().backward()
    grads = [p.grad for p in tiny_policy.trainable_parameters()]
    assert all(g is not None for g in grads) and any(float(g.abs().sum()) > 0 for g in grads)
    # entropy of the next-token distribution, checked against a direct computation
    ent = sc.entropy
    assert ent is not None and (ent[out.response_mask] >= 0).all()
    assert (ent[out.response_mask] <= torch.log(torch.tensor(float(tiny_policy.vocab_size))) + 1e-4).all()
    assert (ent[~out.response_mask] == 0).all()
    ref = tiny_policy.score(out.prompt_ids, out.response_ids, out.response_mask, reference=True)
    assert not ref.logprobs.requires_grad
    torch.testing.assert_close(ref.logprobs, sc.logprobs.detach())
    # a training step moves the policy but not the frozen reference
    opt = torch.optim.SGD(tiny_policy.trainable_parameters(), lr=1.0)
    opt.step()
    with torch.no_grad():
        moved = tiny_policy.score(out.prompt_ids, out.response_ids, out.response_mask).logprobs
        ref2 = tiny_policy.score(out.prompt_ids, out.response_ids, out.response_mask, reference=True).logprobs
    assert (moved - ref.logprobs).abs().max() > 1e-3
    torch.testing.assert_close(ref2, ref.logprobs)


def test_lora_reference_is_base(tiny_config, tiny_tokenizer, corpus):
    base = load_policy(tiny_config(), tokenizer=tiny_tokenizer)
    lora = load_policy(tiny_config(lora_rank=4), tokenizer=tiny_tokenizer)
    trainable = lora.trainable_parameters()
    assert trainable and all("lora_" in n for n, p in lora.model.named_parameters() if p.requires_grad)
    out = base.sample(corpus[0][:4], max_new_tokens=10, generator=_gen())
    args = (out.prompt_ids, out.response_ids, out.response_mask)
    with torch.no_grad():
        b = base.score(*args).logprobs
        torch.testing.assert_close(lora.score(*args).logprobs, b)  # B = 0 at init
        for p in trainable:
            p.add_(0.3 * torch.randn_like(p))
        moved = lora.score(*args).logprobs
        ref = lora.score(*args, reference=True).logprobs
    assert (moved - b).abs().max() > 1e-3
    torch.testing.assert_close(ref, b)
    # reset_reference folds the adapters into the base: the reference becomes the current policy
    lora.reset_reference()
    with torch.no_grad():
        torch.testing.assert_close(lora.score(*args).logprobs, moved, atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(lora.score(*args, reference=True).logprobs, moved, atol=1e-5, rtol=1e-4)
    assert [id(p) for p in lora.trainable_parameters()] == [id(p) for p in trainable]


@pytest.mark.parametrize("lora_rank", [0, 4])
def test_checkpoint_roundtrip(tmp_path, tiny_config, tiny_tokenizer, corpus, lora_rank):
    pol = load_policy(tiny_config(lora_rank=lora_rank), tokenizer=tiny_tokenizer)
    with torch.no_grad():
        for p in pol.trainable_parameters():
            p.add_(0.1 * torch.randn_like(p))
    out = pol.sample(corpus[0][:3], max_new_tokens=8, generator=_gen())
    args = (out.prompt_ids, out.response_ids, out.response_mask)
    with torch.no_grad():
        cur, ref = pol.score(*args).logprobs, pol.score(*args, reference=True).logprobs
    artifact = PolicyArtifact.of(pol)
    torch.save(artifact.to_payload(), tmp_path / "policy.pt")  # what checkpoints and the warm-start cache hold
    back = PolicyArtifact.from_payload(torch.load(tmp_path / "policy.pt", weights_only=False)).build()
    assert PolicyArtifact.of(back).fingerprint == artifact.fingerprint
    fresh = load_policy(tiny_config(lora_rank=lora_rank, seed=9), tokenizer=tiny_tokenizer)
    fresh.load_state_dict(pol.state_dict())
    for other in (back, fresh):
        with torch.no_grad():
            torch.testing.assert_close(other.score(*args).logprobs, cur)
            torch.testing.assert_close(other.score(*args, reference=True).logprobs, ref)


def test_the_causal_lm_policy_implements_both_protocols(tiny_policy):
    assert isinstance(tiny_policy, CausalLMPolicy)
    assert isinstance(tiny_policy, SamplingPolicy) and isinstance(tiny_policy, Policy)


def test_generate_baseline_runs(tiny_policy, corpus):
    out = generate_baseline(tiny_policy, corpus[0][:4], max_new_tokens=6, seed=0)
    assert out.response_ids.shape[0] == 4 and 4 <= out.num_tokens <= 24
    again = generate_baseline(tiny_policy, corpus[0][:4], max_new_tokens=6, seed=0)
    assert torch.equal(out.response_ids, again.response_ids)


def test_forward_call_counter(tiny_policy, corpus):
    before = tiny_policy.forward_calls
    out = tiny_policy.sample(corpus[0][:2], max_new_tokens=5, generator=_gen())
    tiny_policy.score(out.prompt_ids, out.response_ids, out.response_mask)
    assert tiny_policy.forward_calls - before == out.forward_passes + 1


def test_errors(cache_dir, tmp_path):
    with pytest.raises(ValueError, match="tokenizer"):
        load_policy(PolicyConfig(model="tiny", cache_dir=cache_dir))
    with pytest.raises(ModelNotFoundError, match="local Hugging Face model"):
        load_policy(PolicyConfig(model=str(tmp_path / "nowhere"), cache_dir=cache_dir))
    with pytest.raises(ValueError):
        PolicyConfig(lora_rank=-1)
    with pytest.raises(ValueError):
        PolicyConfig(tiny_hidden=30, tiny_heads=4)
