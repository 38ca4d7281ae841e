"""Stable anchor keys: the same text or token sequence gives the same int64 in every process.

Python's ``hash()`` is salted per process (PYTHONHASHSEED), so it cannot key step groups that are
built on several workers or machines. We use BLAKE2b with an 8-byte digest, masked to 63 bits so
the key is a non-negative int64.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
import torch

_MASK_63 = (1 << 63) - 1


def _digest63(data: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little") & _MASK_63


def hash_text(text: str) -> int:
    """Stable 63-bit key of a text observation (UTF-8 bytes, no normalization)."""
    if not isinstance(text, str):
        raise TypeError(f"hash_text expects str, got {type(text).__name__}")
    return _digest63(text.encode("utf-8"))


def hash_tokens(tokens: torch.Tensor | Sequence[int] | np.ndarray) -> int:
    """Stable 63-bit key of a token-id sequence (its values as little-endian int64)."""
    array = np.asarray(tokens.cpu() if isinstance(tokens, torch.Tensor) else tokens, dtype="<i8").ravel()
    return _digest63(b"tok:" + array.tobytes())


__all__ = ["hash_text", "hash_tokens"]
