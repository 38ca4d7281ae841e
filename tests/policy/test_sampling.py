"""The sampling distribution (temperature + top-p) and the stop-string detector."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gaca.policy import sampling_logprobs
from gaca.policy.sampling import StopStrings


def nucleus_reference(logits: list[float], temperature: float, top_p: float) -> list[float]:
    """Loop version written from the docstring: smallest top set with mass >= top_p, renormalized."""
    z = [x / temperature for x in logits]
    m = max(z)
    p = [math.exp(v - m) for v in z]
    s = sum(p)
    p = [v / s for v in p]
    order = sorted(range(len(p)), key=lambda i: -p[i])
    kept, mass = [], 0.0
    for i in order:
        if kept and mass >= top_p:
            break
        kept.append(i)
        mass += p[i]
    out = [-math.inf] * len(p)
    for i in kept:
        out[i] = math.log(p[i] / mass)
    return out


@pytest.mark.parametrize("vocab", [1, 2, 7, 50])
@pytest.mark.parametrize("top_p", [0.1, 0.5, 0.9, 1.0])
@pytest.mark.parametrize("temperature", [0.5, 1.0, 2.0])
def test_matches_loop_reference(vocab, top_p, temperature):
    g = torch.Generator().manual_seed(vocab)
    logits = torch.randn(4, vocab, generator=g, dtype=torch.float64) * 3
    got = sampling_logprobs(logits, temperature, top_p)
    for row in range(4):
        ref = torch.tensor(nucleus_reference(logits[row].tolist(), temperature, top_p), dtype=torch.float64)
        assert torch.equal(torch.isinf(got[row]), torch.isinf(ref))
        fin = ~torch.isinf(ref)
        torch.testing.assert_close(got[row][fin].double(), ref[fin], atol=1e-5, rtol=1e-5)


def test_top_p_one_is_log_softmax():
    logits = torch.randn(3, 11, generator=torch.Generator().manual_seed(0))
    assert torch.equal(sampling_logprobs(logits, 0.7, 1.0), torch.log_softmax(logits / 0.7, -1))


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.floats(-30, 30), min_size=1, max_size=40),
    st.floats(0.05, 1.0),
    st.floats(0.1, 5.0),
)
def test_normalized_and_finite(logits, top_p, temperature):
    lp = sampling_logprobs(torch.tensor([logits]), temperature, top_p)
    assert not torch.isnan(lp).any()
    assert math.isclose(float(lp.exp().sum()), 1.0, rel_tol=1e-4)
    assert torch.isfinite(lp).any()  # the most likely token is always kept


def test_rejects_bad_arguments():
    with pytest.raises(ValueError):
        sampling_logprobs(torch.zeros(1, 3), 0.0, 1.0)
    with pytest.raises(ValueError):
        sampling_logprobs(torch.zeros(1, 3), 1.0, 0.0)


def test_stop_string_split_over_tokens(tiny_tokenizer):
    # with the tiny tokenizer "</action>" is one token; "go to" spans several
    stop = StopStrings(tiny_tokenizer, "o t", len(tiny_tokenizer))
    ids = tiny_tokenizer("<think>x</think><action>go to desk 1</action>", add_special_tokens=False).input_ids
    hits = [stop.hit(ids[: k + 1]) for k in range(len(ids))]
    first = hits.index(True)
    text_before = tiny_tokenizer.decode(ids[:first])
    assert "o t" not in text_before and "o t" in tiny_tokenizer.decode(ids[: first + 1])
    assert bool(stop.candidates[ids[first]])  # the completing token is a candidate
    whole = StopStrings(tiny_tokenizer, "</action>", len(tiny_tokenizer))
    assert [whole.hit(ids[: k + 1]) for k in range(len(ids))] == [False] * (len(ids) - 1) + [True]
    assert not StopStrings(tiny_tokenizer, None, len(tiny_tokenizer)).hit(ids)
