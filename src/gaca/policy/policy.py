"""The causal-LM policy: batched KV-cache sampling with log-probs, teacher-forced scoring, checkpoints.

Token layout shared by :meth:`CausalLMPolicy.sample` and :meth:`CausalLMPolicy.score`: prompts are left-padded to the
longest prompt P, responses follow, right-padded to L. Position ids count only real tokens
(``cumsum(attention_mask) − 1``), so padding changes neither sampled nor scored log-probs.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from gaca.policy.choice import CandidateScores, ChoiceSet, pack_choices, split_shared_prefix
from gaca.policy.config import PolicyConfig
from gaca.policy.sampling import StopStrings, draw, sampling_logprobs

logger = logging.getLogger(__name__)

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass
class SampleOutput:
    """Result of :meth:`CausalLMPolicy.sample` for B prompts."""

    prompt_ids: list[torch.Tensor]
    """Per row, int64 [P_i]: the prompt's token ids, unpadded (what :meth:`CausalLMPolicy.score` takes)."""
    response_ids: torch.Tensor
    """int64 [B, L], right-padded with the pad id; L = the longest response."""
    response_mask: torch.Tensor
    """bool [B, L], True on generated tokens (including the stop/eos token)."""
    logprobs: torch.Tensor
    """float32 [B, L], log-prob of each sampled token under the sampling distribution
    (temperature and top-p applied), 0 on padding."""
    entropy: torch.Tensor
    """float32 [B, L], entropy (nats) of the sampling distribution each token was drawn from, 0 on
    padding and under greedy decoding."""
    texts: list[str]
    """Decoded responses (special tokens such as eos removed; the stop string is kept)."""
    forward_passes: int
    """Model forward calls spent: 1 prefill + one per decode step."""
    finish_reasons: list[str] = field(default_factory=list)
    """Per row: ``"stop"`` (stop string), ``"eos"`` or ``"length"`` (``max_new_tokens`` reached)."""

    @property
    def num_tokens(self) -> int:
        """Generated tokens in total (sum of the mask)."""
        return int(self.response_mask.sum())


@dataclass
class ScoreOutput:
    """Result of :meth:`CausalLMPolicy.score`."""

    logprobs: torch.Tensor
    """float32 [B, L], log π(response token | prefix) at the given temperature, 0 on padding."""
    entropy: torch.Tensor | None
    """float32 [B, L], entropy of the temperature-scaled next-token distribution, 0 on padding; None
    unless ``with_entropy``."""


