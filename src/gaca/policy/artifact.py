"""A policy as it is stored: the one format of a training checkpoint's policy, a cached warm start and
what ``gaca eval`` loads.

    artifact = PolicyArtifact.of(policy)         # config, weights, the tokenizer files it carries
    artifact.fingerprint                         # a hash of exactly those weights and files
    payload = artifact.to_payload()              # plain dicts and tensors, for ``torch.save``
    policy = PolicyArtifact.from_payload(payload).build()

A policy whose tokenizer comes with its model (SmolLM2, a local model directory) is rebuilt from its
config; one whose tokenizer was fitted by the run (``tiny``) carries the tokenizer's files, so
weights can never be paired with another run's tokenizer.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from gaca.policy.config import PolicyConfig
from gaca.policy.loading import load_policy
from gaca.policy.policy import CausalLMPolicy

logger = logging.getLogger(__name__)


class ArtifactError(ValueError):
    """A stored policy that is not a gaca policy artifact or does not fit this gaca."""


def fingerprint(state: dict[str, Any], files: dict[str, bytes] | None = None) -> str:
    """A hash of a policy's exact weights (names, dtypes, shapes, bytes) and its tokenizer files.

    Two warm starts computed from one config on machines whose CPUs differ (e.g. AVX-512 or not) can
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

    visit("", state)
    for name in sorted(files or {}):
        h.update(f"{name}\0".encode() + files[name])
    return h.hexdigest()[:16]


def read_tokenizer_files(directory: str | Path) -> dict[str, bytes]:
    """The files of a saved tokenizer directory, by name."""
    return {p.name: p.read_bytes() for p in sorted(Path(directory).iterdir()) if p.is_file()}


def write_tokenizer_files(files: dict[str, bytes], directory: str | Path) -> Path:
    """Write tokenizer files into ``directory`` (replacing what is there) and return it."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (directory / name).write_bytes(data)
    return directory


def load_tokenizer_files(files: dict[str, bytes]) -> Any:
    """A ``transformers`` tokenizer from its files."""
    from transformers import AutoTokenizer

    with tempfile.TemporaryDirectory(prefix="gaca-tokenizer-") as tmp:
        return AutoTokenizer.from_pretrained(str(write_tokenizer_files(files, tmp)))


@dataclass
class PolicyArtifact:
    """A stored policy (module docstring)."""

    config: PolicyConfig
    """What builds the policy's model (its architecture, source and device)."""
    state: dict[str, Any]
    """``CausalLMPolicy.state_dict()``: the weights and, for full fine-tuning, the reference's."""
    tokenizer_files: dict[str, bytes] | None
    """The files of the tokenizer the policy carries (``CausalLMPolicy.tokenizer_files``); None when the
    tokenizer comes with the model."""

    @classmethod
    def of(cls, policy: CausalLMPolicy) -> PolicyArtifact:
        """The artifact of ``policy`` as it is now (its tensors are shared, not copied)."""
        return cls(dataclasses.replace(policy.config), policy.state_dict(), policy.tokenizer_files())

    @property
    def fingerprint(self) -> str:
        """``fingerprint`` of the weights and tokenizer files."""
        return fingerprint(self.state, self.tokenizer_files)

    def build(self, *, device: str | None = None, config: PolicyConfig | None = None) -> CausalLMPolicy:
        """The policy, rebuilt: its model from ``config`` (default: the stored one, on ``device`` if
        given), the carried tokenizer, the stored weights."""
        cfg = config or self.config
        if device is not None:
            cfg = dataclasses.replace(cfg, device=device)
        tokenizer = None if self.tokenizer_files is None else load_tokenizer_files(self.tokenizer_files)
        policy = load_policy(cfg, tokenizer=tokenizer)
        if self.tokenizer_files is not None:
            policy.carry_tokenizer_files(self.tokenizer_files)
        policy.load_state_dict(self.state)
        return policy

    def to_payload(self) -> dict[str, Any]:
        """Plain dicts, bytes and tensors (what a checkpoint or the warm-start cache ``torch.save``s)."""
        return {"config": dataclasses.asdict(self.config), "state": self.state,
                "tokenizer_files": self.tokenizer_files}

    @classmethod
    def from_payload(cls, payload: Any) -> PolicyArtifact:
        """Inverse of ``to_payload``.

        Raises:
          ArtifactError: not a policy artifact's payload.
        """
        if not isinstance(payload, dict) or not {"config", "state", "tokenizer_files"} <= payload.keys():
            raise ArtifactError("not a gaca policy artifact (expected its config, state and tokenizer files)")
        try:
            config = PolicyConfig(**payload["config"])
        except (TypeError, ValueError) as e:
            raise ArtifactError(f"the stored policy config does not fit this gaca: {e}") from e
        return cls(config, payload["state"], payload["tokenizer_files"])


__all__ = ["ArtifactError", "PolicyArtifact", "fingerprint", "load_tokenizer_files", "read_tokenizer_files",
           "write_tokenizer_files"]
