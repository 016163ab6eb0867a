"""The Hugging Face transformers backend: any local causal LM, on CPU or CUDA.

One :meth:`TransformersBackend.generate` call samples every request of a round in one
left-padded batch (split into chunks of ``batch_size`` sequences only to bound memory, never
splitting a request unless its ``n`` alone exceeds ``batch_size``),
``n`` rows per request, with its own temperature, top-p, stop strings, token budget and
``torch.Generator`` (so a request's samples do not depend on what else is in the batch).
A ``greedy`` request takes the argmax of the logits at every step (ties to the lowest id).
Sampling is plain ancestral sampling (no top-k); the log-probabilities reported are the raw
ones (``log_softmax`` of the unscaled logits, temperature 1), as vLLM reports by default.
A request with ``top_logprobs = k > 0`` also gets, per sampled token, DeepConf's confidence
over the ``k`` largest of those raw log-probs (``Continuation.token_confidences``), read from
the same logits before any grammar, choice mask, temperature or top-p.

A KV cache is kept between tokens; rows that have finished are dropped from it once they
are a quarter of the batch, so short step candidates do not wait on long rollouts.

**Shared-prefix prefill**: within one chunk, every
distinct prompt is prefilled once, and the prefix that prompts share (a few-shot prefix and
question shared by every beam, a beam's path shared by its candidates) once per radix-tree
node: the distinct prompts are grouped into a token trie, each level of the trie is one
batched forward pass that continues its parent's KV cache, and the finished caches are
fanned out to the ``n`` rows that continue them. Within a level, shorter segments are
right-padded (masked out by the attention mask; ``position_ids`` count only real tokens) and
each child's copy of its parent's cache row is rotated so that its real tokens end at the
last position: every row stays left-padded with its real tokens contiguous, so every row
sees exactly the keys and positions it would alone, under a sliding-window mask too (it
counts cache positions). Models with sliding-window layers (Gemma 2 and 3, Mistral, hybrid
caches of full and sliding layers) are prefilled on a cache of full layers and the finished
caches are compacted into the cache the model builds itself (``DynamicCache(config=...)``),
whose ``DynamicSlidingWindowLayer`` keeps the last ``sliding_window - 1`` positions as after a
plain prefill; models whose cache has other layers (chunked or linear attention) are
prefilled one left-padded row per prompt. Samples are unchanged for the same seeds; log-probs agree with
the one-row-per-prompt prefill to float rounding (different batch shapes reduce in a
different order). :attr:`TransformersBackend.prefill_stats` counts the prompt tokens
actually prefilled. Both prefills project only the positions whose logits they read onto
the vocabulary (``logits_to_keep``, where the model's forward takes it): Gemma 3's
262,144-token vocabulary otherwise costs more than the rest of the 270M model per prompt
token. On Gemma 3 270M (CPU, one thread; 2 GSM8K questions with the bench's 8-shot prompt of
about 1,000 tokens, M = N = 2, 2 steps: ``experiments/benchmarks/throughput.py --lockstep-only``) the
search prefilled 5,421 prompt tokens, the trie's size, instead of 20,272.

The KV cache's full-attention layers are laid out once with room for the tokens still to be
sampled and written in place at every token (:mod:`mfs_core.backends.hf_headroom`), instead of
``DynamicLayer``'s ``torch.cat`` copy of the whole cache per token.

The backend is built from two parts that receive what they use: the prefills are its
:class:`~mfs_core.backends.hf_prefill.PrefillPlanner` (built with the model and the padding id)
and the logit masks (triggered choices, grammars) its
:class:`~mfs_core.backends.hf_constraints.GrammarMasker` (built with the tokenizer, the output
vocabulary size, the EOS ids and the device).

**Incremental stop checks**: each step decodes only a short
window of a row's newest tokens (the incremental detokenisation of vLLM and TGI) and
searches the new text plus the last ``max(len(stop)) - 1`` characters before it, so a stop
string that straddles tokens is found and the cost per token does not grow with the text.

**Triggered choices** (``GenerationRequest.triggered_choice``): once a row's text (prompt
included) ends with the trigger, only tokens whose text keeps it on the way to one of the
choices can be drawn (the others' logits are set to -inf before temperature, top-p or the
argmax) until a choice is complete; the reported log-probs stay the raw ones. Token texts
are each token decoded alone, so a trigger is found at the token that completes it (the
characters of that token after the trigger count towards the choice).

**Grammars** (``GenerationRequest.grammar``, :mod:`mfs_core.grammar`): each row runs
its own xgrammar matcher of the request's structural tag, fed the prompt's open action
first (``RequestGrammar.prefix``); before every draw the tokens it forbids get -inf logits
(before temperature, top-p or the argmax), and the drawn token advances it. The log-probs
reported stay the raw ones, and each row keeps its request's seeded generator.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mfs_core.backends.hf_constraints import GrammarMasker
from mfs_core.backends.hf_prefill import PrefillPlanner, PrefillStats, cache_argument, output_cache
from mfs_core.errors import BackendDeadError, ContextWindowError
from mfs_core.models import resolve_model_path
from mfs_core.settings import MFSSettings
from mfs_core.types import Continuation, GenerationRequest

__all__ = ["TransformersBackend", "fatal_device_error"]

logger = logging.getLogger(__name__)


@dataclass
class _Row:
    """One sequence being sampled: which request and sample it is, and its state."""

    request: int
    prompt_tokens: int
    max_tokens: int
    stop: tuple[str, ...]
    tokens: list[int]
    logprob_sum: float = 0.0
    top_logprobs: int = 0  # GenerationRequest.top_logprobs: k of each token's confidence (0: none)
    confidences: list[float] = field(default_factory=list)
    finish_reason: str | None = None
    stop_reason: str | None = None
    text: str = ""
    # incremental stop check: tokens[prefix_offset:read_offset] decode to the text already
    # searched at the end of the window; `tail` is the last max(len(stop)) - 1 searched chars.
    prefix_offset: int = 0
    read_offset: int = 0
    tail: str = ""
    # triggered choice (GenerationRequest.triggered_choice): `choice_tail` holds the last
    # len(trigger) - 1 characters of prompt + text; `choice_matched` the characters written
    # since the trigger while a choice is being written (None: free sampling).
    choice_tail: str = ""
    choice_matched: str | None = None
    # grammar (GenerationRequest.grammar): xgrammar's matcher of this row, None when free
    matcher: Any = None


class TransformersBackend:
    """Sample from a Hugging Face causal LM with raw log-probabilities.

    Args:
        model: a loaded ``PreTrainedModel`` (causal LM).
        tokenizer: its tokenizer (fast or slow); without a padding token its EOS token pads.
        model_name: name reported in results.
        batch_size: most sequences in one forward pass (sequences).
        prefill: the part that prefills a chunk's prompts; None builds a
            :class:`~mfs_core.backends.hf_prefill.PrefillPlanner` of ``model`` (shared-prefix
            prefill). Pass ``PrefillPlanner(model, pad_id, share=False)`` to prefill one row per
            prompt (a reference for comparisons).

    Attributes:
        planner: the :class:`~mfs_core.backends.hf_prefill.PrefillPlanner`.
        masker: the :class:`~mfs_core.backends.hf_constraints.GrammarMasker` (grammars and
            triggered choices).

    Implements :class:`mfs_core.backends.base.Backend`.
    """

    def __init__(self, model: Any, tokenizer: Any, model_name: str, batch_size: int = 512, *,
                 prefill: PrefillPlanner | None = None) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.model_name = model_name
        self.batch_size = batch_size
        self._cache_arg = cache_argument(model)
        self._num_parameters = sum(p.numel() for p in model.parameters())
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        eos = model.generation_config.eos_token_id if model.generation_config is not None else None
        eos = eos if eos is not None else tokenizer.eos_token_id
        self._eos_ids = set(eos if isinstance(eos, (list, tuple)) else [eos]) - {None}
        self.planner = prefill if prefill is not None else PrefillPlanner(model, tokenizer.pad_token_id)
        self.masker = GrammarMasker(tokenizer, vocab_size=_output_vocab_size(model), eos_ids=self._eos_ids,
                                    device=model.device)
        self._dead: str | None = None

    @property
    def prefill_stats(self) -> PrefillStats:
        """The prefill planner's :class:`~mfs_core.backends.hf_prefill.PrefillStats` (prompt-token counters);
        assign a new ``PrefillStats()`` to reset them."""
        return self.planner.stats

    @prefill_stats.setter
    def prefill_stats(self, stats: PrefillStats) -> None:
        self.planner.stats = stats

    @classmethod
    def from_settings(cls, settings: MFSSettings) -> TransformersBackend:
        """Load ``settings.model`` (``"mfs-demo"``: the bundled model) on ``settings.device``.

        Raises:
            ImportError: torch or transformers missing (``pip install "mfs-decoding[hf]"``).
            FileNotFoundError: ``settings.model`` is neither a local directory nor a cached
                model (nothing is downloaded unless ``HF_HUB_OFFLINE=0`` is set).
        """
        try:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError as exc:  # pragma: no cover - depends on the environment
            msg = 'the transformers backend needs torch and transformers: pip install "mfs-decoding[hf]"'
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
            from mfs_core.backends._hf import missing_model_message

            if not local_only or Path(path).expanduser().exists():  # a download or a local folder that failed
                msg = f"model {settings.model!r} could not be loaded: {exc.__class__.__name__}: {exc}"
                raise FileNotFoundError(msg) from exc
            raise FileNotFoundError(missing_model_message(settings.model, exc)) from exc
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

    @property
    def dead_reason(self) -> str | None:
        """Why this backend can no longer serve (one line): set by the first fatal device error
        (:func:`fatal_device_error`) and never cleared; None while it can serve."""
        return getattr(self, "_dead", None)

    def generate(self, requests: Sequence[GenerationRequest]) -> list[list[Continuation]]:
        """Sample all ``requests`` in one batch (see the module docstring).

        Returns:
            One list of ``request.n`` continuations per request, in order.

        Raises:
            ContextWindowError: a prompt has as many tokens as the context window or more.
            BackendDeadError: this call, or an earlier one, met a fatal device error (CUDA error, out of
                memory: :func:`fatal_device_error`); every later call raises it at once.
        """
        if self.dead_reason is not None:
            raise BackendDeadError(self.dead_reason, self.model_name)
        try:
            return self._generate(requests)
        except Exception as exc:
            reason = fatal_device_error(exc)
            if reason is None:
                raise
            self._dead = reason
            logger.error("the transformers backend of %r is dead: %s", self.model_name, reason)
            raise BackendDeadError(reason, self.model_name) from exc

    def _generate(self, requests: Sequence[GenerationRequest]) -> list[list[Continuation]]:
        """:meth:`generate`'s sampling, without the fatal-error check."""
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
            # one matcher per request, its prefix fed once; each further row gets a fork of it
            matcher = self.masker.matcher(request.grammar) if request.grammar is not None else None
            for k in range(request.n):
                row = _Row(request=r, prompt_tokens=len(ids), max_tokens=min(request.max_tokens, window - len(ids)),
                           stop=request.stop, tokens=[], top_logprobs=request.top_logprobs)
                if request.triggered_choice is not None:
                    trigger = request.triggered_choice.trigger
                    row.choice_tail = request.prompt[-(len(trigger) - 1):] if len(trigger) > 1 else ""
                    row.choice_matched = "" if request.prompt.endswith(trigger) else None
                if matcher is not None:
                    row.matcher = matcher if k == 0 else matcher.fork()
                rows.append(row)
                row_prompts.append(ids)
        self.planner.record_call(row_prompts, prompt_ids)
        generators = []
        for request in requests:
            generator = torch.Generator(device=self.model.device)
            seed = request.seed if request.seed is not None else int.from_bytes(os.urandom(7), "little")
            generator.manual_seed(seed)
            generators.append(generator)
        cancels = [(index, request.cancel) for index, request in enumerate(requests) if request.cancel is not None]
        with torch.inference_mode():
            for chunk in _chunks_by_request(rows, self.batch_size):
                if cancels and not _abort_cancelled([rows[i] for i in chunk], cancels):
                    continue  # every row of the chunk belongs to an abandoned decode: not even prefilled
                self._sample_chunk([rows[i] for i in chunk], [row_prompts[i] for i in chunk], requests, generators,
                                   cancels)
        results: list[list[Continuation]] = [[] for _ in requests]
        for row in rows:
            results[row.request].append(
                Continuation(text=row.text, token_ids=tuple(row.tokens), logprob_sum=row.logprob_sum,
                             finish_reason=row.finish_reason, stop_reason=row.stop_reason,
                             prompt_tokens=row.prompt_tokens, token_confidences=tuple(row.confidences))
            )
        return results

    # --- sampling --------------------------------------------------------------------------
    def _decode(self, tokens: list[int]) -> str:
        return self.tokenizer.decode(tokens, skip_special_tokens=True, clean_up_tokenization_spaces=False)

    def _sample_chunk(self, rows: list[_Row], prompts: list[list[int]], requests: Sequence[GenerationRequest],
                      generators: list[Any], cancels: list[tuple[int, Any]] = ()) -> None:
        """Sample ``rows`` to completion; fills each row's tokens, text and log-prob sum. ``cancels``:
        ``(request index, event)`` of the requests that carry a cancel event, checked before every token."""
        import torch

        device = self.model.device
        pad = self.tokenizer.pad_token_id
        # the cache grows in place by up to this many tokens (the most any row may sample)
        cache, logits, mask, next_position = self.planner.prefill(prompts, max(row.max_tokens for row in rows))
        temperature = torch.tensor([requests[r.request].temperature for r in rows], device=device).unsqueeze(1)
        top_p = torch.tensor([requests[r.request].top_p for r in rows], device=device)
        active = list(range(len(rows)))  # row index of each batch position
        while True:
            if cancels:
                _abort_cancelled([rows[i] for i in active], cancels)
            raw = torch.log_softmax(logits, dim=-1)
            sampled = self.masker.mask_choices(logits, [rows[i] for i in active], requests)
            sampled = self.masker.mask_grammar(sampled, [rows[i] for i in active])
            probs = torch.softmax(sampled / temperature, dim=-1)
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
                    tokens[index] = sampled[index].argmax(dim=-1)  # first index among ties
                else:
                    tokens[index] = torch.multinomial(probs[index], 1, generator=generators[request_index]).squeeze(1)
            chosen = raw.gather(1, tokens.unsqueeze(1)).squeeze(1).tolist()
            token_list = tokens.tolist()
            confidences = _token_confidences(raw, [rows[i].top_logprobs for i in active])
            for pos, row_index in enumerate(active):
                row = rows[row_index]
                if row.finish_reason is not None:
                    continue
                row.tokens.append(token_list[pos])
                row.logprob_sum += chosen[pos]
                if row.top_logprobs:
                    row.confidences.append(confidences[pos])
                choice = requests[row.request].triggered_choice
                if choice is not None:
                    self.masker.advance_choice(row, choice, token_list[pos])
                if row.matcher is not None and not row.matcher.is_terminated():
                    row.matcher.accept_token(token_list[pos])
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
                             use_cache=True, **{self._cache_arg: cache})
            cache = output_cache(out)
            logits = out.logits[:, -1, :].float()
            next_position = next_position + 1
        for row in rows:
            if row.finish_reason != "stop":
                row.text = self._decode(row.tokens)

    # --- stop strings ---------------------------------------------------------------------
    def _check_stops(self, rows: list[_Row]) -> None:
        """Mark the rows whose text now contains a stop string and cut their text before it,
        decoding only a window of each row's newest tokens.

        The window is ``tokens[prefix_offset:]``; its text beyond that of
        ``tokens[prefix_offset:read_offset]`` is new (vLLM's ``detokenize_incrementally``:
        decoding a few tokens of context keeps word-initial spaces right). A window whose text
        ends in an incomplete character (U+FFFD) is searched up to it and decoded again at
        the next token. The new text is searched with the last ``max(len(stop)) - 1``
        characters before it, so a stop string split across tokens is found at the token
        that completes it, as a whole-text search finds it.
        """
        checked = [row for row in rows if row.stop and row.finish_reason in (None, "length")]
        if not checked:
            return
        windows = [row.tokens[row.prefix_offset:row.read_offset] for row in checked]
        windows += [row.tokens[row.prefix_offset:] for row in checked]
        texts = self.tokenizer.batch_decode(windows, skip_special_tokens=True, clean_up_tokenization_spaces=False)
        for i, row in enumerate(checked):
            before, now = texts[i], texts[len(checked) + i]
            complete = not now.endswith("\ufffd")
            new = now[len(before):] if complete else now.rstrip("\ufffd")[len(before):]
            searched = row.tail + new
            if any(stop in searched for stop in row.stop):
                text = self._decode(row.tokens)
                hits = [(text.find(stop), stop) for stop in row.stop if stop in text]
                cut, stop = min(hits)
                row.text = text[:cut]
                row.finish_reason = "stop"
                row.stop_reason = stop
                continue
            if complete:
                row.prefix_offset, row.read_offset = row.read_offset, len(row.tokens)
                keep = max(len(stop) for stop in row.stop) - 1
                row.tail = searched[-keep:] if keep else ""