def left_pad(rows: Sequence[torch.Tensor], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Stack 1-D int64 rows left-padded: ids [B, P] and attention mask int64 [B, P]."""
    width = max(int(r.numel()) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        n = int(r.numel())
        if n:
            ids[i, width - n :] = r
            mask[i, width - n :] = 1
    return ids, mask


def positions(attention_mask: torch.Tensor) -> torch.Tensor:
    """Position ids that count real tokens only: ``cumsum(mask) − 1``, 0 on leading padding."""
    return (attention_mask.long().cumsum(-1) - 1).clamp_(min=0)


class CausalLMPolicy:
    """A causal LM with a tokenizer, a reference policy and the operations RL needs.

    Build one with :func:`gaca.policy.load_policy`. Attributes: ``model`` (the ``transformers``
    model, wrapped by ``peft`` when ``config.lora_rank > 0``), ``tokenizer``, ``config``,
    ``forward_calls`` (cumulative model forward calls of :meth:`sample` and :meth:`score`).
    The model is kept in eval mode (no dropout), so sampling and scoring see the same function.
    """

    def __init__(self, model: torch.nn.Module, tokenizer: Any, config: PolicyConfig) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.config = config
        self.model.eval()
        self.forward_calls = 0
        self._stop_cache: dict[str | None, StopStrings] = {}
        self._reference: torch.nn.Module | None = None
        gen = getattr(self._base_model(), "generation_config", None)
        eos: set[int] = set()
        for src in (getattr(gen, "eos_token_id", None), tokenizer.eos_token_id):
            if isinstance(src, int):
                eos.add(src)
            elif src is not None:
                eos.update(int(x) for x in src)
        self.eos_ids = torch.tensor(sorted(eos), dtype=torch.long)
        pad = tokenizer.pad_token_id
        if pad is None:
            pad = getattr(gen, "pad_token_id", None)
        if pad is None:
            pad = min(eos) if eos else 0
        self.pad_id = int(pad)
        self.chat = bool(getattr(tokenizer, "chat_template", None))
        self._response_tokens: dict[str, list[int]] = {}
        self._tokenizer_files: dict[str, bytes] | None = None
        if config.lora_rank == 0:
            self.reset_reference()

    # ------------------------------------------------------------------ basics
    @property
    def device(self) -> torch.device:
        """The device of the model's parameters."""
        return next(self.model.parameters()).device

    @property
    def vocab_size(self) -> int:
        """Rows of the output embedding (may exceed ``len(tokenizer)``)."""
        return int(self._base_model().get_output_embeddings().weight.shape[0])

    def _base_model(self) -> torch.nn.Module:
        if self.config.lora_rank > 0 and hasattr(self.model, "get_base_model"):
            return self.model.get_base_model()
        return self.model

    def build_prompt(self, text: str) -> str:
        """The model's input string for user message ``text``.

        Instruct models with a chat template get ``text`` as one user turn plus the assistant
        header; models without one (``tiny``) get ``text`` unchanged. :meth:`sample` and
        :func:`gaca.policy.sft_warm_start` take already-built prompts.
        """
        if not self.chat:
            return text
        return self.tokenizer.apply_chat_template(
            [{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True
        )

    def encode_prompt(self, prompt: str) -> torch.Tensor:
        """int64 [P] ids of a built prompt (a bos is added only when there is no chat template)."""
        ids = self.tokenizer(prompt, add_special_tokens=not self.chat)["input_ids"]
        return torch.tensor(ids, dtype=torch.long)

    def encode_response(self, response: str) -> torch.Tensor:
        """int64 [L] ids of a response text (no special tokens added)."""
        return torch.tensor(self.tokenizer(response, add_special_tokens=False)["input_ids"], dtype=torch.long)

    def trainable_parameters(self) -> list[torch.nn.Parameter]:
        """Parameters the optimizer updates: the LoRA adapters, or every weight when lora_rank == 0."""
        return [p for p in self.model.parameters() if p.requires_grad]

    def _forward(self, model: torch.nn.Module, **kwargs: Any) -> Any:
        self.forward_calls += 1
        return model(**kwargs)

    # ------------------------------------------------------------------ reference policy
    @contextlib.contextmanager
    def _reference_model(self) -> Iterator[torch.nn.Module]:
        if self.config.lora_rank > 0:
            with self.model.disable_adapter():
                yield self.model
        else:
            assert self._reference is not None
            yield self._reference

    def reset_reference(self) -> None:
        """Make the reference policy equal to the current policy.

        Full fine-tuning: the frozen copy is refreshed from the current weights. LoRA: the adapters'
        update is merged into the base weights and the adapters are re-initialised (B = 0) in place,
        so the parameter objects (and ``trainable_parameters()``) stay the same while the
        adapter-disabled model now equals the current policy. Called by ``sft_warm_start`` so that
        the KL reference of RL is the warm-started policy.
        """
        if self.config.lora_rank == 0:
            ref = copy.deepcopy(self.model)
            ref.eval()
            for p in ref.parameters():
                p.requires_grad_(False)
            self._reference = ref
            return
        from peft.tuners.lora import LoraLayer

        with torch.no_grad():
            for module in self.model.modules():
                if isinstance(module, LoraLayer):
                    for name in list(module.lora_A.keys()):
                        base = module.get_base_layer()
                        base.weight.add_(module.get_delta_weight(name).to(base.weight.dtype))
                        with torch.random.fork_rng(devices=[]):
                            torch.manual_seed(self.config.seed)
                            module.reset_lora_parameters(name, True)

    # ------------------------------------------------------------------ sampling
    def _stopper(self, stop: str | None) -> StopStrings:
        if stop not in self._stop_cache:
            self._stop_cache[stop] = StopStrings(self.tokenizer, stop, self.vocab_size)
        return self._stop_cache[stop]

    @torch.no_grad()
    def sample(
        self,
        prompts: list[str],
        *,
        max_new_tokens: int,
        temperature: float = 1.0,
        top_p: float = 1.0,
        stop: str | None = "</action>",
        generator: torch.Generator | None = None,
    ) -> SampleOutput:
        """Sample one response per built prompt, batched, with the KV cache.

        Each row stops after the token that completes ``stop`` in its decoded text, after an eos
        token, or after ``max_new_tokens`` tokens. Finished rows are dropped from the batch (and its
        KV cache) once a quarter of the running rows are done. ``temperature == 0`` is greedy
        decoding (its log-probs are then 0: the sampling distribution is a point mass).

        Args:
          prompts:        B built prompts (see :meth:`build_prompt`).
          max_new_tokens: length limit per response, >= 1.
          temperature:    softmax temperature, >= 0.
          top_p:          nucleus mass in (0, 1].
          stop:           stop string (None: only eos and length).
          generator:      torch RNG for the draws (None: torch's global RNG). Same generator state,
                          same prompts -> same output on CPU.
        Returns:
          :class:`SampleOutput`.
        """
        if not prompts:
            raise ValueError("sample needs at least one prompt")
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        if temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {temperature}")
        device = self.device
        stopper = self._stopper(stop)
        candidates = stopper.candidates.to(device)
        eos = self.eos_ids.to(device)
        prompt_ids = [self.encode_prompt(p) for p in prompts]
        ids, attn = left_pad(prompt_ids, self.pad_id)
        ids, attn = ids.to(device), attn.to(device)
        bsz = len(prompts)
        out_tokens = torch.full((bsz, max_new_tokens), self.pad_id, dtype=torch.long, device=device)
        out_logp = torch.zeros((bsz, max_new_tokens), dtype=torch.float32, device=device)
        out_entropy = torch.zeros((bsz, max_new_tokens), dtype=torch.float32, device=device)
        lengths = torch.zeros(bsz, dtype=torch.long)
        reasons = ["length"] * bsz
        rows = torch.arange(bsz, device=device)  # original row index of each running row
        done = torch.zeros(bsz, dtype=torch.bool, device=device)  # per running row
        pos = positions(attn)[:, -1:]
        passes = 0
        t0 = time.perf_counter()
        out = self._forward(
            self.model, input_ids=ids, attention_mask=attn, position_ids=positions(attn), use_cache=True,
            logits_to_keep=1,
        )
        passes += 1
        cache = out.past_key_values
        logits = out.logits[:, -1, :]
        for t in range(max_new_tokens):
            if temperature == 0:
                tok = logits.argmax(-1)
                lp = torch.zeros(tok.shape, dtype=torch.float32, device=device)
                ent = lp
            else:
                logq = sampling_logprobs(logits, temperature, top_p)
                tok = draw(logq, generator)
                lp = logq.gather(-1, tok[:, None]).squeeze(-1)
                ent = -torch.where(torch.isfinite(logq), logq.exp() * logq, 0.0).sum(-1)
            live = ~done
            tok = torch.where(live, tok, torch.full_like(tok, self.pad_id))
            live_rows = rows[live]
            out_tokens[live_rows, t] = tok[live]
            out_logp[live_rows, t] = lp[live]
            out_entropy[live_rows, t] = ent[live]
            lengths[live_rows.cpu()] = t + 1
            # finish checks
            is_eos = torch.isin(tok, eos) & live
            check = (candidates[tok] & live & ~is_eos).nonzero().flatten().tolist()
            new_done = is_eos.clone()
            for j in check:
                r = int(rows[j])
                if stopper.hit(out_tokens[r, : t + 1].tolist()):
                    new_done[j] = True
                    reasons[r] = "stop"
            for j in is_eos.nonzero().flatten().tolist():
                reasons[int(rows[j])] = "eos"
            done |= new_done
            if bool(done.all()) or t == max_new_tokens - 1:
                break
            n_done = int(done.sum())
            if n_done and 4 * n_done >= done.numel():
                keep = (~done).nonzero().flatten()
                cache.batch_select_indices(keep)
                rows, done, tok, attn, pos = rows[keep], done[keep], tok[keep], attn[keep], pos[keep]
            attn = torch.cat([attn, torch.ones_like(attn[:, :1])], dim=1)
            pos = pos + 1
            out = self._forward(
                self.model, input_ids=tok[:, None], attention_mask=attn, position_ids=pos,
                past_key_values=cache, use_cache=True,
            )
            passes += 1
            cache = out.past_key_values
            logits = out.logits[:, -1, :]
        width = max(1, int(lengths.max()))
        response_ids = out_tokens[:, :width].cpu()
        logprobs = out_logp[:, :width].cpu()
        entropy = out_entropy[:, :width].cpu()
        mask = torch.arange(width)[None, :] < lengths[:, None]
        texts = self.tokenizer.batch_decode(
            [response_ids[i, : int(lengths[i])].tolist() for i in range(bsz)],
            skip_special_tokens=True, clean_up_tokenization_spaces=False,
        )
        dt = time.perf_counter() - t0
        logger.debug("sampled %d tokens in %.2fs (%d forwards)", int(lengths.sum()), dt, passes)
        return SampleOutput(
            prompt_ids=prompt_ids, response_ids=response_ids, response_mask=mask, logprobs=logprobs,
            entropy=entropy, texts=texts, forward_passes=passes, finish_reasons=reasons,
        )

    # ------------------------------------------------------------------ scoring
    def score(
        self,
        prompt_ids: list[torch.Tensor],
        response_ids: torch.Tensor,
        response_mask: torch.Tensor,
        *,
        temperature: float = 1.0,
        reference: bool = False,
        with_entropy: bool = False,
    ) -> ScoreOutput:
        """Teacher-forced log-probs of given responses: log softmax(z / temperature) at each token.

        One forward pass over [prompt (left-padded) | response (right-padded)]; only the response
        positions go through the output head. Gradients flow to :meth:`trainable_parameters`
        unless ``reference`` (the reference policy, always without grad) or under ``no_grad``.
        Micro-batching is the caller's job.

        Args:
          prompt_ids:    B int64 [P_i] (``SampleOutput.prompt_ids``).
          response_ids:  int64 [B, L].
          response_mask: bool [B, L], True on real response tokens (a prefix of each row).
          temperature:   > 0; use the sampling temperature to match ``SampleOutput.logprobs``.
          reference:     score under the reference policy instead.
          with_entropy:  also return the per-token entropy.
        Returns:
          :class:`ScoreOutput` with float32 [B, L] tensors, 0 on padding.
        """
        if temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        if response_ids.dim() != 2 or response_ids.shape != response_mask.shape:
            raise ValueError(
                f"response_ids and response_mask must both be [B, L], got {tuple(response_ids.shape)} "
                f"and {tuple(response_mask.shape)}"
            )
        if len(prompt_ids) != response_ids.shape[0]:
            raise ValueError(f"{len(prompt_ids)} prompts for {response_ids.shape[0]} responses")
        bsz, width = response_ids.shape
        if width == 0:
            empty = torch.zeros((bsz, 0), dtype=torch.float32, device=response_ids.device)
            return ScoreOutput(empty, empty.clone() if with_entropy else None)
        device = self.device
        mask = response_mask.to(device=device, dtype=torch.bool)
        p_ids, p_attn = left_pad(prompt_ids, self.pad_id)
        resp = response_ids.to(device).masked_fill(~mask, self.pad_id)
        ids = torch.cat([p_ids.to(device), resp[:, :-1]], dim=1)
        attn = torch.cat([p_attn.to(device), mask[:, :-1].long()], dim=1)
        ctx = torch.no_grad() if reference else contextlib.nullcontext()
        with ctx:
            if reference:
                with self._reference_model() as ref:
                    out = self._forward(ref, input_ids=ids, attention_mask=attn, position_ids=positions(attn),
                                        use_cache=False, logits_to_keep=width)
            else:
                out = self._forward(self.model, input_ids=ids, attention_mask=attn,
                                    position_ids=positions(attn), use_cache=False, logits_to_keep=width)
            z = out.logits[:, -width:, :].float() / temperature
            lse = torch.logsumexp(z, dim=-1)
            logprobs = (z.gather(-1, resp[:, :, None]).squeeze(-1) - lse).masked_fill(~mask, 0.0)
            entropy = None
            if with_entropy:
                p = torch.softmax(z, dim=-1)
                entropy = (lse - (p * z).sum(-1)).masked_fill(~mask, 0.0)
        return ScoreOutput(logprobs=logprobs, entropy=entropy)

    # ------------------------------------------------------------------ choosing among candidates
    def encode_choices(self, prompts: Sequence[str], responses: Sequence[Sequence[str]]) -> list[ChoiceSet]:
        """Encode decision points: built prompts and, per prompt, the candidate responses (texts).

        Each candidate is tokenized on its own, as :meth:`encode_response` (and SFT) tokenizes a
        response, so there is no merge across the prompt/response boundary; the tokens all candidates
        of a prompt start with move to the prompt side (``gaca.policy.choice.split_shared_prefix``).
        """
        if len(prompts) != len(responses):
            raise ValueError(f"{len(prompts)} prompts for {len(responses)} candidate lists")
        return [split_shared_prefix(self.encode_prompt(p), [self._response_token_ids(r) for r in cands])
                for p, cands in zip(prompts, responses, strict=True)]

    def _response_token_ids(self, text: str) -> list[int]:
        ids = self._response_tokens.get(text)
        if ids is None:
            ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
            if len(self._response_tokens) < 1 << 16:  # admissible actions repeat: tokenize each once
                self._response_tokens[text] = ids
        return ids

    def score_choices(self, sets: Sequence[ChoiceSet], *, reference: bool = False) -> CandidateScores:
        """Summed token log-probs (temperature 1) of every candidate of every decision point, in one forward pass.

        The packed layout of ``gaca.policy.choice.pack_choices`` (a 4-D attention mask: each candidate
        sees the prompt and itself), split into parts of at most ``config.choice_chunk_tokens``
        candidate tokens. Gradients flow to :meth:`trainable_parameters` unless ``reference`` or under
        ``no_grad``.

        Returns:
          :class:`gaca.policy.choice.CandidateScores`, [B, C] with C the most candidates of a decision.
        """
        impl = getattr(self._base_model().config, "_attn_implementation", "sdpa")
        if impl not in ("sdpa", "eager"):
            raise ValueError(f"choosing among candidates needs a custom attention mask, which the model's "
                             f"attention implementation {impl!r} does not take: load it with sdpa or eager")
        packed = pack_choices(sets, self.pad_id, chunk_tokens=self.config.choice_chunk_tokens)
        device = self.device
        allowed = packed.allowed.to(device)
        if impl == "eager":  # eager attention adds the mask to the scores
            dtype = next(self.model.parameters()).dtype
            mask = torch.zeros(allowed.shape, dtype=dtype, device=device).masked_fill(~allowed, torch.finfo(dtype).min)
        else:
            mask = allowed
        keep = packed.input_ids.shape[1] - packed.prompt_width + 1
        kwargs = {"input_ids": packed.input_ids.to(device), "attention_mask": mask,
                  "position_ids": packed.position_ids.to(device), "use_cache": False, "logits_to_keep": keep}
        with torch.no_grad() if reference else contextlib.nullcontext():
            if reference:
                with self._reference_model() as ref:
                    out = self._forward(ref, **kwargs)
            else:
                out = self._forward(self.model, **kwargs)
            z = out.logits.float()[packed.token_row.to(device), packed.token_logit.to(device)]  # [Q, V]
            token_logp = z.gather(-1, packed.token_id.to(device)[:, None]).squeeze(-1) - torch.logsumexp(z, -1)
            flat = packed.num_decisions * packed.max_candidates
            index = packed.token_candidate.to(device)
            sums = torch.zeros(flat, dtype=torch.float32, device=device).index_add(0, index, token_logp)
            counts = torch.zeros(flat, dtype=torch.long, device=device).index_add(
                0, index, torch.ones_like(index))
        shape = (packed.num_decisions, packed.max_candidates)
        return CandidateScores(logprob_sum=sums.view(shape), num_tokens=counts.view(shape), token_logprob=token_logp,
                               token_candidate=index)

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        """``{"model": ..., "reference": ... or None}`` (the reference only for full fine-tuning)."""
        ref = self._reference.state_dict() if self._reference is not None else None
        return {"model": self.model.state_dict(), "reference": ref}

    def tokenizer_files(self) -> dict[str, bytes] | None:
        """The files of this policy's tokenizer when they do not come with its model (``tiny``: fitted to
        the run's texts), by name; None when the model source provides the tokenizer.

        The bytes are those of the tokenizer's first save (or the files it was loaded from,
        ``carry_tokenizer_files``): saving a loaded tokenizer again can add keys, and the policy's
        fingerprint must not change by being stored and loaded.
        """
        if self.config.model != "tiny":
            return None
        if self._tokenizer_files is None:
            with tempfile.TemporaryDirectory(prefix="gaca-tokenizer-") as tmp:
                self.tokenizer.save_pretrained(tmp)
                self._tokenizer_files = {p.name: p.read_bytes() for p in sorted(Path(tmp).iterdir()) if p.is_file()}
        return self._tokenizer_files

    def carry_tokenizer_files(self, files: dict[str, bytes]) -> None:
        """Record the files this policy's tokenizer was loaded from (``tokenizer_files`` returns them)."""
        self._tokenizer_files = dict(files)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Inverse of :meth:`state_dict` (strict)."""
        self.model.load_state_dict(state["model"], strict=True)
        if self._reference is not None:
            if state.get("reference") is None:
                raise ValueError("checkpoint has no reference weights but this policy fine-tunes fully")
            self._reference.load_state_dict(state["reference"], strict=True)
