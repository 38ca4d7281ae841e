"""The ``tiny`` preset's tokenizer: a compact byte-level BPE fitted to the environment's own text.

Byte-level, so any string round-trips (no unknown token). The agent's response tags
(``<think>``, ``</think>``, ``<action>``, ``</action>``) are single tokens, which makes the stop
check of the sampler a token-id comparison for the tiny model.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Sequence

from transformers import PreTrainedTokenizerFast

from gaca.persist import atomic_directory
from gaca.policy.config import resolve_cache_dir

logger = logging.getLogger(__name__)

PAD, BOS, EOS = "<pad>", "<bos>", "<eos>"
SPECIAL_TOKENS = (PAD, BOS, EOS)
#: Non-special tokens added whole (they decode to their text).
TAG_TOKENS = ("<think>", "</think>", "<action>", "</action>")
_FORMAT_VERSION = "tiny-bpe-v1"


def tokenizer_key(texts: Sequence[str], vocab_size: int, whole: Sequence[str] = ()) -> str:
    """Stable hash of the fitting inputs (texts in order, vocabulary size, whole tokens, format version)."""
    h = hashlib.sha256()
    h.update(f"{_FORMAT_VERSION}\0{vocab_size}\0{len(texts)}\0".encode())
    if whole:  # keys of tokenizers fitted without whole tokens are unchanged
        h.update(("\0whole\0" + "\0".join(whole) + "\0").encode())
    for t in texts:
        b = t.encode("utf-8")
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    return h.hexdigest()[:16]


def _wrap(tokenizer_file: str) -> PreTrainedTokenizerFast:
    tok = PreTrainedTokenizerFast(
        tokenizer_file=tokenizer_file, bos_token=BOS, eos_token=EOS, pad_token=PAD, padding_side="left"
    )
    return tok


def _train(texts: Sequence[str], vocab_size: int, whole: Sequence[str] = ()):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(list(texts), trainer=trainer, length=len(texts))
    tok.add_tokens(list(TAG_TOKENS))
    tok.add_tokens(list(whole))  # matched before BPE: each is one token wherever it appears
    bos_id = tok.token_to_id(BOS)
    tok.post_processor = processors.TemplateProcessing(single=f"{BOS} $A", special_tokens=[(BOS, bos_id)])
    return tok


def fit_tiny_tokenizer(
    texts: Sequence[str], vocab_size: int, *, cache_dir: str | os.PathLike[str] | None = None,
    whole: Sequence[str] = (),
) -> PreTrainedTokenizerFast:
    """Fit (or load from cache) a byte-level BPE tokenizer on ``texts``.

    The result is cached under ``<cache>/tokenizers/tiny-<hash>`` where the hash covers the texts (in
    order) and ``vocab_size``; the directory is written atomically (temp dir, then rename), so
    concurrent processes at worst fit twice. Encoding adds ``<bos>`` in front
    (``add_special_tokens=True``); padding is on the left.

    Args:
      texts:      the corpus, e.g. every prompt and expert response of the environment.
      vocab_size: target vocabulary size including the 256 byte symbols and the special tokens.
      whole:      strings added as one token each, on top of ``vocab_size`` (an environment's names,
                  e.g. WebShop's product ids: see ``PolicyConfig.tiny_whole_names``).
      cache_dir:  see :class:`gaca.policy.PolicyConfig` ``cache_dir``.
    Returns:
      a ``transformers`` fast tokenizer with ``bos/eos/pad`` set.
    """
    if not texts:
        raise ValueError("fit_tiny_tokenizer needs at least one text")
    minimum = 256 + len(SPECIAL_TOKENS)
    if vocab_size < minimum:
        raise ValueError(f"vocab_size must be >= {minimum} (byte alphabet + specials), got {vocab_size}")
    root = resolve_cache_dir(cache_dir) / "tokenizers"
    target = root / f"tiny-{tokenizer_key(texts, vocab_size, whole)}"
    tok_file = target / "tokenizer.json"
    if tok_file.is_file():
        logger.debug("loading cached tiny tokenizer %s", target)
        return _wrap(str(tok_file))
    logger.info("fitting tiny BPE tokenizer (vocab %d) on %d texts", vocab_size, len(texts))
    raw = _train(texts, vocab_size, whole)
    with atomic_directory(target) as tmp:  # another process may win the race: its copy is the same
        raw.save(str(tmp / "tokenizer.json"))
    return _wrap(str(tok_file))
