"""Causal-LM policies over ``transformers`` models: sampling with log-probs, scoring, warm start.

``load_policy(PolicyConfig(...))`` builds one of: the embedded SmolLM2-135M-Instruct (``"smollm2"``),
a ``"tiny"`` Llama with a BPE tokenizer fitted to the environment's text (``fit_tiny_tokenizer``),
or any local Hugging Face model directory, as a ``CausalLMPolicy``; the ``Policy`` and
``SamplingPolicy`` protocols say what the rollout and the update need of one. Policies know
nothing of environments.
"""

from gaca.policy.artifact import ArtifactError, PolicyArtifact, fingerprint
from gaca.policy.config import PRESETS, PolicyConfig, resolve_cache_dir
from gaca.policy.loading import (
    DeviceNotAvailableError,
    ModelNotFoundError,
    check_policy_source,
    convert_smollm2,
    load_policy,
    smollm2_gguf_path,
)
from gaca.policy.policy import CausalLMPolicy, SampleOutput, ScoreOutput
from gaca.policy.protocol import Policy, SampledResponses, SamplingPolicy
from gaca.policy.sampling import sampling_logprobs
from gaca.policy.sft import sft_loss, sft_warm_start
from gaca.policy.tokenizer import fit_tiny_tokenizer

__all__ = [
    "PRESETS",
    "ArtifactError",
    "CausalLMPolicy",
    "DeviceNotAvailableError",
    "ModelNotFoundError",
    "Policy",
    "PolicyArtifact",
    "PolicyConfig",
    "SampleOutput",
    "SampledResponses",
    "SamplingPolicy",
    "ScoreOutput",
    "check_policy_source",
    "convert_smollm2",
    "fingerprint",
    "fit_tiny_tokenizer",
    "load_policy",
    "resolve_cache_dir",
    "sampling_logprobs",
    "sft_loss",
    "sft_warm_start",
    "smollm2_gguf_path",
]
