"""The HTTP backend's sender: POSTs with retries, over pooled connections, with in-flight cancellation.

:class:`HTTPSender` is a part of :class:`~mfs_core.backends.openai.OpenAIBackend`, built by it with
what it uses (the ``httpx`` module, the replicas' URLs, the headers, the retry policy and the
connection limit) and nothing else. It sends a round's POSTs (:meth:`HTTPSender.send_round`) on one
pooled ``httpx.AsyncClient`` per event loop and maps each answer through
:func:`~mfs_core.backends.openai_wire.parse_completion`.

:meth:`HTTPSender._attempts` is the retry loop with no I/O: it yields each attempt's URL and delay and
is sent back the attempt's response or error, and decides from them (a 408 / 429 / 5xx, a timeout, a
connection error or a body that is not JSON is retried with exponential backoff or the server's
``Retry-After``, on the next replica; a refused connection everywhere is
:class:`~mfs_core.errors.ServerUnreachableError` at once; other errors are raised).
:meth:`HTTPSender._post` drives it over ``httpx.AsyncClient``. The sender also keeps each replica's
last outcome, for :attr:`HTTPSender.unavailable_reason`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import weakref
from collections.abc import Generator, Sequence
from typing import Any, NamedTuple

from mfs_core.backends.openai_wire import (
    _CONTEXT_ERROR,
    _N_REFUSED,
    _RETRY_STATUS,
    ServerN,
    _error_text,
    _Fault,
    _retry_after,
    parse_completion,
)
from mfs_core.errors import ContextWindowError, ServerRequestError, ServerUnreachableError, SingleSampleError
from mfs_core.types import Continuation, GenerationRequest

__all__ = ["CANCEL_POLL_S", "HTTPSender", "Post"]

logger = logging.getLogger("mfs_core.backends.openai")  # its messages stay under the backend's logger

CANCEL_POLL_S = 0.02
"""Seconds between two looks at the cancel events of a round's requests while their POSTs are in flight."""


class Post(NamedTuple):
    """One POST of a round, as the backend prepared it.

    Attributes:
        index: the request's index in the round (for messages).
        request: the request it samples.
        body: the JSON body (``model``, ``prompt``, ``n``, ``max_tokens``, ...).
        replica: the index of the replica it is sent to first (retries move to the next ones).
        prompt_tokens: the prompt's length under the local tokenizer (tokens), or None without one.
    """

    index: int
    request: GenerationRequest
    body: dict[str, Any]
    replica: int
    prompt_tokens: int | None


async def _cut_off_cancelled(in_flight: dict[int, asyncio.Future[Any]], requests: Sequence[GenerationRequest]) -> None:
    """Every :data:`CANCEL_POLL_S`, cancel the in-flight POSTs whose request's cancel event is set.

    One watcher per :meth:`HTTPSender.send_round` call (a round's requests share few cancel
    events: one per decode), so the loop wakes once a poll, not once per POST. Runs until cancelled.

    Args:
        in_flight: POST index -> the task of its POST, kept current by the senders.
        requests: the round's requests, by POST index.
    """
    while True:
        await asyncio.sleep(CANCEL_POLL_S)
        for index, post in list(in_flight.items()):
            cancel = requests[index].cancel
            if cancel is not None and cancel.is_set():
                post.cancel()


