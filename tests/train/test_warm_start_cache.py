"""The warm-start cache: a run from the cache repeats the run that filled it, number for number."""

from __future__ import annotations

import pytest
import torch

from gaca.train import train
from gaca.train.checkpoint import load_checkpoint
from gaca.train.logger import read_metrics
from gaca.train.warm_start import WarmStartCache, warm_start_key
from tests.small_run import small_config

VOLATILE = ("sft/seconds", "sft/tokens_per_s", "sft/cached", "time/", "perf/")


def _stable(records):
    return [{k: v for k, v in r.items() if not k.startswith(VOLATILE)} for r in records]


def _tensors(state):
    if isinstance(state, torch.Tensor):
        return [state]
    return [t for k in sorted(state) for t in _tensors(state[k])] if isinstance(state, dict) else []


def test_a_cached_warm_start_gives_the_same_run(tmp_path, cache):
    store = tmp_path / "warm-starts"
    first = small_config(tmp_path / "a", cache, f"sft.cache_dir={str(store)!r}", "threads=1")
    train(first)
    assert [p.name for p in store.iterdir()] == [f"warm-start-{warm_start_key(first)}.pt"]
    second = small_config(tmp_path / "b", cache, f"sft.cache_dir={str(store)!r}", "threads=1", "estimator=grpo")
    assert warm_start_key(second) == warm_start_key(first)  # the estimator is not part of the warm start
    train(small_config(tmp_path / "c", cache, f"sft.cache_dir={str(store)!r}", "threads=1"))
    a, c = read_metrics(tmp_path / "a"), read_metrics(tmp_path / "c")
    assert c[0]["sft/cached"] == 1.0 and "sft/cached" not in a[0]
    assert _stable(a) == _stable(c)
    wa = load_checkpoint(tmp_path / "a")["policy"].state
    wc = load_checkpoint(tmp_path / "c")["policy"].state
    assert _tensors(wa) and all(torch.equal(x, y) for x, y in zip(_tensors(wa), _tensors(wc), strict=True))
    other = small_config(tmp_path / "d", cache, f"sft.cache_dir={str(store)!r}", "seed=1")
    assert warm_start_key(other) != warm_start_key(first)


def test_the_fingerprint_tells_warm_starts_apart_by_their_last_bit(tmp_path, cache):
    from gaca.policy import fingerprint

    state = {"b": torch.arange(6, dtype=torch.float32).reshape(2, 3), "a": torch.ones(4, dtype=torch.bfloat16)}
    base = fingerprint(state, {"tokenizer.json": b"{}"})
    assert fingerprint(dict(reversed(list(state.items()))), {"tokenizer.json": b"{}"}) == base  # key order
    nudged = state["b"].clone()
    nudged[1, 2] = torch.nextafter(nudged[1, 2], torch.tensor(100.0))
    assert fingerprint({**state, "b": nudged}, {"tokenizer.json": b"{}"}) != base
    assert fingerprint({**state, "b": state["b"].reshape(3, 2)}, {"tokenizer.json": b"{}"}) != base  # shape
    assert fingerprint(state, {"tokenizer.json": b"{ }"}) != base
    store = tmp_path / "warm-starts"
    cfg = small_config(tmp_path / "a", cache, f"sft.cache_dir={str(store)!r}", "threads=1", "iterations=0")
    cache = WarmStartCache.of(cfg)
    assert cache.fingerprint(cfg) is None
    train(cfg)
    saved = torch.load(store / f"warm-start-{warm_start_key(cfg)}.pt", weights_only=False)
    assert cache.fingerprint(cfg) == fingerprint(saved["policy"]["state"], saved["policy"]["tokenizer_files"])
    # the run's checkpoint carries that same policy: the fingerprint the lab pins its records to
    assert load_checkpoint(tmp_path / "a")["policy"].fingerprint == cache.fingerprint(cfg)


class _Crash(RuntimeError):
    pass


def test_a_run_interrupted_during_sft_continues_it_to_the_same_warm_start(tmp_path, cache, monkeypatch, caplog):
    steps = ("sft.steps=5", "sft.progress_every=2", "threads=1", "iterations=0")
    whole = small_config(tmp_path / "whole", cache, f"sft.cache_dir={str(tmp_path / 'w1')!r}", *steps)
    train(whole)
    expected = WarmStartCache.of(whole).fingerprint(whole)
    assert list((tmp_path / "w1").iterdir()) == [WarmStartCache.of(whole).path(whole)]  # progress removed

    store = tmp_path / "w2"
    cfg = small_config(tmp_path / "a", cache, f"sft.cache_dir={str(store)!r}", *steps)
    cache_of = WarmStartCache.of(cfg)
    keep = WarmStartCache.save_progress

    def save_then_crash(self, c, state):
        keep(self, c, state)
        if state["step"] == 4:
            raise _Crash("killed during SFT")

    monkeypatch.setattr(WarmStartCache, "save_progress", save_then_crash)
    with pytest.raises(_Crash):
        train(cfg)
    assert cache_of.load_progress(cfg)["step"] == 4 and cache_of.fingerprint(cfg) is None
    monkeypatch.undo()
    with caplog.at_level("INFO", logger="gaca.policy.sft"):
        train(small_config(tmp_path / "b", cache, f"sft.cache_dir={str(store)!r}", *steps))
    assert "SFT resumed at step 4/5" in caplog.text
    assert cache_of.fingerprint(cfg) == expected
    assert not cache_of.progress_path(cfg).exists()
