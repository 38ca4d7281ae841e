"""The policy a run starts from: loaded, or warm-started by SFT on expert play, and the warm-start cache.

On a fresh run with ``sft.episodes > 0`` the expert plays ``sft.episodes`` train games (with
detours, ``gaca.rollout.collect_expert_examples``), the ``tiny`` model's tokenizer is fitted to
those prompts and responses, and the policy is fine-tuned on the examples. A copy of a fitted
tokenizer is written to ``run_dir/tokenizer`` for people to read; the run's checkpoints carry it.

With ``sft.cache_dir`` set, the result (a ``PolicyArtifact`` and the SFT summary) is kept in a
``WarmStartCache`` there, under a key of everything it depends on (``warm_start_key``), and a later
run with the same key loads it: the same policy, SFT paid once. Everything after the warm start
draws from its own seeded generators, so a run from the cache repeats the run that filled it exactly.
While SFT runs, its training state is kept beside the cache entry every ``sft.progress_every``
steps (``warm-start-<key>.sft-progress.pt``): a run killed during SFT and started again continues it
and caches the same warm start, bit for bit; the file goes once the warm start is cached.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from gaca.config import to_dict
from gaca.envs import ENVIRONMENTS, EnvPool
from gaca.persist import atomic_write
from gaca.policy import CausalLMPolicy, PolicyArtifact, fit_tiny_tokenizer, load_policy, sft_warm_start
from gaca.policy.artifact import write_tokenizer_files
from gaca.rollout.expert import collect_expert_examples
from gaca.train.config import TrainConfig

logger = logging.getLogger(__name__)

TOKENIZER_DIR = "tokenizer"
#: Version of the cache file's layout.
CACHE_FORMAT = 2


#: Settings that never change what a warm start computes (where caches live, how envs are run).
_NOT_IN_KEY = {"env": ("num_workers", "step_timeout", "eval_split", "num_eval_games", "cache_dir"),
               "policy": ("cache_dir", "choice_chunk_tokens"), "sft": ("cache_dir", "progress_every")}


def warm_start_key(cfg: TrainConfig) -> str:
    """A hash of everything the warm start depends on (``key_parts``)."""
    return hashlib.sha1(json.dumps(key_parts(cfg), sort_keys=True, default=str).encode()).hexdigest()[:16]


def key_parts(cfg: TrainConfig) -> dict[str, Any]:
    """Everything the warm start depends on: seed, policy, SFT, the train games, the prompt."""
    parts = {name: {k: v for k, v in to_dict(getattr(cfg, name)).items() if k not in _NOT_IN_KEY[name]}
             for name in _NOT_IN_KEY}
    parts["sft"]["thought"] = cfg.rollout.thought  # the SFT targets' thought, keyed where it was before it moved
    parts.update(seed=cfg.seed, history_length=cfg.rollout.history_length, format=1)
    # settings newer than the key: keyed only where they change the prompts (older keys stay valid)
    if cfg.rollout.action_memory:
        parts["action_memory"] = cfg.rollout.action_memory
    if not cfg.rollout.list_actions:
        parts["list_actions"] = False
    return parts


@dataclass(frozen=True)
class WarmStart:
    """A computed warm start: the policy and the SFT summary (``sft/…`` metrics)."""

    policy: PolicyArtifact
    summary: dict[str, float]


class WarmStartCache:
    """Warm starts kept in a directory, one file per ``warm_start_key`` (``warm-start-<key>.pt``).

    A file holds the policy artifact, the SFT summary and the key's inputs (``key_parts``), written
    atomically; concurrent runs that compute the same warm start write the same content.
    """

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)

    @classmethod
    def of(cls, cfg: TrainConfig) -> WarmStartCache | None:
        """The cache ``cfg.sft.cache_dir`` names; None when it names none."""
        return cls(cfg.sft.cache_dir) if cfg.sft.cache_dir else None

    def path(self, cfg: TrainConfig) -> Path:
        return self.directory / f"warm-start-{warm_start_key(cfg)}.pt"

    def load(self, cfg: TrainConfig) -> WarmStart | None:
        """``cfg``'s warm start, or None when it is not cached."""
        path = self.path(cfg)
        if not path.is_file():
            return None
        saved = torch.load(path, map_location="cpu", weights_only=False)
        if not isinstance(saved, dict) or saved.get("format") != CACHE_FORMAT:
            raise ValueError(f"{path} is not a gaca warm-start cache file of format {CACHE_FORMAT}; delete it "
                             "to recompute the warm start")
        return WarmStart(PolicyArtifact.from_payload(saved["policy"]), dict(saved["summary"]))

    def store(self, cfg: TrainConfig, warm: WarmStart) -> Path:
        """Keep ``warm`` as ``cfg``'s warm start."""
        data = {"format": CACHE_FORMAT, "key": key_parts(cfg), "policy": warm.policy.to_payload(),
                "summary": warm.summary}
        return atomic_write(self.path(cfg), lambda f: torch.save(data, f))

    def progress_path(self, cfg: TrainConfig) -> Path:
        """Where SFT towards ``cfg``'s warm start keeps its training state while it runs."""
        return self.directory / f"warm-start-{warm_start_key(cfg)}.sft-progress.pt"

    def load_progress(self, cfg: TrainConfig) -> dict[str, Any] | None:
        """The SFT state an interrupted run left for ``cfg``'s warm start; None when there is none."""
        path = self.progress_path(cfg)
        if not path.is_file():
            return None
        try:
            return torch.load(path, map_location="cpu", weights_only=False)
        except Exception as e:  # a torn file cannot occur (atomic writes), a foreign one can: start afresh
            logger.warning("ignoring unreadable SFT progress %s (%s)", path, e)
            return None

    def save_progress(self, cfg: TrainConfig, state: dict[str, Any]) -> None:
        """Keep SFT's training state ``state`` for ``cfg``'s warm start (atomically)."""
        atomic_write(self.progress_path(cfg), lambda f: torch.save(state, f))

    def clear_progress(self, cfg: TrainConfig) -> None:
        self.progress_path(cfg).unlink(missing_ok=True)

    def fingerprint(self, cfg: TrainConfig) -> str | None:
        """The fingerprint of ``cfg``'s cached warm start; None when it is not cached."""
        warm = self.load(cfg)
        return None if warm is None else warm.policy.fingerprint


