"""The policy a run starts from: loaded, or warm-started by SFT on expert play.

On a fresh run with ``sft.episodes > 0`` the expert plays ``sft.episodes`` train games (with
detours, ``gaca.rollout.collect_expert_examples``), the ``tiny`` model's tokenizer is fitted to
those prompts and responses and saved under ``run_dir/tokenizer`` (a resumed run and ``gaca eval``
load it from there), and the policy is fine-tuned on the examples.

With ``sft.cache_dir`` set, the result (weights, tokenizer, summary) is kept there under a key of
everything it depends on (``warmstart_key``), and a later run with the same key loads it: the same
policy, SFT paid once. Everything after the warm start draws from its own seeded generators, so
a run from the cache repeats the run that filled it exactly.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from gaca.config import to_dict
from gaca.envs import ENVIRONMENTS, EnvPool
from gaca.policy import CausalLMPolicy, fit_tiny_tokenizer, load_policy, sft_warmstart
from gaca.rollout.expert import collect_expert_examples
from gaca.train.checkpoint import tokenizer_files, write_tokenizer_files
from gaca.train.config import TrainConfig

logger = logging.getLogger(__name__)

TOKENIZER_DIR = "tokenizer"


def run_tokenizer_files(cfg: TrainConfig, run_dir: Path) -> dict[str, bytes] | None:
    """The files of the tokenizer the run fitted (``tiny``), for its checkpoint; None otherwise."""
    return tokenizer_files(run_dir / TOKENIZER_DIR) if cfg.policy.model == "tiny" else None


def load_run_policy(cfg: TrainConfig, run_dir: Path, payload: dict[str, Any]) -> CausalLMPolicy:
    """The policy of an existing run (its architecture; weights come from the checkpoint ``payload``).

    A ``tiny`` model's tokenizer comes from the checkpoint itself, so a later run that replaced the
    directory's ``tokenizer/`` cannot pair these weights with another tokenizer.
    """
    if cfg.policy.model != "tiny":
        return load_policy(cfg.policy)
    from transformers import AutoTokenizer

    files = payload.get("tokenizer_files")
    if files is None:  # format-1 checkpoints did not carry it
        tok_dir = run_dir / TOKENIZER_DIR
        if not tok_dir.is_dir():
            raise FileNotFoundError(f"{tok_dir} missing: cannot rebuild a tiny-model run without its tokenizer")
        logger.warning("this checkpoint predates tokenizers in checkpoints: using %s unverified", tok_dir)
        return load_policy(cfg.policy, tokenizer=AutoTokenizer.from_pretrained(str(tok_dir)))
    with tempfile.TemporaryDirectory(prefix="gaca-tokenizer-") as tmp:
        tokenizer = AutoTokenizer.from_pretrained(str(write_tokenizer_files(files, tmp)))
    return load_policy(cfg.policy, tokenizer=tokenizer)


#: Settings that never change what a warm start computes (where caches live, how envs are run).
_NOT_IN_KEY = {"env": ("num_workers", "step_timeout", "eval_split", "num_eval_games", "cache_dir"),
               "policy": ("cache_dir",), "sft": ("cache_dir",)}


def warmstart_key(cfg: TrainConfig) -> str:
    """A hash of everything the warm start depends on: seed, policy, SFT, the train games, the prompt."""
    parts = {name: {k: v for k, v in to_dict(getattr(cfg, name)).items() if k not in _NOT_IN_KEY[name]}
             for name in _NOT_IN_KEY}
    parts["sft"]["thought"] = cfg.rollout.thought  # the SFT targets' thought, keyed where it was before it moved
    parts.update(seed=cfg.seed, history_length=cfg.rollout.history_length, format=1)
    if cfg.rollout.action_memory:  # a setting newer than the key: keyed only where it changes the prompts
        parts["action_memory"] = cfg.rollout.action_memory
    return hashlib.sha1(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def fingerprint(state_dict: dict[str, Any], files: dict[str, bytes] | None = None) -> str:
    """A hash of a policy's exact weights (names, dtypes, shapes, bytes) and its tokenizer files.

    Two warm starts computed from one key on machines whose CPUs differ (e.g. AVX-512 or not) can
    differ in the last bits after thousands of SFT steps; this tells them apart.
    """
    h = hashlib.sha256()

    def visit(prefix: str, value: Any) -> None:
        if isinstance(value, dict):  # a policy's state nests its model's
            for key in sorted(value):
                visit(f"{prefix}.{key}", value[key])
        elif isinstance(value, torch.Tensor):
            flat = value.detach().cpu().contiguous().reshape(-1)
            h.update(f"{prefix}\0{value.dtype}\0{tuple(value.shape)}\0".encode())
            h.update(flat.view(torch.uint8).numpy().tobytes())
        else:
            h.update(f"{prefix}\0{value!r}\0".encode())

    visit("", state_dict)
    for name in sorted(files or {}):
        h.update(f"{name}\0".encode() + files[name])
    return h.hexdigest()[:16]


def cache_path(cfg: TrainConfig) -> Path | None:
    """Where ``cfg``'s warm start is cached (``sft.cache_dir``); None without a cache."""
    return Path(cfg.sft.cache_dir) / f"warmstart-{warmstart_key(cfg)}.pt" if cfg.sft.cache_dir else None


