"""Sending one request with retries, for :class:`~mfs_core.backends.openai.OpenAIBackend` (a mixin).

:meth:`RetryingSender._attempts` is the retry loop with no I/O: it yields each attempt's URL and
delay and is sent back the attempt's response or error, and decides from them (a 408 / 429 / 5xx or
a connection error is retried with exponential backoff or the server's ``Retry-After``, on the
next replica; a refused connection everywhere is :class:`ServerUnreachableError` at once; other
errors are raised). :meth:`_asend` drives it over ``httpx.AsyncClient``.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Generator
from typing import Any

from mfs_core.backends.openai_wire import (
    _CONTEXT_ERROR,
    _N_REFUSED,
    _RETRY_STATUS,
    OpenAIBackendError,
    ServerUnreachableError,
    SingleSampleError,
    _error_text,
    _Fault,
    _retry_after,
    parse_completion,
)
from mfs_core.errors import ContextWindowError
from mfs_core.types import Continuation, GenerationRequest

__all__ = ["RetryingSender"]

logger = logging.getLogger("mfs_core.backends.openai")  # its messages stay under the backend's logger


class RetryingSender:
    """The retry loop of the HTTP backend and its async driver (reads the backend's
    ``base_urls``, ``max_retries``, ``backoff``, ``max_backoff``, ``timeout``, ``server_n`` and ``httpx``).

    It also keeps each replica's last outcome, for :attr:`unavailable_reason`: a replica is down
    from a POST that got no answer (refused, timed out) or a 5xx until one of its POSTs is answered.
    """

    @property
    def unavailable_reason(self) -> str | None:
        """Why the servers cannot serve now (one line), or None.

        Set once a request has spent its retry budget (``max_retries``) while every replica's last
        POST failed, cleared by the next POST any replica answers: the servers may come back, so
        unlike a dead backend's ``dead_reason`` this never fails a call by itself. ``mfs serve``'s
        ``/health`` reads it.
        """
        faults = self.__dict__.get("_replica_faults", {})
        if not self.__dict__.get("_budget_spent") or any(url not in faults for url in self.base_urls):
            return None
        where = "; ".join(f"{url}: {faults[url]}" for url in self.base_urls)
        return f"every replica of the HTTP backend is down past its retry budget (max_retries={self.max_retries}): {where}"

    def _note_replica(self, url: str, response: Any, error: Exception | None) -> None:
        """Record one POST's outcome at ``url`` (its replica's ``.../completions``) for :attr:`unavailable_reason`."""
        faults = self.__dict__.setdefault("_replica_faults", {})
        base = url.removesuffix("/completions")
        if error is None and response.status_code < 500:
            faults.pop(base, None)
            self._budget_spent = False
        else:
            faults[base] = (f"{type(error).__name__}: {str(error)[:80]}" if error is not None
                            else f"HTTP {response.status_code}")

    def check_health(self) -> None:
        """Ask every replica for ``GET /models`` (one attempt each, at most 5 s); return once one answers 200.

        Raises:
            ServerUnreachableError: no replica answered 200 (the message names each and what it said).
        """
        said = {}
        for url in self.base_urls:
            try:
                response = self.httpx.get(url + "/models", headers=self._headers, timeout=min(self.timeout, 5.0))
            except self.httpx.TransportError as exc:
                said[url] = f"{type(exc).__name__}: {exc}"
                continue
            if response.status_code == 200:
                return
            said[url] = f"HTTP {response.status_code}"
        msg = "no replica answers GET /models: " + "; ".join(f"{url} ({what})" for url, what in said.items())
        raise ServerUnreachableError(msg)

    def _url(self, replica: int, attempt: int) -> str:
        return self.base_urls[(replica + attempt) % len(self.base_urls)] + "/completions"

    def _delay(self, attempt: int, fault: _Fault) -> float:
        if fault.retry_after is not None:
            return fault.retry_after
        return min(self.max_backoff, self.backoff * 2**attempt)

    def _outcome(self, url: str, request: GenerationRequest, prompt_tokens: int | None,
                 response: Any = None, error: Exception | None = None) -> list[Continuation] | _Fault:
        """The continuations of one attempt, a retryable :class:`_Fault`, or an exception raised."""
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
                msg = f"{url} refused a prompt of model {self.model_name!r} as too long: {text}"
                raise ContextWindowError(msg)
            msg = f"{url} answered HTTP {status}: {text}"
            raise OpenAIBackendError(msg)
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

    def _failed(self, index: int, replica: int, fault: _Fault) -> OpenAIBackendError:
        self._budget_spent = True
        urls = sorted({self._url(replica, attempt) for attempt in range(self.max_retries + 1)})
        msg = f"request {index} to {', '.join(urls)} failed {self.max_retries + 1} times; last: {fault.message}"
        return OpenAIBackendError(msg)

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
        once every replica's URL has refused, :class:`ServerUnreachableError` is raised.

        Raises:
            ServerUnreachableError: no URL is left to try.
        """
        refused[url] = error
        if attempt < self.max_retries and self._url(replica, attempt + 1) not in refused:
            return True
        raise self._unreachable({u.removesuffix("/completions"): e for u, e in refused.items()})

    def _attempts(self, index: int, request: GenerationRequest, replica: int,
                  prompt_tokens: int | None) -> Generator[tuple[str, Any], Any, list[Continuation]]:
        """The retry loop of one request, without I/O: :meth:`_asend` drives it.

        Yields ``("post", url)``, to be answered with ``(response, None)`` or ``(None, error)``
        (an ``httpx.TransportError``), and ``("sleep", seconds)``, answered with None; returns
        the continuations. A fault (see the module docstring) is retried up to
        ``max_retries`` times, across the replicas' URLs; a refused connection moves to the
        next URL at once (:meth:`_refused`).

        Raises:
            ServerUnreachableError: every URL the request may try refused the connection.
            OpenAIBackendError: still failing after ``max_retries`` retries, or a non-retryable answer.
            ContextWindowError / SingleSampleError / MissingLogprobsError: see :meth:`_outcome`.
        """
        refused: dict[str, Exception] = {}
        for attempt in range(self.max_retries + 1):
            url = self._url(replica, attempt)
            response, error = yield ("post", url)
            if isinstance(error, self.httpx.ConnectError) and self._refused(refused, replica, attempt, url, error):
                continue
            outcome = self._outcome(url, request, prompt_tokens, response, error)
            if not isinstance(outcome, _Fault):
                return outcome
            logger.info("request %d, attempt %d at %s: %s", index, attempt + 1, url, outcome.message)
            if attempt < self.max_retries:
                yield ("sleep", self._delay(attempt, outcome))
        raise self._failed(index, replica, outcome)

    async def _asend(self, client: Any, index: int, request: GenerationRequest, body: dict[str, Any], replica: int,
                     prompt_tokens: int | None) -> list[Continuation]:
        """POST one request, retrying faults (:meth:`_attempts`)."""
        steps, reply = self._attempts(index, request, replica, prompt_tokens), None
        try:
            while True:
                kind, value = steps.send(reply)
                if kind == "sleep":
                    await asyncio.sleep(value)
                    reply = None
                    continue
                try:
                    reply = (await client.post(value, json=body, headers=self._headers), None)
                except self.httpx.TransportError as exc:
                    reply = (None, exc)
                self._note_replica(value, *reply)
        except StopIteration as done:
            return done.value
