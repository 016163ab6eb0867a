"""An HTTP backend for ``vllm serve`` and other servers of the OpenAI ``/v1/completions`` API.

One :meth:`OpenAIBackend.generate` call sends every request of the round at once, one POST
``{base_url}/completions`` per request (each request has its own seed, so requests are not
merged into one prompt list), spread over the replicas in ``base_urls`` and sent
concurrently over pooled keep-alive connections (``httpx.AsyncClient``: on the backend's own
event-loop thread for :meth:`OpenAIBackend.generate`, on the caller's loop for
:meth:`OpenAIBackend.agenerate`), started in
:func:`~mfs_core.backends._hf.prefix_order` of the prompt texts so that a server's prefix
cache sees prompts sharing a prefix one after another.

A request whose :attr:`~mfs_core.types.GenerationRequest.cancel` event is set while its POST is
in flight (its decode was abandoned: the client disconnected, or its deadline passed) has
that POST cancelled within :data:`~mfs_core.backends.openai_sender.CANCEL_POLL_S`: the connection is closed, which makes
``vllm serve`` abort the request (its completion route runs under ``with_cancellation``,
``vllm/entrypoints/utils.py``, which aborts on the client's disconnect), and the request's
continuations come back empty with ``finish_reason="abort"``; the round's other POSTs run on. Response shape and
extensions follow vLLM 0.33.0 (``vllm/entrypoints/openai/completion/protocol.py`` and
``serving.py``).

Each POST body holds ``model``, ``prompt``, ``n``, ``max_tokens`` (vLLM's default is 16: always
sent, clamped to the context window when the prompt length is known), ``temperature``,
``top_p``, ``stop``, ``seed`` and ``logprobs=1`` (``logprobs=k`` for a request with
``top_logprobs = k``, DeepConf's, whose ``choices[].logprobs.top_logprobs`` become
``Continuation.token_confidences``: :func:`~mfs_core.backends.openai_wire.token_confidences`; a greedy request: ``temperature=0`` and
``n=1``, its answer repeated ``n`` times); with ``vllm_extensions`` (default) also
``return_token_ids=true`` (the sampled token ids come back), ``return_tokens_as_token_ids=true``
for a request with ``top_logprobs`` (its alternatives keyed by token id) and, when the prompt already
opens with the tokenizer's BOS text, ``add_special_tokens=false`` (no second BOS, as the
other backends). Log-probs are vLLM's raw ones (its default ``logprobs_mode``); the server's
own generation-config defaults (``top_k``, ``repetition_penalty``, ...) still apply unless it
runs with ``--generation-config vllm``.

Grammars (``GenerationRequest.grammar``, grammar-constrained actions): with
``vllm_extensions`` a request whose grammar has a
:attr:`~mfs_core.types.RequestGrammar.remote` form adds
``"structured_outputs": {"structural_tag": remote}`` to its body, the field vLLM's
``CompletionRequest`` reads (vLLM >= 0.11; checked on 0.32.0,
``vllm/entrypoints/openai/completion/protocol.py``; the older ``guided_*`` fields were
removed in 0.12 and are not sent). It is per request, so every POST of a round (and each
single-sample POST of a fanned-out request) carries its own request's grammar. The server
applies it as :class:`~mfs_core.backends.vllm.VLLMBackend` does, so the same caveat holds:
the log-probs of tokens sampled under the grammar come back renormalised over the tokens
it allows (not raw; see :mod:`mfs_core.backends.vllm`). A request with no remote grammar
(its prompt ends inside an action's JSON value) is sent without one, and so is every
request without ``vllm_extensions`` (other servers take other grammar formats); each case
is logged once per backend. Requests without a grammar get the body they always got. A
server older than 0.11 ignores the unknown field (with a log line of its own) and samples
unconstrained.

Mapping a choice onto a :class:`~mfs_core.types.Continuation`:

* ``logprob_sum`` = the sum of ``logprobs.token_logprobs`` (the API has no cumulative field);
  ``num_tokens`` = their count, which vLLM makes equal to ``len(token_ids)``: the token that
  completes a stop string and the EOS token are included, as in the other backends.
* ``token_ids``: ``choices[].token_ids`` when present, else parsed from ``token_id:N``
  tokens (``return_tokens_as_token_ids``), else ``-1`` per token (the count stays exact).
* ``finish_reason``: ``"length"`` is ``"length"``; ``"stop"`` with a string ``stop_reason``
  (vLLM's extension) is ``"stop"``; with an int or null ``stop_reason`` it is ``"eos"``; a
  server that sends no ``stop_reason`` at all gets it inferred: ``"stop"`` when one of the
  request's stop strings follows the returned text in the concatenated ``tokens``, else ``"eos"``.
* ``prompt_tokens`` = ``usage.prompt_tokens`` (one prompt per POST, so the whole count;
  without ``usage`` it is counted with the local tokenizer, or 0 without one).

Faults: a 408, 429 or 5xx answer, a timeout, a connection error or a body that is not JSON
is retried ``max_retries`` times on the next replica, after ``Retry-After`` when the server
sends one, else after exponential backoff (``backoff · 2^attempt`` seconds, at most
``max_backoff``); then :class:`~mfs_core.errors.ServerRequestError` names the URL, the attempts
and the last fault. A 400 about the context length raises :class:`~mfs_core.errors.ContextWindowError`;
other 4xx answers raise :class:`~mfs_core.errors.ServerRequestError` at once, and answers that cannot
be mapped :class:`~mfs_core.errors.BackendOutputError`. A choice without log-probs raises its
:class:`~mfs_core.errors.MissingLogprobsError`: MFS cannot score steps without them.

The backend is built from parts that receive what they use: the
:class:`~mfs_core.backends.openai_sender.HTTPSender` (the ``httpx`` client per event loop, the
retry policy, the replicas' health), the :class:`~mfs_core.backends.replica_routing.ReplicaRouter`
(which replica each POST goes to first) and the pure wire format
(:mod:`mfs_core.backends.openai_wire`). The backend itself builds the POST bodies, fans requests
out for servers that sample once per request, and waits.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from pydantic import SecretStr

from mfs_core.backends import _hf
from mfs_core.backends._loop import EventLoopThread
from mfs_core.backends.base import warn_unconstrained_grammar, warn_unhonoured_choices
from mfs_core.backends.openai_sender import HTTPSender, Post
from mfs_core.backends.openai_wire import UNKNOWN_CONTEXT_WINDOW, ServerN, _import_httpx, _normalise_url, sample_seed
from mfs_core.backends.replica_routing import ReplicaRouter, ReplicaRouting
from mfs_core.errors import ContextWindowError, SingleSampleError
from mfs_core.settings import MFSSettings
from mfs_core.types import Continuation, GenerationRequest

__all__ = ["OpenAIBackend"]

logger = logging.getLogger(__name__)


class OpenAIBackend:
    """Sample from OpenAI-compatible ``/v1/completions`` servers (``vllm serve`` replicas).

    Args:
        base_urls: one URL per replica, ending in ``/v1`` (``http://host:8000`` gets ``/v1``).
        model: the served model name sent as ``model``.
        tokenizer: a local Hugging Face tokenizer of the same model, or None. Without one,
            :meth:`count_tokens` raises, :meth:`apply_chat_template` returns None (only raw
            prompts), prompts are not checked against the context window locally, and a
            BOS written by a chat template may be doubled by the server.
        api_key: sent as ``Authorization: Bearer`` (a str or pydantic ``SecretStr``); None sends no header.
        timeout: seconds per HTTP attempt (connect, read, write, pool).
        max_retries: retries of a request after a retryable fault (see the module docstring).
        backoff: first backoff delay (seconds); it doubles each retry.
        max_backoff: longest backoff delay (seconds); a server's Retry-After is honoured up
            to 300 seconds.
        context_window: the model's context window (tokens); None asks GET ``/v1/models``
            (vLLM's ``max_model_len``), then the tokenizer's ``model_max_length``, else
            :data:`~mfs_core.backends.openai_wire.UNKNOWN_CONTEXT_WINDOW` (the server enforces its
            own limit, and its 400 becomes :class:`~mfs_core.errors.ContextWindowError`).
        num_parameters: parameter count for FLOPs; None counts it from ``config_source``'s
            config on the meta device, or reports 0 (FLOPs 0, with a warning) when unknown.
        config_source: local directory or cached name holding the model's ``config.json``.
        max_connections: most concurrent requests (and pooled connections) in all.
        vllm_extensions: send vLLM's ``return_token_ids``, ``add_special_tokens`` and ``structured_outputs``
            (a request's grammar) fields.
        extra_body: further JSON fields merged into every POST body (e.g. ``{"top_k": 0}``).
        server_n: whether the servers return ``n`` samples per request
            (:data:`~mfs_core.backends.openai_wire.ServerN`): ``"yes"`` (vLLM), ``"no"`` (llama.cpp's
            server, Ollama: a request with ``n`` > 1 goes out as ``n`` POSTs with ``n=1`` and seeds
            :func:`~mfs_core.backends.openai_wire.sample_seed`), ``"auto"`` (send ``n``; the first
            answer with one choice, or an error about ``n`` / choices, switches to ``"no"`` for the
            rest of this backend's life, and the requests it met are sent again fanned out).
        replica_routing: which replica each POST goes to (:mod:`mfs_core.backends.replica_routing`):
            ``"affinity"`` (the replica holding the longest prefix of the prompt, within a load
            bound) or ``"spread"`` (by work alone, each call on its own). Failover is the same
            under both: a failed POST is retried on the next replica.

    Attributes:
        sender: the :class:`~mfs_core.backends.openai_sender.HTTPSender` that sends the POSTs.
        router: the :class:`~mfs_core.backends.replica_routing.ReplicaRouter` that picks each POST's replica.
        fanned_out_posts: POSTs sent for the samples of fanned-out requests (``n`` per request with ``n`` > 1).

    Raises:
        ValueError: ``base_urls`` empty or a string, a limit out of range, or an unknown ``server_n``
            or ``replica_routing`` (the message names the value).
        ImportError: httpx is missing.

    Implements :class:`mfs_core.backends.base.Backend`.
    """

    def __init__(
        self,
        base_urls: Sequence[str],
        model: str,
        *,
        tokenizer: Any = None,
        api_key: str | SecretStr | None = None,
        timeout: float = 600.0,
        max_retries: int = 3,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        context_window: int | None = None,
        num_parameters: int | None = None,
        config_source: str | None = None,
        max_connections: int = 64,
        vllm_extensions: bool = True,
        extra_body: dict[str, Any] | None = None,
        server_n: ServerN = "auto",
        replica_routing: ReplicaRouting = "affinity",
    ) -> None:
        if isinstance(base_urls, str) or not base_urls:
            msg = f"base_urls must be a non-empty list of server URLs, got {base_urls!r}"
            raise ValueError(msg)
        if timeout <= 0 or max_retries < 0 or backoff < 0 or max_connections < 1:
            msg = (f"need timeout > 0, max_retries >= 0, backoff >= 0, max_connections >= 1; got timeout={timeout}, "
                   f"max_retries={max_retries}, backoff={backoff}, max_connections={max_connections}")
            raise ValueError(msg)
        if server_n not in ("auto", "yes", "no"):
            msg = f"server_n must be 'auto', 'yes' or 'no', got {server_n!r}"
            raise ValueError(msg)
        self.base_urls = [_normalise_url(url) for url in base_urls]
        self.model_name = model
        self.tokenizer = tokenizer
        self.vllm_extensions = vllm_extensions
        self.extra_body = dict(extra_body or {})
        self.server_n = server_n
        if isinstance(api_key, SecretStr):
            api_key = api_key.get_secret_value()
        self.sender = HTTPSender(
            self.base_urls, httpx=_import_httpx(), headers={"Authorization": f"Bearer {api_key}"} if api_key else {},
            timeout=timeout, max_retries=max_retries, backoff=backoff, max_backoff=max_backoff,
            max_connections=max_connections, server_n=server_n)
        self.router = ReplicaRouter(len(self.base_urls), replica_routing)
        self._context_window = context_window
        self._num_parameters = num_parameters
        self._config_source = config_source
        self._lock = threading.Lock()
        self._loop_thread: EventLoopThread | None = None
        self._warned_no_grammar = False
        self._fan_out: bool | None = {"auto": None, "yes": False, "no": True}[server_n]
        self.fanned_out_posts = 0

    @classmethod
    def from_settings(cls, settings: MFSSettings) -> OpenAIBackend:
        """A client for ``settings.base_urls`` serving ``settings.model``.

        The tokenizer comes from ``settings.tokenizer``, else from ``settings.model`` when
        that is a local path, ``"mfs-demo"`` or a name in the local Hugging Face cache;
        nothing is downloaded. No request is sent until the first use.

        Raises:
            ImportError: httpx is missing (``pip install "mfs-decoding[openai]"``).
            ValueError: ``settings.base_urls`` is empty.
        """
        if not settings.base_urls:
            msg = ("backend='openai' needs the server URLs: set base_urls (MFS_BASE_URLS, or --base-url on the "
                   "command line), e.g. ['http://localhost:8000/v1']")
            raise ValueError(msg)
        source = _hf.local_model_source(settings.model, settings.tokenizer)
        tokenizer = _hf.load_local_tokenizer(source)
        if tokenizer is None:
            logger.warning("no local tokenizer for %r: prompts go out without its chat template and tokens are not "
                           "counted here; set tokenizer (--tokenizer, MFS_TOKENIZER) to a local tokenizer folder, "
                           ".gguf file or packaged model of the served model", settings.model, stacklevel=2)
        return cls(
            settings.base_urls, settings.model, tokenizer=tokenizer, api_key=settings.api_key,
            timeout=settings.request_timeout, max_retries=settings.max_retries, context_window=settings.max_model_len,
            num_parameters=settings.num_parameters, config_source=source, server_n=settings.server_n,
            replica_routing=settings.replica_routing,
        )

    # --- Backend protocol ------------------------------------------------------------------
    @property
    def context_window(self) -> int:
        """Most tokens of prompt plus output (see ``context_window`` in the class docstring).

        The first access may send one GET ``/v1/models`` (one attempt, ``timeout`` seconds).

        Raises:
            ServerUnreachableError: that GET found nothing listening at any URL.
        """
        with self._lock:
            if self._context_window is None:
                self._context_window = self._discover_context_window()
            return self._context_window

    @property
    def num_parameters(self) -> int:
        """Parameters for the FLOPs estimate: given, else counted from the local config, else 0."""
        with self._lock:
            if self._num_parameters is None:
                config = _hf.load_local_config(self._config_source)
                try:
                    self._num_parameters = _hf.count_parameters(config) if config is not None else 0
                except Exception as exc:  # an unknown architecture leaves FLOPs unknown, not the decode
                    logger.info("cannot count parameters from %r: %s", self._config_source, exc)
                    self._num_parameters = 0
                if not self._num_parameters:
                    logger.warning("parameter count of %r unknown: FLOPs are reported as 0; set num_parameters",
                                   self.model_name, stacklevel=2)
            return self._num_parameters

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` under the local tokenizer (no special tokens added).

        Raises:
            RuntimeError: the backend has no local tokenizer.
        """
        if self.tokenizer is None:
            msg = (f"OpenAIBackend for {self.model_name!r} has no local tokenizer: set tokenizer (--tokenizer, "
                   "MFS_TOKENIZER) to a local tokenizer folder, .gguf file or packaged model")
            raise RuntimeError(msg)
        return len(self.tokenizer.encode(text, add_special_tokens=False))

    def apply_chat_template(
        self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None = None
    ) -> str | None:
        """The local tokenizer's chat template with the generation prompt (and ``tools``); None without one."""
        return _hf.render_chat(self.tokenizer, messages, tools)

    def generate(self, requests: Sequence[GenerationRequest]) -> list[list[Continuation]]:
        """Send all ``requests`` concurrently and wait for every answer.

        A request with ``n`` > 1 goes out as ``n`` single-sample POSTs (seeds
        :func:`~mfs_core.backends.openai_wire.sample_seed`) when the server cannot return ``n``
        samples (``server_n``).

        Returns:
            One list of ``request.n`` continuations per request, in order.

        Raises:
            ContextWindowError: a prompt does not fit the context window.
            BackendOutputError: an answer that cannot be used (its MissingLogprobsError: a server
                sent no log-probs; its SingleSampleError: one choice for ``n`` > 1 under ``server_n="yes"``).
            ServerUnreachableError: nothing listens at any of the URLs a request tried.
            ServerRequestError: a request still failed after ``max_retries`` retries, or a
                non-retryable answer (the first failing request's error, in request order).
        """
        warn_unhonoured_choices(self, requests, logger)
        if not requests:
            return []
        return self._own_loop().run(self.agenerate(requests))

    async def agenerate(self, requests: Sequence[GenerationRequest]) -> list[list[Continuation]]:
        """Async :meth:`generate` on a pooled ``httpx.AsyncClient`` of the running event loop (same errors)."""
        if not requests:
            return []
        flat, groups = self._expand(requests)
        posts = await asyncio.to_thread(self._prepare, flat)  # tokenizing, maybe GET /v1/models
        try:
            return await self._send_round(requests, flat, groups, posts)
        finally:
            self.router.release(flat, [post.replica for post in posts])

    @property
    def unavailable_reason(self) -> str | None:
        """Why the servers cannot serve now (one line), or None (:attr:`HTTPSender.unavailable_reason
        <mfs_core.backends.openai_sender.HTTPSender.unavailable_reason>`); ``mfs serve``'s ``/health`` reads it."""
        return self.sender.unavailable_reason

    def check_health(self) -> None:
        """Ask every replica for ``GET /models`` (one attempt each, at most 5 s); return once one answers 200.

        Raises:
            ServerUnreachableError: no replica answered 200 (the message names each and what it said).
        """
        self.sender.check_health()

    @property
    def cancelled_posts(self) -> int:
        """POSTs cut off in flight or never sent because their request's cancel event was set."""
        return self.sender.cancelled_posts

    @property
    def fans_out(self) -> bool | None:
        """True when requests with ``n`` > 1 go out as one POST per sample, False when as one
        POST, None while ``server_n="auto"`` has not yet seen such a request answered."""
        return self._fan_out

    def close(self) -> None:
        """Close the pooled connections of :meth:`generate` and stop its event-loop thread (a later call starts them again)."""
        with self._lock:
            loop_thread, self._loop_thread = self._loop_thread, None
        if loop_thread is None or not loop_thread.alive:
            return
        if not loop_thread.in_loop():
            try:
                loop_thread.run(self.sender.aclose(), timeout=10.0)
            except Exception:  # closing is best effort: the thread stops either way
                logger.warning("closing the HTTP connections failed", exc_info=True)
        loop_thread.stop()

    async def aclose(self) -> None:
        """Close the async client of the running event loop, then :meth:`close`."""
        await self.sender.aclose()
        await asyncio.to_thread(self.close)

    def __enter__(self) -> OpenAIBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- a round ---------------------------------------------------------------------------
    def _own_loop(self) -> EventLoopThread:
        """The backend's event-loop thread, where :meth:`generate` sends its POSTs (started at first use)."""
        with self._lock:
            if self._loop_thread is None or not self._loop_thread.alive:
                self._loop_thread = EventLoopThread("mfs-http")
            return self._loop_thread

    async def _send_round(self, requests: Sequence[GenerationRequest], flat: list[GenerationRequest],
                          groups: list[list[int]], posts: list[Post]) -> list[list[Continuation]]:
        """:meth:`agenerate`'s POSTs, sent by :attr:`sender`; a round a fanning-out server refused is sent again."""
        outcomes = await self.sender.send_round(posts, self._lanes(posts, flat))
        results, again = self._collect(requests, groups, outcomes)
        for i, redone in zip(again, await self.agenerate([requests[i] for i in again]) if again else []):
            results[i] = redone
        return results

    def _lanes(self, posts: list[Post], flat: Sequence[GenerationRequest]) -> list[list[int]]:
        """The POSTs of a round as lanes, each sent one POST after another; lanes run concurrently.

        Started in :func:`~mfs_core.backends._hf.prefix_order` (shared prefixes together).
        A server that returns ``n`` samples gets one lane per POST (all concurrent). A server
        that samples once per request (fanning out) gets one lane per replica: such servers
        (llama-cpp-python's) serve one request at a time and reuse the KV cache of the
        previous prompt, whose float rounding then depends on which request came before, so
        concurrent POSTs would make a seeded decode differ from run to run (measured in
        ``tests/integration/test_llamacpp_server.py``); in a fixed order they repeat.
        """
        order = _hf.prefix_order([request.prompt for request in flat])
        if self._fan_out is not True:
            return [[i] for i in order]
        lanes: dict[int, list[int]] = {}
        for i in order:
            lanes.setdefault(posts[i].replica, []).append(i)
        return list(lanes.values())

    def _expand(self, requests: Sequence[GenerationRequest]) -> tuple[list[GenerationRequest], list[list[int]]]:
        """The POSTs for ``requests`` and, per request, the indices of its POSTs.

        Fanning out, a sampled request with ``n`` > 1 becomes ``n`` requests with ``n=1``
        and seeds ``sample_seed(seed, k)``, k = 0..n-1; others are sent as they are.
        """
        flat: list[GenerationRequest] = []
        groups: list[list[int]] = []
        fan_out = self._fan_out is True
        for request in requests:
            if fan_out and request.n > 1 and not request.greedy:
                groups.append(list(range(len(flat), len(flat) + request.n)))
                flat.extend(replace(request, n=1, seed=sample_seed(request.seed, k)) for k in range(request.n))
            else:
                groups.append([len(flat)])
                flat.append(request)
        if len(flat) > len(requests):
            with self._lock:
                self.fanned_out_posts += len(flat) - len(requests) + sum(len(g) > 1 for g in groups)
        return flat, groups

    def _collect(
        self, requests: Sequence[GenerationRequest], groups: list[list[int]], outcomes: list[Any]
    ) -> tuple[list[Any], list[int]]:
        """Each request's continuations, and the requests to send again fanned out.

        The first :class:`~mfs_core.errors.SingleSampleError` under ``server_n="auto"`` switches
        this backend to fanning out (once, logged) and the whole round is to be sent again (every
        index in the second list), so that every answer kept was sent as a fanned-out round is.
        Any other error is raised (the first in request order).

        Raises:
            The first error among ``outcomes`` that is no such :class:`~mfs_core.errors.SingleSampleError`.
        """
        results: list[Any] = []
        again = []
        for i, group in enumerate(groups):
            errors = [outcomes[j] for j in group if isinstance(outcomes[j], BaseException)]
            if errors and all(isinstance(e, SingleSampleError) for e in errors) and self.server_n == "auto":
                results.append(None)
                again.append(i)
            elif errors:
                raise errors[0]
            else:
                results.append([c for j in group for c in outcomes[j]])
        if again:  # the whole round again, one POST at a time: its answers then repeat with the seeds
            again = list(range(len(requests)))
        with self._lock:
            if again and self._fan_out is not True:
                self._fan_out = True
                logger.info("%s returns one sample per request: requests with n > 1 go out as n requests with "
                            "distinct seeds from now on", self.base_urls[0])
            elif self._fan_out is None and any(results[i] is not None and r.n > 1 and not r.greedy
                                               for i, r in enumerate(requests)):
                self._fan_out = False  # n > 1 answered in full: the server samples n per request
        return results, again

    # --- requests ---------------------------------------------------------------------------
    def _prepare(self, requests: Sequence[GenerationRequest]) -> list[Post]:
        """The :class:`~mfs_core.backends.openai_sender.Post` of each request, its replica assigned (held by
        :attr:`router` until released); checks the context window.

        Raises:
            ContextWindowError: a prompt does not fit (nothing is then held on a replica).
        """
        self._warn_grammars(requests)
        window = self.context_window  # may GET /v1/models: before any work is held on a replica
        replicas = self.router.assign(requests)
        try:
            return self._bodies(requests, replicas, window)
        except BaseException:
            self.router.release(requests, replicas)
            raise

    def _bodies(self, requests: Sequence[GenerationRequest], replicas: list[int], window: int) -> list[Post]:
        """The POST of each request (see :meth:`_prepare` and the module docstring for the body's fields)."""
        posts = []
        for i, (request, replica) in enumerate(zip(requests, replicas)):
            prompt_tokens = None
            max_tokens = request.max_tokens
            body: dict[str, Any] = {"model": self.model_name, "prompt": request.prompt}
            if self.tokenizer is not None:
                prompt_tokens = len(_hf.encode_prompt(self.tokenizer, request.prompt))
                if prompt_tokens >= window:
                    msg = (f"prompt {i} has {prompt_tokens} tokens, which does not fit the context window of {window} "
                           f"tokens of model {self.model_name!r}: {request.prompt[:60]!r}...")
                    raise ContextWindowError(msg)
                max_tokens = min(max_tokens, window - prompt_tokens)
                if self.vllm_extensions and _hf.starts_with_bos(self.tokenizer, request.prompt):
                    body["add_special_tokens"] = False
            # Greedy: temperature 0 and n=1 (vLLM refuses n > 1 when greedy); the answer is repeated n times.
            n, temperature = (1, 0.0) if request.greedy else (request.n, request.temperature)
            body.update(n=n, max_tokens=max_tokens, temperature=temperature, top_p=request.top_p,
                        stop=list(request.stop), seed=request.seed, logprobs=max(1, request.top_logprobs))
            if self.vllm_extensions:
                body["return_token_ids"] = True
                if request.top_logprobs:  # top_logprobs keyed by token id: two tokens of one text stay two
                    body["return_tokens_as_token_ids"] = True
                if request.grammar is not None and request.grammar.remote is not None:
                    body["structured_outputs"] = {"structural_tag": request.grammar.remote}
            body.update(self.extra_body)
            posts.append(Post(i, request, body, replica, prompt_tokens))
        return posts

    def _warn_grammars(self, requests: Sequence[GenerationRequest]) -> None:
        """Log once each that grammar requests go out unconstrained (see the module docstring)."""
        if self.vllm_extensions:
            warn_unconstrained_grammar(self, requests, logger)
        elif not self._warned_no_grammar and any(r.grammar is not None for r in requests):
            self._warned_no_grammar = True
            logger.warning("%s sends no grammar (constrain_actions) with vllm_extensions=False: actions are sampled "
                           "unconstrained and checked after parsing", self.base_urls[0])

    def _discover_context_window(self) -> int:
        """GET ``/v1/models`` (vLLM's ``max_model_len``), then the tokenizer, then unknown.

        Raises:
            ServerUnreachableError: every base URL refused the connection (nothing listens).
        """
        served = self.sender.served_context_window(self.model_name)
        if served is not None:
            return served
        length = getattr(self.tokenizer, "model_max_length", None)
        if isinstance(length, int) and 0 < length < 10**8:
            return length
        logger.warning("context window of %r unknown: prompts are not checked locally; set max_model_len",
                       self.model_name, stacklevel=2)
        return UNKNOWN_CONTEXT_WINDOW