_FATAL_DEVICE_TEXT = ("CUDA error", "CUBLAS_STATUS", "CUDNN_STATUS", "device-side assert", "illegal memory access",
                      "NCCL error", "HIP error", "out of memory")
"""Texts of torch's ``RuntimeError`` after which a device's state cannot be trusted (a CUDA context hit
by a device-side assert or an illegal access stays broken for the life of the process)."""


def fatal_device_error(exc: BaseException) -> str | None:
    """One line saying why ``exc`` (raised while sampling) leaves the backend unusable, or None.

    Fatal: out of memory (``torch.OutOfMemoryError``, also CUDA's, and ``MemoryError``) and a
    ``RuntimeError`` naming a device failure (:data:`_FATAL_DEVICE_TEXT`). A bad request's own
    error (a ``ValueError``, a prompt too long) is not: it fails that decode alone.
    """
    import torch

    oom = getattr(torch, "OutOfMemoryError", None) or getattr(torch.cuda, "OutOfMemoryError", None)
    if isinstance(exc, MemoryError) or (isinstance(oom, type) and isinstance(exc, oom)):
        kind = "ran out of memory"
    elif isinstance(exc, RuntimeError) and any(text in str(exc) for text in _FATAL_DEVICE_TEXT):
        kind = "met a device error"
    else:
        return None
    first = (str(exc).strip().splitlines() or [""])[0][:200]
    return f"the transformers backend {kind} ({type(exc).__name__}: {first}); the model must be loaded again"


