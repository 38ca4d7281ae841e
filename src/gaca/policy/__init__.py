"""Causal-LM policies over ``transformers`` models: sampling with log-probs, scoring, warm start.

``load_policy(PolicyConfig(...))`` builds one of: the embedded SmolLM2-135M-Instruct (``"smollm2"``),
a ``"tiny"`` Llama with a BPE tokenizer fitted to the environment's text (``fit_tiny_tokenizer``),
or any local Hugging Face model directory. Policies know nothing of environments.
"""

from gaca.policy.baseline import GenerateOutput, generate_baseline
from gaca.policy.config import PRESETS, PolicyConfig, resolve_cache_dir
from gaca.policy.loading import (
    ModelNotFoundError,
    convert_smollm2,
    load_policy,
    load_policy_checkpoint,
    smollm2_gguf_path,
)
from gaca.policy.policy import Policy, SampleOutput, ScoreOutput
from gaca.policy.sampling import sampling_logprobs
from gaca.policy.sft import sft_loss, sft_warmstart
from gaca.policy.tokenizer import fit_tiny_tokenizer

__all__ = [
    "PRESETS",
    "GenerateOutput",
    "ModelNotFoundError",
    "Policy",
    "PolicyConfig",
    "SampleOutput",
    "ScoreOutput",
    "convert_smollm2",
    "fit_tiny_tokenizer",
    "generate_baseline",
    "load_policy",
    "load_policy_checkpoint",
    "resolve_cache_dir",
    "sampling_logprobs",
    "sft_loss",
    "sft_warmstart",
    "smollm2_gguf_path",
]
