"""The policy a run starts from: loaded, or warm-started by SFT on expert play.

On a fresh run with ``sft.episodes > 0`` the expert plays ``sft.episodes`` train games (with
detours, ``gaca.rollout.collect_expert_examples``), the ``tiny`` model's tokenizer is fitted to
those prompts and responses and saved under ``run_dir/tokenizer`` (a resumed run and ``gaca eval``
load it from there), and the policy is fine-tuned on the examples.
"""

from __future__ import annotations

import logging
import tempfile
import time
from pathlib import Path
from typing import Any

from gaca.envs import EnvPool
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


def warm_start(cfg: TrainConfig, run_dir: Path) -> tuple[CausalLMPolicy, dict[str, float]]:
    """A fresh run's policy: SFT on expert play when ``sft.episodes > 0``; and the ``sft/…`` summary."""
    if cfg.sft.episodes == 0:
        return load_policy(cfg.policy), {}
    t0 = time.perf_counter()
    num_games = cfg.env.num_train_games
    with EnvPool.for_split(cfg.env, cfg.env.train_split, min(cfg.sft.episodes, 16), num_games=num_games,
                           expert=True) as pool:
        data = collect_expert_examples(pool, [i % num_games for i in range(cfg.sft.episodes)],
                                       history_length=cfg.rollout.history_length, thought=cfg.sft.thought,
                                       detour_prob=cfg.sft.detour_prob, seed=cfg.seed)
    tokenizer = None
    if cfg.policy.model == "tiny":
        texts = [p for p, _ in data.examples] + [r for _, r in data.examples]
        tokenizer = fit_tiny_tokenizer(texts, cfg.policy.tiny_vocab, cache_dir=cfg.policy.cache_dir)
        tokenizer.save_pretrained(str(run_dir / TOKENIZER_DIR))
    policy = load_policy(cfg.policy, tokenizer=tokenizer)
    examples = [(policy.build_prompt(p), r) for p, r in data.examples]
    stats = sft_warmstart(policy, examples, steps=cfg.sft.steps, lr=cfg.sft.lr, batch_size=cfg.sft.batch_size,
                          seed=cfg.seed)
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


__all__ = ["TOKENIZER_DIR", "load_run_policy", "run_tokenizer_files", "warm_start"]