def _output_vocab_size(model: Any) -> int:
    """Rows of ``model``'s output projection (its logits per position), else its config's ``vocab_size``."""
    embeddings = model.get_output_embeddings()
    return int(embeddings.weight.shape[0]) if embeddings is not None else int(model.config.vocab_size)


def _abort_cancelled(rows: list[_Row], cancels: list[tuple[int, Any]]) -> int:
    """End the unfinished ``rows`` whose request's cancel event is set (``finish_reason="abort"``);
    ``cancels`` holds ``(request index, event)`` of the requests that carry one. Returns how many of
    ``rows`` are still unfinished."""
    cancelled = {index for index, event in cancels if event.is_set()}
    left = 0
    for row in rows:
        if row.finish_reason is None and row.request in cancelled:
            row.finish_reason = "abort"
        left += row.finish_reason is None
    return left


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


def _token_confidences(raw: Any, ks: Sequence[int]) -> list[float]:
    """DeepConf's token confidence of each batch position: ``-(1/k) sum_{j<=k} log P(j)`` over the
    ``k = ks[pos]`` largest raw log-probs of ``raw`` (``[positions, vocab]``, log-softmax of the
    unscaled logits), as :func:`mfs_core.confidence.token_confidence` (paper eq. 2,
    ``deepconf/processors.py:29-34``); 0.0 where ``k`` is 0. One ``topk`` for the batch, only
    when some position asks."""
    import torch

    largest = max(ks, default=0)
    if largest == 0:
        return [0.0] * len(ks)
    top = torch.topk(raw, min(largest, raw.shape[-1]), dim=-1).values.double().cumsum(dim=-1)
    count = torch.tensor([min(k, top.shape[-1]) for k in ks], device=raw.device)
    sums = top.gather(1, (count - 1).clamp(min=0).unsqueeze(1)).squeeze(1)
    return [-float(total) / k if k else 0.0 for total, k in zip(sums.tolist(), count.tolist())]


def _top_p_filter(probs: Any, top_p: Any) -> Any:
    """Zero the tail of each row's distribution beyond nucleus mass ``top_p`` and renormalise."""
    import torch

    sorted_probs, order = probs.sort(dim=-1, descending=True)
    cumulative = sorted_probs.cumsum(dim=-1)
    remove = cumulative - sorted_probs > top_p.unsqueeze(1)
    sorted_probs = sorted_probs.masked_fill(remove, 0.0)
    filtered = torch.zeros_like(probs).scatter(1, order, sorted_probs)
    return filtered / filtered.sum(dim=-1, keepdim=True)


