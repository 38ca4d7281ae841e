"""The warm-start cache: a run from the cache repeats the run that filled it, number for number."""

from __future__ import annotations

import torch

from gaca.train import train
from gaca.train.logger import read_metrics
from gaca.train.warmstart import warmstart_key
from tests.small_run import small_config

VOLATILE = ("sft/seconds", "sft/tokens_per_s", "sft/cached", "time/", "perf/")


def _stable(records):
    return [{k: v for k, v in r.items() if not k.startswith(VOLATILE)} for r in records]


def _tensors(state):
    if isinstance(state, torch.Tensor):
        return [state]
    return [t for k in sorted(state) for t in _tensors(state[k])] if isinstance(state, dict) else []


def test_a_cached_warm_start_gives_the_same_run(tmp_path, cache):
    store = tmp_path / "warmstarts"
    first = small_config(tmp_path / "a", cache, f"sft.cache_dir={str(store)!r}", "threads=1")
    train(first)
    assert [p.name for p in store.iterdir()] == [f"warmstart-{warmstart_key(first)}.pt"]
    second = small_config(tmp_path / "b", cache, f"sft.cache_dir={str(store)!r}", "threads=1", "estimator=grpo")
    assert warmstart_key(second) == warmstart_key(first)  # the estimator is not part of the warm start
    train(small_config(tmp_path / "c", cache, f"sft.cache_dir={str(store)!r}", "threads=1"))
    a, c = read_metrics(tmp_path / "a"), read_metrics(tmp_path / "c")
    assert c[0]["sft/cached"] == 1.0 and "sft/cached" not in a[0]
    assert _stable(a) == _stable(c)
    wa = torch.load(tmp_path / "a" / "checkpoint.pt", weights_only=False)["policy"]
    wc = torch.load(tmp_path / "c" / "checkpoint.pt", weights_only=False)["policy"]
    assert _tensors(wa) and all(torch.equal(x, y) for x, y in zip(_tensors(wa), _tensors(wc), strict=True))
    other = small_config(tmp_path / "d", cache, f"sft.cache_dir={str(store)!r}", "seed=1")
    assert warmstart_key(other) != warmstart_key(first)
