"""The Hugging Face transformers backend: any local causal LM, on CPU or CUDA.

One :meth:`TransformersBackend.generate` call samples every request of a round in one
left-padded batch (split into chunks of ``batch_size`` sequences only to bound memory, never
splitting a request unless its ``n`` alone exceeds ``batch_size``),
``n`` rows per request, with its own temperature, top-p, stop strings, token budget and
``torch.Generator`` (so a request's samples do not depend on what else is in the batch).
A ``greedy`` request takes the argmax of the logits at every step (ties to the lowest id).
Sampling is plain ancestral sampling (no top-k); the log-probabilities reported are the raw
ones (``log_softmax`` of the unscaled logits, temperature 1), as vLLM reports by default.

A KV cache is kept between tokens; rows that have finished are dropped from it once they
are a quarter of the batch, so short step candidates do not wait on long rollouts.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mfs_core.backends.base import ContextWindowError
from mfs_core.settings import DEMO_MODEL, MFSSettings
from mfs_core.types import Continuation, GenerationRequest

__all__ = ["TransformersBackend", "demo_model_path", "resolve_model_path"]

logger = logging.getLogger(__name__)


def demo_model_path() -> Path:
    """Directory of the bundled demo checkpoint (``mfs_core/demo/model``)."""
    return Path(__file__).resolve().parent.parent / "demo" / "model"


def resolve_model_path(model: str) -> str:
    """Map ``"mfs-demo"`` to the bundled checkpoint; other names and paths pass through."""
    return str(demo_model_path()) if model == DEMO_MODEL else model


@dataclass
class _Row:
    """One sequence being sampled: which request and sample it is, and its state."""

    request: int
    prompt_tokens: int
    max_tokens: int
    stop: tuple[str, ...]
    tokens: list[int]
    logprob_sum: float = 0.0
    finish_reason: str | None = None
    stop_reason: str | None = None
    text: str = ""


class TransformersBackend:
    """Sample from a Hugging Face causal LM with raw log-probabilities.

    Args:
        model: a loaded ``PreTrainedModel`` (causal LM).
        tokenizer: its tokenizer (fast or slow).
        model_name: name reported in results.
        batch_size: most sequences in one forward pass (sequences).

    Implements :class:`mfs_core.backends.base.Backend`.
    """

    def __init__(self, model: Any, tokenizer: Any, model_name: str, batch_size: int = 512) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.model_name = model_name
        self.batch_size = batch_size
        self._num_parameters = sum(p.numel() for p in model.parameters())
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        eos = model.generation_config.eos_token_id if model.generation_config is not None else None
        eos = eos if eos is not None else tokenizer.eos_token_id
        self._eos_ids = set(eos if isinstance(eos, (list, tuple)) else [eos]) - {None}

    @classmethod
    def from_settings(cls, settings: MFSSettings) -> TransformersBackend:
        """Load ``settings.model`` (``"mfs-demo"``: the bundled model) on ``settings.device``.

        Raises:
            ImportError: torch or transformers missing (``pip install "mfs[hf]"``).
            FileNotFoundError: ``settings.model`` is neither a local directory nor a cached
                model (nothing is downloaded unless ``HF_HUB_OFFLINE=0`` is set).
        """
        try:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError as exc:  # pragma: no cover - depends on the environment
            msg = 'the transformers backend needs torch and transformers: pip install "mfs[hf]"'
            raise ImportError(msg) from exc
        path = resolve_model_path(settings.model)
        device = settings.device
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        dtype: Any = "auto"
        if settings.dtype != "auto":
            dtype = getattr(torch, settings.dtype)
        elif device == "cpu":
            dtype = torch.float32
        local_only = os.environ.get("HF_HUB_OFFLINE", "1") != "0"
        try:
            tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=local_only)
            model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, local_files_only=local_only)
        except (OSError, ValueError) as exc:
            msg = (
                f"model {settings.model!r} was not found: give a local directory with a Hugging Face "
                f"checkpoint, a model already in the local cache, or 'mfs-demo' ({exc.__class__.__name__}: {exc})"
            )
            raise FileNotFoundError(msg) from exc
        model.to(device)
        model.eval()
        return cls(model, tokenizer, model_name=settings.model, batch_size=settings.batch_size)

    # --- Backend protocol ------------------------------------------------------------------
    @property
    def context_window(self) -> int:
        """``max_position_embeddings`` of the model config (tokens)."""
        config = self.model.config
        window = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)
        return int(window or self.tokenizer.model_max_length)

    @property
    def num_parameters(self) -> int:
        """Parameters of the loaded model."""
        return self._num_parameters

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` (no special tokens added)."""
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def apply_chat_template(
        self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None = None
    ) -> str | None:
        """The tokenizer's chat template with the generation prompt (and ``tools``); None without one."""
        from mfs_core.backends._hf import render_chat

        return render_chat(self.tokenizer, messages, tools)

    def encode_prompt(self, prompt: str) -> list[int]:
        """Token ids of a prompt: special tokens are added only if the text lacks a leading BOS."""
        bos = self.tokenizer.bos_token
        add_special = not (bos and prompt.startswith(bos))
        return self.tokenizer(prompt, add_special_tokens=add_special)["input_ids"]

    def generate(self, requests: Sequence[GenerationRequest]) -> list[list[Continuation]]:
        """Sample all ``requests`` in one batch (see the module docstring).

        Returns:
            One list of ``request.n`` continuations per request, in order.

        Raises:
            ContextWindowError: a prompt has as many tokens as the context window or more.
        """
        import torch

        window = self.context_window
        prompt_ids = []
        for i, request in enumerate(requests):
            ids = self.encode_prompt(request.prompt)
            if len(ids) >= window:
                msg = (
                    f"prompt {i} has {len(ids)} tokens, which does not fit the context window of "
                    f"{window} tokens of model {self.model_name!r}: {request.prompt[:60]!r}..."
                )
                raise ContextWindowError(msg)
            prompt_ids.append(ids)
        rows: list[_Row] = []
        row_prompts: list[list[int]] = []
        for r, (request, ids) in enumerate(zip(requests, prompt_ids)):
            for _ in range(request.n):
                rows.append(_Row(request=r, prompt_tokens=len(ids), max_tokens=min(request.max_tokens, window - len(ids)),
                                 stop=request.stop, tokens=[]))
                row_prompts.append(ids)
        generators = []
        for request in requests:
            generator = torch.Generator(device=self.model.device)
            seed = request.seed if request.seed is not None else int.from_bytes(os.urandom(7), "little")
            generator.manual_seed(seed)
            generators.append(generator)
        with torch.inference_mode():
            for chunk in _chunks_by_request(rows, self.batch_size):
                self._sample_chunk([rows[i] for i in chunk], [row_prompts[i] for i in chunk], requests, generators)
        results: list[list[Continuation]] = [[] for _ in requests]
        for row in rows:
            results[row.request].append(
                Continuation(text=row.text, token_ids=tuple(row.tokens), logprob_sum=row.logprob_sum,
                             finish_reason=row.finish_reason, stop_reason=row.stop_reason,
                             prompt_tokens=row.prompt_tokens)
            )
        return results

    # --- sampling --------------------------------------------------------------------------
    def _decode(self, tokens: list[int]) -> str:
        return self.tokenizer.decode(tokens, skip_special_tokens=True, clean_up_tokenization_spaces=False)

    def _sample_chunk(self, rows: list[_Row], prompts: list[list[int]], requests: Sequence[GenerationRequest],
                      generators: list[Any]) -> None:
        """Sample ``rows`` to completion; fills each row's tokens, text and log-prob sum."""
        import torch

        device = self.model.device
        pad = self.tokenizer.pad_token_id
        width = max(len(p) for p in prompts)
        input_ids = torch.full((len(rows), width), pad, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, ids in enumerate(prompts):
            input_ids[i, width - len(ids):] = torch.tensor(ids, dtype=torch.long)
            mask[i, width - len(ids):] = 1
        input_ids, mask = input_ids.to(device), mask.to(device)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        temperature = torch.tensor([requests[r.request].temperature for r in rows], device=device).unsqueeze(1)
        top_p = torch.tensor([requests[r.request].top_p for r in rows], device=device)
        active = list(range(len(rows)))  # row index of each batch position
        out = self.model(input_ids=input_ids, attention_mask=mask, position_ids=positions, use_cache=True)
        cache = out.past_key_values
        logits = out.logits[:, -1, :].float()
        next_position = positions[:, -1:] + 1
        while True:
            raw = torch.log_softmax(logits, dim=-1)
            probs = torch.softmax(logits / temperature, dim=-1)
            if bool((top_p < 1).any()):
                probs = _top_p_filter(probs, top_p)
            tokens = torch.empty(len(active), dtype=torch.long, device=device)
            tokens.fill_(pad)
            by_request: dict[int, list[int]] = {}
            for pos, row_index in enumerate(active):
                if rows[row_index].finish_reason is None:  # finished rows draw nothing
                    by_request.setdefault(rows[row_index].request, []).append(pos)
            for request_index, positions_of_request in by_request.items():
                index = torch.tensor(positions_of_request, device=device)
                if requests[request_index].greedy:
                    tokens[index] = logits[index].argmax(dim=-1)  # first index among ties
                else:
                    tokens[index] = torch.multinomial(probs[index], 1, generator=generators[request_index]).squeeze(1)
            chosen = raw.gather(1, tokens.unsqueeze(1)).squeeze(1).tolist()
            token_list = tokens.tolist()
            for pos, row_index in enumerate(active):
                row = rows[row_index]
                if row.finish_reason is not None:
                    continue
                row.tokens.append(token_list[pos])
                row.logprob_sum += chosen[pos]
                if token_list[pos] in self._eos_ids:
                    row.finish_reason = "eos"
                elif len(row.tokens) >= row.max_tokens:
                    row.finish_reason = "length"
            self._check_stops([rows[i] for i in active])
            keep = [pos for pos, i in enumerate(active) if rows[i].finish_reason is None]
            if not keep:
                break
            if len(keep) <= 0.75 * len(active):
                index = torch.tensor(keep, device=device)
                cache.batch_select_indices(index)
                mask, tokens, next_position = mask[index], tokens[index], next_position[index]
                temperature, top_p = temperature[index], top_p[index]
                active = [active[pos] for pos in keep]
            mask = torch.cat([mask, torch.ones((len(active), 1), dtype=mask.dtype, device=device)], dim=1)
            out = self.model(input_ids=tokens.unsqueeze(1), attention_mask=mask, position_ids=next_position,
                             past_key_values=cache, use_cache=True)
            cache = out.past_key_values
            logits = out.logits[:, -1, :].float()
            next_position = next_position + 1
        for row in rows:
            if row.finish_reason != "stop":
                row.text = self._decode(row.tokens)

    def _check_stops(self, rows: list[_Row]) -> None:
        """Mark rows whose text now contains a stop string; cut the text before it."""
        checked = [row for row in rows if row.stop and row.finish_reason in (None, "length")]
        if not checked:
            return
        texts = self.tokenizer.batch_decode([row.tokens for row in checked], skip_special_tokens=True,
                                            clean_up_tokenization_spaces=False)
        for row, text in zip(checked, texts):
            hits = [(text.find(stop), stop) for stop in row.stop if stop in text]
            if hits:
                cut, stop = min(hits)
                row.text = text[:cut]
                row.finish_reason = "stop"
                row.stop_reason = stop


def _chunks_by_request(rows: list[_Row], batch_size: int) -> list[list[int]]:
    """Row indices split into chunks of at most ``batch_size`` rows that never split a request.

    A request with more than ``batch_size`` rows is cut into pieces that start a chunk of
    their own, so where a request's rows fall depends only on its ``n`` and ``batch_size``,
    never on the other requests of the call (its samples stay batch-invariant).
    """
    chunks: list[list[int]] = []
    current: list[int] = []
    start = 0
    while start < len(rows):
        end = start
        while end < len(rows) and rows[end].request == rows[start].request:
            end += 1
        if current and len(current) + end - start > batch_size:
            chunks.append(current)
            current = []
        if end - start > batch_size:
            pieces = [list(range(i, min(i + batch_size, end))) for i in range(start, end, batch_size)]
            chunks.extend(pieces[:-1])
            current = pieces[-1]
        else:
            current.extend(range(start, end))
        start = end
    if current:
        chunks.append(current)
    return chunks


def _top_p_filter(probs: Any, top_p: Any) -> Any:
    """Zero the tail of each row's distribution beyond nucleus mass ``top_p`` and renormalise."""
    import torch

    sorted_probs, order = probs.sort(dim=-1, descending=True)
    cumulative = sorted_probs.cumsum(dim=-1)
    remove = cumulative - sorted_probs > top_p.unsqueeze(1)
    sorted_probs = sorted_probs.masked_fill(remove, 0.0)
    filtered = torch.zeros_like(probs).scatter(1, order, sorted_probs)
    return filtered / filtered.sum(dim=-1, keepdim=True)