def warm_start(cfg: TrainConfig, run_dir: Path) -> tuple[CausalLMPolicy, dict[str, float]]:
    """A fresh run's policy: SFT on expert play when ``sft.episodes > 0`` (or its cached result, see
    module docstring); and the ``sft/…`` summary."""
    if cfg.sft.episodes == 0:
        return load_policy(cfg.policy), {}
    cache = WarmStartCache.of(cfg)
    cached = cache.load(cfg) if cache is not None else None
    if cached is not None:
        policy, summary = cached.policy.build(config=cfg.policy), {**cached.summary, "sft/cached": 1.0}
        logger.info("warm start loaded from the cache %s", cache.path(cfg))
    else:
        policy, summary = _fresh_warm_start(cfg, cache)
        if cache is not None:
            cache.store(cfg, WarmStart(PolicyArtifact.of(policy), summary))
            cache.clear_progress(cfg)
    files = policy.tokenizer_files()
    if files is not None:
        write_tokenizer_files(files, run_dir / TOKENIZER_DIR)
    return policy, summary


def _fresh_warm_start(cfg: TrainConfig, cache: WarmStartCache | None) -> tuple[CausalLMPolicy, dict[str, float]]:
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
    policy = load_policy(cfg.policy, tokenizer=tokenizer)
    examples = [(policy.build_prompt(p), r) for p, r in data.examples]
    progress = {} if cache is None else dict(  # an interrupted SFT continues where it stopped
        progress=cache.load_progress(cfg), save_progress=lambda state: cache.save_progress(cfg, state),
        progress_every=cfg.sft.progress_every)
    stats = sft_warm_start(policy, examples, steps=cfg.sft.steps, lr=cfg.sft.lr, batch_size=cfg.sft.batch_size,
                          seed=cfg.seed, lr_schedule=cfg.sft.lr_schedule, **progress)
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


__all__ = ["CACHE_FORMAT", "TOKENIZER_DIR", "WarmStart", "WarmStartCache", "key_parts", "warm_start", "warm_start_key"]