def cached_fingerprint(cfg: TrainConfig) -> str | None:
    """The ``fingerprint`` of the warm start cached for ``cfg`` under ``sft.cache_dir``; None when
    nothing is cached there."""
    path = cache_path(cfg)
    if path is None or not path.is_file():
        return None
    saved = torch.load(path, map_location="cpu", weights_only=False)
    return fingerprint(saved["policy"], saved["tokenizer_files"])


def _cached_warm_start(cfg: TrainConfig, run_dir: Path, path: Path) -> tuple[CausalLMPolicy, dict[str, float]]:
    from transformers import AutoTokenizer

    saved = torch.load(path, map_location="cpu", weights_only=False)
    tokenizer = None
    if saved["tokenizer_files"] is not None:
        tokenizer = AutoTokenizer.from_pretrained(str(write_tokenizer_files(saved["tokenizer_files"],
                                                                            run_dir / TOKENIZER_DIR)))
    policy = load_policy(cfg.policy, tokenizer=tokenizer)
    policy.load_state_dict(saved["policy"])
    logger.info("warm start loaded from the cache %s", path)
    return policy, {**saved["summary"], "sft/cached": 1.0}


def _save_warm_start(path: Path, policy: CausalLMPolicy, run_dir: Path, cfg: TrainConfig,
                     summary: dict[str, float]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")  # concurrent runs never share a tmp file
    torch.save({"policy": policy.state_dict(), "tokenizer_files": run_tokenizer_files(cfg, run_dir),
                "summary": summary}, tmp)
    os.replace(tmp, path)


def warm_start(cfg: TrainConfig, run_dir: Path) -> tuple[CausalLMPolicy, dict[str, float]]:
    """A fresh run's policy: SFT on expert play when ``sft.episodes > 0`` (or its cached result, see
    module docstring); and the ``sft/…`` summary."""
    if cfg.sft.episodes == 0:
        return load_policy(cfg.policy), {}
    cached = cache_path(cfg)
    if cached is not None and cached.is_file():
        return _cached_warm_start(cfg, run_dir, cached)
    policy, summary = _fresh_warm_start(cfg, run_dir)
    if cached is not None:
        _save_warm_start(cached, policy, run_dir, cfg, summary)
    return policy, summary


def _fresh_warm_start(cfg: TrainConfig, run_dir: Path) -> tuple[CausalLMPolicy, dict[str, float]]:
    t0 = time.perf_counter()
    num_games = cfg.env.num_train_games
    with EnvPool.for_split(cfg.env, cfg.env.train_split, min(cfg.sft.episodes, 16), num_games=num_games,
                           expert=True) as pool:
        data = collect_expert_examples(pool, [i % num_games for i in range(cfg.sft.episodes)],
                                       prompt=cfg.rollout.prompt_format(pool.intro), thought=cfg.rollout.thought,
                                       detour_prob=cfg.sft.detour_prob, seed=cfg.seed,
                                       repeat_prob=cfg.sft.repeat_prob)
    tokenizer = None
    if cfg.policy.model == "tiny":
        texts = [p for p, _ in data.examples] + [r for _, r in data.examples]
        whole = ENVIRONMENTS[cfg.env.name].entity_names(cfg.env) if cfg.policy.tiny_whole_names else []
        tokenizer = fit_tiny_tokenizer(texts, cfg.policy.tiny_vocab, cache_dir=cfg.policy.cache_dir, whole=whole)
        tokenizer.save_pretrained(str(run_dir / TOKENIZER_DIR))
    policy = load_policy(cfg.policy, tokenizer=tokenizer)
    examples = [(policy.build_prompt(p), r) for p, r in data.examples]
    stats = sft_warmstart(policy, examples, steps=cfg.sft.steps, lr=cfg.sft.lr, batch_size=cfg.sft.batch_size,
                          seed=cfg.seed, lr_schedule=cfg.sft.lr_schedule)
    logger.info("SFT warm start: %d examples, loss %.3f -> %.3f", len(examples), stats["loss_initial"],
                stats["loss_final"])
    return policy, {
        "sft/expert_episodes": float(data.episodes),
        "sft/expert_success": data.success_rate,
        "sft/examples": float(len(examples)),
        "sft/loss_initial": stats["loss_initial"],
        "sft/loss_final": stats["loss_final"],
        "sft/tokens_per_s": stats["tokens_per_s"],
        "sft/seconds": time.perf_counter() - t0,
    }


__all__ = ["TOKENIZER_DIR", "cache_path", "cached_fingerprint", "fingerprint", "load_run_policy", "run_tokenizer_files",
           "warm_start", "warmstart_key"]