class HTTPSender:
    """Sends POSTs to ``{base_url}/completions`` with retries across the replicas.

    Args:
        base_urls: one URL per replica, ending in ``/v1`` (already normalised).
        httpx: the ``httpx`` module.
        headers: sent with every request (``Authorization``, or none).
        timeout: seconds per HTTP attempt (connect, read, write, pool).
        max_retries: retries of a POST after a retryable fault.
        backoff: first backoff delay (seconds); it doubles each retry.
        max_backoff: longest backoff delay (seconds).
        max_connections: most concurrent requests (and pooled connections) per event loop.
        server_n: the backend's ``server_n`` setting: unless ``"yes"``, a 4xx answer refusing
            ``n`` > 1 raises :class:`~mfs_core.errors.SingleSampleError` (the backend then fans out).

    Attributes:
        cancelled_posts: POSTs cut off in flight or never sent because their request's cancel
            event was set.
    """

    def __init__(self, base_urls: Sequence[str], *, httpx: Any, headers: dict[str, str], timeout: float,
                 max_retries: int, backoff: float, max_backoff: float, max_connections: int,
                 server_n: ServerN) -> None:
        self.base_urls = list(base_urls)
        self.httpx = httpx
        self.headers = dict(headers)
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.max_connections = max_connections
        self.server_n = server_n
        self.cancelled_posts = 0
        self._lock = threading.Lock()
        self._clients: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # event loop -> AsyncClient
        self._replica_faults: dict[str, str] = {}
        self._budget_spent = False
        self._warned_tokenizer = False

    # --- health -------------------------------------------------------------------------------
    @property
    def unavailable_reason(self) -> str | None:
        """Why the servers cannot serve now (one line), or None.

        Set once a request has spent its retry budget (``max_retries``) while every replica's last
        POST failed, cleared by the next POST any replica answers: the servers may come back, so
        unlike a dead backend's ``dead_reason`` this never fails a call by itself. A replica is
        down from a POST that got no answer (refused, timed out) or a 5xx until one of its POSTs
        is answered.
        """
        faults = self._replica_faults
        if not self._budget_spent or any(url not in faults for url in self.base_urls):
            return None
        where = "; ".join(f"{url}: {faults[url]}" for url in self.base_urls)
        return f"every replica of the HTTP backend is down past its retry budget (max_retries={self.max_retries}): {where}"

    def note_replica(self, url: str, response: Any, error: Exception | None) -> None:
        """Record one POST's outcome at ``url`` (its replica's ``.../completions``) for :attr:`unavailable_reason`.

        Args:
            url: the URL posted to.
            response: the ``httpx.Response``, or None when the POST got none.
            error: the transport error of a POST that got no response, else None.
        """
        base = url.removesuffix("/completions")
        if error is None and response.status_code < 500:
            self._replica_faults.pop(base, None)
            self._budget_spent = False
        else:
            self._replica_faults[base] = (f"{type(error).__name__}: {str(error)[:80]}" if error is not None
                                          else f"HTTP {response.status_code}")

    def check_health(self) -> None:
        """Ask every replica for ``GET /models`` (one attempt each, at most 5 s); return once one answers 200.

        Raises:
            ServerUnreachableError: no replica answered 200 (the message names each and what it said).
        """
        said = {}
        for url in self.base_urls:
            try:
                response = self.httpx.get(url + "/models", headers=self.headers, timeout=min(self.timeout, 5.0))
            except self.httpx.TransportError as exc:
                said[url] = f"{type(exc).__name__}: {exc}"
                continue
            if response.status_code == 200:
                return
            said[url] = f"HTTP {response.status_code}"
        msg = "no replica answers GET /models: " + "; ".join(f"{url} ({what})" for url, what in said.items())
        raise ServerUnreachableError(msg)

    def served_context_window(self, model: str) -> int | None:
        """``max_model_len`` of ``model`` from GET ``/v1/models`` (vLLM's model card), or None.

        Asks the replicas in order, one attempt each (``timeout`` seconds); the first that answers
        decides (discovery is best effort: any other failure is logged at INFO and gives None).

        Args:
            model: the served model name (the card whose ``id`` it is; a lone card otherwise).

        Returns:
            The context window (tokens), or None when the server does not say.

        Raises:
            ServerUnreachableError: every base URL refused the connection (nothing listens).
        """
        refused: dict[str, Exception] = {}
        for base in self.base_urls:
            url = base + "/models"
            try:
                response = self.httpx.get(url, headers=self.headers, timeout=self.timeout)
                response.raise_for_status()
                cards = response.json().get("data", [])
                card = next((c for c in cards if c.get("id") == model), cards[0] if len(cards) == 1 else None)
                if card is not None and isinstance(card.get("max_model_len"), int):
                    return card["max_model_len"]
                return None
            except self.httpx.ConnectError as exc:
                refused[base] = exc
            except Exception as exc:  # discovery is best effort; the caller's fallbacks say what happens
                logger.info("GET %s gave no context window: %s", url, exc)
                return None
        raise self._unreachable(refused)

    # --- a round --------------------------------------------------------------------------------
    async def send_round(self, posts: Sequence[Post], lanes: Sequence[Sequence[int]]) -> list[Any]:
        """Send a round's POSTs on the running loop's pooled client: ``lanes`` run concurrently, the
        POSTs of one lane one after another.

        A POST whose request's cancel event is set while it is in flight is cancelled within
        :data:`CANCEL_POLL_S` (the connection is closed, which makes ``vllm serve`` abort it); one
        whose event is set before it starts is not sent. Either comes back as ``request.n`` empty
        continuations with ``finish_reason="abort"``.

        Args:
            posts: the round's POSTs.
            lanes: indices into ``posts``; every index in exactly one lane.

        Returns:
            Per POST, its continuations or the exception it raised (:meth:`_attempts`).
        """
        client = self._client()
        outcomes: list[Any] = [None] * len(posts)
        in_flight: dict[int, asyncio.Future[Any]] = {}

        async def send_in_turn(indices: Sequence[int]) -> None:
            for i in indices:
                try:
                    outcomes[i] = await self._post_unless_cancelled(client, posts[i], in_flight, i)
                except Exception as exc:
                    outcomes[i] = exc

        watcher = None
        if any(post.request.cancel is not None for post in posts):
            watcher = asyncio.ensure_future(_cut_off_cancelled(in_flight, [post.request for post in posts]))
        try:
            await asyncio.gather(*(send_in_turn(lane) for lane in lanes))
        finally:
            if watcher is not None:
                watcher.cancel()
                await asyncio.gather(watcher, return_exceptions=True)
        return outcomes

    def _client(self) -> Any:
        """The running event loop's pooled ``httpx.AsyncClient`` (made on first use)."""
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            limits = self.httpx.Limits(max_connections=self.max_connections,
                                       max_keepalive_connections=self.max_connections)
            client = self._clients[loop] = self.httpx.AsyncClient(timeout=self.timeout, limits=limits)
        return client

    async def aclose(self) -> None:
        """Close the pooled client of the running event loop, if it has one (a later round opens another)."""
        client = self._clients.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.aclose()

    async def _post_unless_cancelled(self, client: Any, post: Post, in_flight: dict[int, asyncio.Future[Any]],
                                     index: int) -> list[Continuation]:
        """:meth:`_post` one POST, registered in ``in_flight[index]`` while it runs.

        The round's one watcher (:func:`_cut_off_cancelled`) cancels a registered POST within
        :data:`CANCEL_POLL_S` once its request's cancel event is set; a request already cancelled
        is not sent.

        Returns:
            The request's continuations; cancelled (before or during the POST): ``request.n``
            empty ones with ``finish_reason="abort"`` (the engine fails the decode that asked).
        """
        cancel = post.request.cancel
        if cancel is None:
            return await self._post(client, post)
        if not cancel.is_set():
            task = in_flight[index] = asyncio.ensure_future(self._post(client, post))
            try:
                await asyncio.wait([task])  # not cancelled with it: the watcher's cancel is told apart below
            finally:
                del in_flight[index]
                if not task.done():  # the caller itself was cancelled: close the connection
                    task.cancel()
                    await asyncio.gather(task, return_exceptions=True)
            if not task.cancelled():
                return task.result()
        with self._lock:
            self.cancelled_posts += 1
        return [Continuation(text="", token_ids=(), logprob_sum=0.0, finish_reason="abort")] * post.request.n

    async def _post(self, client: Any, post: Post) -> list[Continuation]:
        """POST one request, retrying faults (:meth:`_attempts`)."""
        steps, reply = self._attempts(post), None
        try:
            while True:
                kind, value = steps.send(reply)
                if kind == "sleep":
                    await asyncio.sleep(value)
                    reply = None
                    continue
                try:
                    reply = (await client.post(value, json=post.body, headers=self.headers), None)
                except self.httpx.TransportError as exc:
                    reply = (None, exc)
                self.note_replica(value, *reply)
        except StopIteration as done:
            return done.value

    # --- the retry loop, without I/O --------------------------------------------------------------
    def _attempts(self, post: Post) -> Generator[tuple[str, Any], Any, list[Continuation]]:
        """The retry loop of one POST, without I/O: :meth:`_post` drives it.

        Yields ``("post", url)``, to be answered with ``(response, None)`` or ``(None, error)``
        (an ``httpx.TransportError``), and ``("sleep", seconds)``, answered with None; returns
        the continuations. A fault (see the module docstring) is retried up to
        ``max_retries`` times, across the replicas' URLs; a refused connection moves to the
        next URL at once (:meth:`_refused`).

        Raises:
            ServerUnreachableError: every URL the request may try refused the connection.
            ServerRequestError: still failing after ``max_retries`` retries, or a non-retryable answer.
            ContextWindowError / SingleSampleError / BackendOutputError: see :meth:`_outcome`.
        """
        refused: dict[str, Exception] = {}
        for attempt in range(self.max_retries + 1):
            url = self._url(post.replica, attempt)
            response, error = yield ("post", url)
            if isinstance(error, self.httpx.ConnectError) and self._refused(refused, post.replica, attempt, url, error):
                continue
            outcome = self._outcome(url, post.request, post.prompt_tokens, response, error,
                                    model=str(post.body.get("model", "")))
            if not isinstance(outcome, _Fault):
                return outcome
            logger.info("request %d, attempt %d at %s: %s", post.index, attempt + 1, url, outcome.message)
            if attempt < self.max_retries:
                yield ("sleep", self._delay(attempt, outcome))
        raise self._failed(post.index, post.replica, outcome)

    def _url(self, replica: int, attempt: int) -> str:
        """The URL of attempt ``attempt`` of a POST first sent to ``replica``: the next replica's each retry."""
        return self.base_urls[(replica + attempt) % len(self.base_urls)] + "/completions"

    def _delay(self, attempt: int, fault: _Fault) -> float:
        """Seconds to wait before retry ``attempt + 1``: the server's Retry-After, else ``backoff · 2^attempt``
        up to ``max_backoff``."""
        if fault.retry_after is not None:
            return fault.retry_after
        return min(self.max_backoff, self.backoff * 2**attempt)

    def _outcome(self, url: str, request: GenerationRequest, prompt_tokens: int | None, response: Any = None,
                 error: Exception | None = None, *, model: str = "") -> list[Continuation] | _Fault:
        """The continuations of one attempt, or a retryable :class:`_Fault`.

        Args:
            url: the URL posted to.
            request: the request the POST samples.
            prompt_tokens: its prompt's length under the local tokenizer (tokens), or None.
            response: the ``httpx.Response``, or None when the POST got none.
            error: the transport error of a POST that got no response, else None.
            model: the served model name (named in a too-long prompt's error).

        Raises:
            SingleSampleError: a 4xx refusing ``n`` > 1 (unless ``server_n="yes"``), or one choice for ``n`` > 1.
            ContextWindowError: a 400 about the context length.
            ServerRequestError: any other 4xx answer.
            BackendOutputError: an answer :func:`~mfs_core.backends.openai_wire.parse_completion` cannot map
                (its :class:`~mfs_core.errors.MissingLogprobsError` without log-probs).
        """
        if error is not None:
            if isinstance(error, self.httpx.TimeoutException):
                return _Fault(f"no answer within {self.timeout} s ({error.__class__.__name__})")
            return _Fault(f"connection error ({error.__class__.__name__}: {error})")
        status = response.status_code
        if status >= 400 and request.n > 1 and not request.greedy and self.server_n != "yes":
            text = _error_text(response.content)
            if _N_REFUSED.search(text) and not _CONTEXT_ERROR.search(text):
                msg = f"{url} refused n={request.n} (HTTP {status}: {text})"
                raise SingleSampleError(msg)
        if status in _RETRY_STATUS or status >= 500:
            retry_after = _retry_after(response.headers.get("retry-after"))
            return _Fault(f"HTTP {status}: {_error_text(response.content)}", retry_after)
        if status >= 400:
            text = _error_text(response.content)
            if status == 400 and _CONTEXT_ERROR.search(text):
                msg = f"{url} refused a prompt of model {model!r} as too long: {text}"
                raise ContextWindowError(msg)
            msg = f"{url} answered HTTP {status}: {text}"
            raise ServerRequestError(msg)
        try:
            body = json.loads(response.content)
        except (ValueError, UnicodeDecodeError) as exc:
            return _Fault(f"malformed JSON ({exc}): {response.content[:120]!r}")
        continuations = parse_completion(body, request, url=url, prompt_tokens=prompt_tokens)
        served = continuations[0].prompt_tokens if continuations else prompt_tokens
        if prompt_tokens is not None and served != prompt_tokens and not self._warned_tokenizer:
            self._warned_tokenizer = True
            logger.warning("%s counted %d prompt tokens where the local tokenizer counts %d: is the tokenizer the "
                           "served model's?", url, served, prompt_tokens)
        return continuations

    def _failed(self, index: int, replica: int, fault: _Fault) -> ServerRequestError:
        """The error of POST ``index`` (first sent to ``replica``) once its retries are spent; marks the budget spent."""
        self._budget_spent = True
        urls = sorted({self._url(replica, attempt) for attempt in range(self.max_retries + 1)})
        msg = f"request {index} to {', '.join(urls)} failed {self.max_retries + 1} times; last: {fault.message}"
        return ServerRequestError(msg)

    def _unreachable(self, refused: dict[str, Exception]) -> ServerUnreachableError:
        """The error once every URL a request may try refused the connection."""
        self._budget_spent = True
        where = ", ".join(f"{url} ({error.__class__.__name__}: {error})" for url, error in refused.items())
        msg = (f"nothing answers at {where}: is the server running, and is base_urls (--base-url, MFS_BASE_URLS) "
               "its address, e.g. http://127.0.0.1:8000/v1? Not retried: a refused connection means nothing listens")
        return ServerUnreachableError(msg)

    def _refused(self, refused: dict[str, Exception], replica: int, attempt: int, url: str, error: Exception) -> bool:
        """Record a refused connection; True when another URL remains to try (no wait before it).

        A refused connection (``httpx.ConnectError``: nothing listens, or the host name does
        not resolve) is not retried at the same URL: the next replica's is tried at once, and
        once every replica's URL has refused, :class:`~mfs_core.errors.ServerUnreachableError` is raised.

        Raises:
            ServerUnreachableError: no URL is left to try.
        """
        refused[url] = error
        if attempt < self.max_retries and self._url(replica, attempt + 1) not in refused:
            return True
        raise self._unreachable({u.removesuffix("/completions"): e for u, e in refused.items()})
