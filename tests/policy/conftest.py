"""Shared fixtures: a small ALFWorld-like corpus, the tiny tokenizer and policies built on it."""

from __future__ import annotations

import pytest
import torch

from gaca.policy import PolicyConfig, fit_tiny_tokenizer, load_policy

OBJECTS = ["mug", "apple", "knife", "book", "pen", "towel"]
PLACES = ["cabinet", "desk", "drawer", "shelf", "countertop", "fridge"]


def make_corpus(n: int = 120, seed: int = 0) -> tuple[list[str], list[str]]:
    """Prompts and expert responses of a toy household task (deterministic in ``seed``)."""
    g = torch.Generator().manual_seed(seed)
    prompts, responses = [], []
    for i in range(n):
        o = OBJECTS[int(torch.randint(len(OBJECTS), (1,), generator=g))]
        p = PLACES[int(torch.randint(len(PLACES), (1,), generator=g))]
        k = int(torch.randint(1, 4, (1,), generator=g))
        history = " ".join(f"You arrive at {PLACES[j % 6]} {j % 3 + 1}." for j in range(i % 4))
        prompts.append(
            f"Your task is to: put a {o} in {p} {k}.\n{history}\nYou see a {o} 1.\n"
            f"Admissible actions: go to {p} {k}, take {o} 1, look\nYour response:"
        )
        responses.append(f"<think>The {o} goes to {p} {k}.</think><action>go to {p} {k}</action>")
    return prompts, responses


@pytest.fixture(scope="session")
def corpus() -> tuple[list[str], list[str]]:
    return make_corpus()


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("gaca_cache"))


@pytest.fixture(scope="session")
def tiny_tokenizer(corpus, cache_dir):
    prompts, responses = corpus
    return fit_tiny_tokenizer(prompts + responses, 600, cache_dir=cache_dir)


@pytest.fixture(scope="session")
def tiny_config(cache_dir):
    """Factory: the PolicyConfig of a very small tiny preset, with overrides."""

    def make(**kw) -> PolicyConfig:
        base = dict(model="tiny", cache_dir=cache_dir, tiny_hidden=64, tiny_layers=2, tiny_heads=4, seed=0)
        base.update(kw)
        return PolicyConfig(**base)

    return make


@pytest.fixture
def tiny_policy(tiny_config, tiny_tokenizer):
    return load_policy(tiny_config(), tokenizer=tiny_tokenizer)


@pytest.fixture(scope="session")
def llama_dir(tmp_path_factory, tiny_tokenizer) -> str:
    """A local Hugging Face model directory: a random LlamaConfig model plus the tiny tokenizer."""
    from transformers import LlamaConfig, LlamaForCausalLM

    d = tmp_path_factory.mktemp("llama_dir")
    cfg = LlamaConfig(
        vocab_size=len(tiny_tokenizer), hidden_size=48, intermediate_size=96, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512, tie_word_embeddings=False,
        bos_token_id=tiny_tokenizer.bos_token_id, eos_token_id=tiny_tokenizer.eos_token_id,
        pad_token_id=tiny_tokenizer.pad_token_id,
    )
    torch.manual_seed(1)
    LlamaForCausalLM(cfg).save_pretrained(d)
    tiny_tokenizer.save_pretrained(d)
    return str(d)
