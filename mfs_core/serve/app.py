"""The ASGI app of ``mfs serve``: MFS behind OpenAI's chat and completions endpoints.

One :class:`~mfs_core.engine.MFSEngine` serves every request, so concurrent requests share
the model: under lockstep scheduling (transformers, HTTP) the engine batches the rounds of all live
decodes into one ``backend.generate`` call (DESIGN.md); under continuous scheduling (vLLM, the default
there: :attr:`MFSSettings.scheduler`) each decode's requests go to vLLM's ``AsyncLLM`` on their own
(:mod:`mfs_core.engine`, docs/serve.md). Each request is checked (:mod:`mfs_core.serve.schemas`), planned
and rendered as the adapters do (:mod:`mfs_core.call`), held to the
operator's limits and admitted by its worst-case work (:mod:`mfs_core.serve.limits`: 400 over a
limit, 429 with ``Retry-After`` while the engine is full), then decoded within
``request_timeout`` (past it: 504, the decodes abandoned);
a streamed request sends each chosen step as ``delta.reasoning`` (and ``reasoning_content``)
while the search runs, then the answer as ``delta.content``, then ``usage``; a non-streamed
reply carries the same text as ``message.reasoning`` and ``message.reasoning_content``
(completions: ``choices[].reasoning``), as vLLM's reasoning parsers return them. A client that
disconnects abandons its decodes: the engine drops them at its next round boundary (continuous:
at once, their requests aborted in vLLM).

Routes: ``POST /v1/chat/completions``, ``POST /v1/completions``, ``GET /v1/models`` (these
need the server key when one is set), ``GET /health`` (liveness), ``GET /ready`` (readiness), ``GET
/metrics`` (Prometheus). Once the backend cannot serve, :mod:`mfs_core.serve.health` answers the probes
and new requests with 503 and exits or reloads (``on_backend_death``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import hmac
import itertools
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable
from concurrent.futures import CancelledError, Future
from dataclasses import dataclass
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from mfs_core.call import Call, Caller, CallKeywords, ChatInput, EngineSource, TextInput
from mfs_core.decoders import decoder_spec
from mfs_core.engine import MFSEngine, share_group
from mfs_core.engine.waiting import abandon, await_results
from mfs_core.events import DecodeEvent
from mfs_core.engine.lockstep import LockstepScheduler
from mfs_core.errors import BackendDeadError, DecodeTimeoutError
from mfs_core.grammar import converter_reason  # one line, no C++ source position
from mfs_core.serve.bodies import MAX_JSON_DEPTH, json_depth, read_body  # noqa: F401 - MAX_JSON_DEPTH, json_depth: their old home
from mfs_core.serve.config import ServerSettings
from mfs_core.serve.health import BackendWatch
from mfs_core.serve.limits import Admission, RequestLimits, check_request, request_work
from mfs_core.serve.metrics import ServerMetrics
from mfs_core.serve.responses import choice_metadata, finish_reason, openai_tool_calls, usage
from mfs_core.serve.responses_api import parse_responses, response_object
from mfs_core.serve.schemas import RequestError, ServeCall, parse_chat, parse_completion
from mfs_core.serve.streams import chat_stream, responses_stream
from mfs_core.streaming import DecodeStream, ReasoningText
from mfs_core.tools.parsers import ParsedOutput
from mfs_core.types import DecodeResult

__all__ = ["MFSServer", "create_app"]

logger = logging.getLogger("mfs_core.serve")


@dataclass
class _Prepared:
    """A call rendered for the engine (:class:`mfs_core.call.Call`: one prepared prompt per prompt) and its
    prompt tokens; once submitted without streaming, each choice's reasoning written from its decode's
    events (``reasoning``, by choice index), which the reply carries as ``message.reasoning``."""

    call: Call
    prompt_tokens: int
    reasoning: list[ReasoningText] = dataclasses.field(default_factory=list)


_SETTLE_SECONDS = 5.0
"""Seconds :meth:`MFSServer.drain` waits, after abandoning the decodes still running, for their clients' error
bodies to be sent (a lockstep round ends first)."""


class _Stopped(Exception):
    """The server is shutting down and abandoned this request's decodes."""


class _Disconnected(Exception):
    """The client of a non-streamed request went away; its decodes were abandoned."""


class MFSServer:
    """The state behind the app: the engine, the admission count, the metrics.

    Args:
        engine: the engine every request decodes with; its settings are the requests' base.
        config: the server's own settings (key, limits, served name).

    Admission (:attr:`admission`, :mod:`mfs_core.serve.limits`) is changed on the event loop's
    thread only: a request reserves its decodes and their worst-case tokens before it is
    rendered, each decode's future gives its share back when it ends (finished, failed, or
    dropped by the engine after being abandoned).
    """

    def __init__(self, engine: MFSEngine, config: ServerSettings | None = None) -> None:
        self.engine = engine
        self.config = config if config is not None else ServerSettings()
        self.served = self.config.model_name or engine.settings.model
        self.metrics = ServerMetrics()
        self.limits = RequestLimits.from_config(self.config, engine.settings)
        budget = self.config.work_budget or self.config.queue_size * decoder_spec("mfs").worst_case_tokens(engine.settings)
        self.admission = Admission(self.config.queue_size, budget)
        if isinstance(engine.scheduler, LockstepScheduler):  # continuous scheduling shares by itself
            engine.scheduler.fair_share_tokens = self.config.fair_share_tokens
        self.closing = False
        """True once draining began: new requests get 503."""
        self.stopping = False
        """True once draining abandoned the decodes still running: their clients get 503 error bodies."""
        self._drained = False
        self._futures: set[Future] = set()
        self._request_numbers = itertools.count()
        self._loop: asyncio.AbstractEventLoop | None = None
        key = self.config.api_key
        self._expected = key.get_secret_value().encode() if key is not None else None
        self.watch = BackendWatch(self)
        """Watches the backend; answers the probes and refuses requests once it cannot serve."""

    @property
    def in_flight(self) -> int:
        """Decodes admitted and not yet ended."""
        return self.admission.decodes

    # --- the app ------------------------------------------------------------------------------
    def app(self) -> Starlette:
        """The Starlette app (its lifespan closes the engine's backend on shutdown)."""
        routes = [
            Route("/v1/chat/completions", self.chat, methods=["POST"]),
            Route("/v1/completions", self.completions, methods=["POST"]),
            Route("/v1/responses", self.responses, methods=["POST"]),
            Route("/v1/models", self.models, methods=["GET"]),
            Route("/health", self.health, methods=["GET"]),
            Route("/ready", self.ready, methods=["GET"]),
            Route("/metrics", self.metrics_page, methods=["GET"]),
        ]
        return Starlette(routes=routes, lifespan=self._lifespan,
                         exception_handlers={HTTPException: self._http_error, Exception: self._server_error})

    async def _http_error(self, request: Request, exc: HTTPException) -> Response:
        """Starlette's own refusals (an unknown route: 404, a wrong method: 405) in OpenAI's error shape."""
        if exc.status_code == 404:
            message = (f"no route {request.url.path!r} here; mfs serve answers POST /v1/chat/completions, "
                       "POST /v1/completions, POST /v1/responses, GET /v1/models, GET /health, GET /ready and GET /metrics")
            error = RequestError(404, message, kind="not_found_error")
        else:
            error = RequestError(exc.status_code, f"{request.method} {request.url.path}: {exc.detail}",
                                 headers=exc.headers)
        return self._error(error, "other")

    async def _server_error(self, request: Request, exc: Exception) -> Response:
        """An error nothing else caught: a JSON 500 in OpenAI's shape, one log line (no traceback to the client)."""
        logger.error("%s %s failed: %s: %s", request.method, request.url.path, type(exc).__name__, exc)
        return self._error(RequestError(500, f"the server failed: {type(exc).__name__}", kind="server_error"), "other")

    @contextlib.asynccontextmanager
    async def _lifespan(self, app: Starlette) -> AsyncIterator[None]:
        self._loop = asyncio.get_running_loop()
        logger.info("serving %r (queue_size=%d, key %s)", self.served, self.config.queue_size,
                    "required" if self._expected is not None else "not set")
        self.watch.start()
        yield
        await self.watch.stop()
        await self.shutdown()

    def use_engine(self, engine: MFSEngine) -> None:
        """Serve with ``engine`` from now on (a reloaded backend, :mod:`mfs_core.serve.health`)."""
        self.engine = engine
        self.stopping = False  # the decodes abandoned for the dead backend have ended
        if isinstance(engine.scheduler, LockstepScheduler):
            engine.scheduler.fair_share_tokens = self.config.fair_share_tokens

    async def abandon_in_flight(self, reason: str, *, settle: float = 5.0) -> None:
        """Abandon every decode still running; their clients get 503 error bodies (streamed: an error event, then
        ``[DONE]``) within about one round, awaited for at most ``settle`` seconds."""
        left = [future for future in self._futures if not future.done()]
        if not left:
            return
        self.stopping = True
        abandon(left, reason)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + settle
        while self.in_flight and loop.time() < deadline:
            await asyncio.sleep(0.05)

    async def drain(self) -> None:
        """Stop admitting, let the decodes in flight finish within ``shutdown_timeout``, then stop the rest.

        From the call on, new requests and ``/health`` get 503 with ``Retry-After`` while the
        listener stays open (so a load balancer moves clients elsewhere); past ``shutdown_timeout``
        seconds each decode still running is abandoned and its client gets an OpenAI error body
        (503; streamed: an error event, then ``[DONE]``), within about one round. Called by
        ``mfs serve``'s first SIGTERM / SIGINT (:func:`mfs_core.serve.run`) and by :meth:`shutdown`.
        """
        if self._drained:
            return
        self.closing = True
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.config.shutdown_timeout
        while self.in_flight and loop.time() < deadline:
            await asyncio.sleep(0.05)
        left = [future for future in self._futures if not future.done()]
        if left:
            logger.warning("shutting down: abandoning %d decode(s) still running after %s s", len(left),
                           self.config.shutdown_timeout)
            await self.abandon_in_flight("the server is shutting down", settle=_SETTLE_SECONDS)
        self._drained = True

    async def shutdown(self) -> None:
        """:meth:`drain` (unless done), then close the backend (vLLM: its processes stop)."""
        await self.drain()
        await asyncio.to_thread(self.engine.close)
        logger.info("shut down; backend closed")

    # --- routes -------------------------------------------------------------------------------
    async def chat(self, request: Request) -> Response:
        """``POST /v1/chat/completions``."""
        return await self._serve(request, "chat", parse_chat)

    async def completions(self, request: Request) -> Response:
        """``POST /v1/completions`` (each prompt rendered as ``mfs ask`` renders a question)."""
        return await self._serve(request, "completions", parse_completion)

    async def responses(self, request: Request) -> Response:
        """``POST /v1/responses``: a chat call answered in the Responses API's shape (:mod:`~mfs_core.serve.responses_api`)."""
        return await self._serve(request, "responses", parse_responses)

    async def models(self, request: Request) -> Response:
        """``GET /v1/models``: the one model served, with its context window."""
        try:
            self._authorize(request)
        except RequestError as exc:
            return self._error(exc, "models")
        window = getattr(self.engine.backend, "context_window", None)
        card = {"id": self.served, "object": "model", "created": 0, "owned_by": "mfs",
                "max_model_len": window if isinstance(window, int) else None}
        self.metrics.requests.labels("models", "200").inc()
        return JSONResponse({"object": "list", "data": [card]})

    async def health(self, request: Request) -> Response:
        """``GET /health`` (liveness): 200 with the decodes in flight while serving or reloading; 503 with a
        one-line ``reason`` once the backend cannot serve and the server waits to exit, and while shutting down."""
        status, state = self.watch.liveness()
        if self.closing and status == 200:
            status, state = 503, {"status": "shutting_down"}
        body = {**state, "model": self.served, "decodes_in_flight": self.in_flight, "queue_size": self.config.queue_size,
                "work_in_flight": self.admission.work, "work_budget": self.admission.work_budget,
                "reloads": self.watch.reloads}
        return JSONResponse(body, status_code=status)

    async def ready(self, request: Request) -> Response:
        """``GET /ready`` (readiness): 200 while requests are served; 503 with ``Retry-After`` while the backend is
        reloading or dead and while draining."""
        status, body = self.watch.readiness()
        return JSONResponse({**body, "model": self.served}, status_code=status,
                            headers={"Retry-After": "5"} if status != 200 else None)

    async def metrics_page(self, request: Request) -> Response:
        """``GET /metrics``: the Prometheus text format."""
        return Response(generate_latest(self.metrics.registry), media_type=CONTENT_TYPE_LATEST)

    # --- one request --------------------------------------------------------------------------
    async def _serve(self, request: Request, endpoint: str, parse: Callable[..., ServeCall]) -> Response:
        self._loop = asyncio.get_running_loop()
        try:
            refusal = self.watch.refusal()
            if refusal is not None:
                raise refusal
            if self.closing:
                raise RequestError(503, "the server is shutting down; retry on another replica",
                                   kind="service_unavailable", headers={"Retry-After": "1"})
            self._authorize(request)
            body = await self._body(request)
            config = self.config
            call = parse(body, self.engine.settings, served=self.served, max_n=config.max_n,
                         max_messages=config.max_messages)
            check_request(call, self.limits)
            count, work = request_work(call)
            started = self.admission.admit(count, work)
            self._gauge()
            share = work // count  # each decode's worst case (the request's decodes share one settings)
            try:
                prepared = await asyncio.to_thread(self._prepare, call)
                stream = DecodeStream()
                futures = self._submit(call, prepared, stream, share, started)
            except BaseException:
                self._release(count, work)
                self.admission.finished(started)
                raise
            self._release(count - len(futures), share * (count - len(futures)))  # each future gives its share back
        except RequestError as exc:
            return self._error(exc, endpoint)
        if call.stream:
            self.metrics.requests.labels(endpoint, "200").inc()
            events = (self._stream_response(call, prepared, stream, futures) if call.endpoint == "responses"
                      else self._stream(call, prepared, stream, futures))
            return StreamingResponse(events, media_type="text/event-stream",
                                     headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        try:
            results = await self._wait(request, futures)
        except DecodeTimeoutError:
            return self._error(self._timed_out(), endpoint)
        except _Stopped:
            return self._error(self._shut_down(), endpoint)
        except _Disconnected:
            self.metrics.requests.labels(endpoint, "499").inc()
            return Response(status_code=499)
        except (ValueError, TypeError) as exc:
            return self._error(RequestError(400, f"the decode failed: {converter_reason(exc)}"), endpoint)
        except Exception as exc:  # a backend failure: this request fails, the others go on
            if self.stopping and isinstance(exc, CancelledError):  # stopped by the shutdown past shutdown_timeout
                return self._error(self._shut_down(), endpoint)
            dead = self.watch.failed_decode(exc)
            if dead is not None:  # the backend died under it: 503, and the watch reacts
                return self._error(dead, endpoint)
            logger.warning("a decode failed: %s: %s", type(exc).__name__, exc)
            return self._error(RequestError(500, f"the decode failed: {type(exc).__name__}: {converter_reason(exc)}",
                                            kind="server_error"), endpoint)
        self.metrics.requests.labels(endpoint, "200").inc()
        return JSONResponse(self._response(call, prepared, results))

    def _error(self, exc: RequestError, endpoint: str) -> Response:
        reason = {401: "auth", 404: "not_found", 405: "bad_method", 413: "too_large", 429: "queue_full",
                  503: "shutting_down", 504: "timeout"}.get(exc.status, "bad_request")
        if exc.status != 500:
            self.metrics.rejected.labels(reason).inc()
        self.metrics.requests.labels(endpoint, str(exc.status)).inc()
        return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers)

    def _authorize(self, request: Request) -> None:
        """Refuse a request without the server key (constant-time comparison; the key is never logged)."""
        if self._expected is None:
            return
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        given = token.strip().encode() if scheme.lower() == "bearer" else b""  # schemes are case-insensitive (RFC 9110)
        if not hmac.compare_digest(given, self._expected):
            raise RequestError(401, "missing or wrong API key: send 'Authorization: Bearer <the server key>' "
                               "(mfs serve --server-api-key / MFS_SERVER_API_KEY)", kind="authentication_error")

    async def _body(self, request: Request) -> Any:
        """The JSON body, at most ``max_body_bytes`` (:func:`~mfs_core.serve.bodies.read_body`).

        Raises:
            RequestError: 413 for a larger body, 400 for a body that is not JSON.
        """
        return await read_body(request, self.config.max_body_bytes)

    def _stream_failure(self, exc: Exception) -> RequestError:
        """The error a stream ends with: past ``request_timeout`` (504), stopped by the shutdown (503), a
        decode that failed on its input (400) or in the backend (500)."""
        if isinstance(exc, DecodeTimeoutError):
            self.metrics.rejected.labels("timeout").inc()
            return self._timed_out()
        if self.stopping and isinstance(exc, CancelledError):  # stopped by the shutdown past shutdown_timeout
            return self._shut_down()
        dead = self.watch.failed_decode(exc)
        if dead is not None:  # the backend died under it
            return dead
        logger.warning("a streamed decode failed: %s: %s", type(exc).__name__, exc)
        status = 400 if isinstance(exc, (ValueError, TypeError)) else 500
        return RequestError(status, f"the decode failed: {type(exc).__name__}: {converter_reason(exc)}",
                            kind="invalid_request_error" if status == 400 else "server_error")

    def _shut_down(self) -> RequestError:
        """The 503 of a request whose decodes the shutdown stopped (past ``shutdown_timeout``)."""
        return RequestError(503, f"the server shut down before this request's decodes finished (shutdown_timeout="
                            f"{self.config.shutdown_timeout} s); retry on another replica", kind="service_unavailable",
                            headers={"Retry-After": "1"})

    def _timed_out(self) -> RequestError:
        """The 504 of a request whose decodes outlived ``request_timeout`` (they were abandoned)."""
        return RequestError(504, f"the request's decodes did not finish within request_timeout="
                            f"{self.config.request_timeout} s; they were stopped", kind="timeout_error")

    def _release(self, decodes: int, work: int) -> None:
        self.admission.release(decodes, work)
        self._gauge()

    def _gauge(self) -> None:
        self.metrics.queue_depth.set(self.admission.decodes)

    def _prepare(self, call: ServeCall) -> _Prepared:
        """Plan and render the call as the adapters do (a worker thread: the template and tokenizer run here).

        Raises:
            RequestError: 400 for tools the model cannot render, a bad tool or tool choice,
                a prompt over the context window.
        """
        caller = Caller(EngineSource(self.engine, owner="mfs serve"), call.settings, call.method, tuple(call.stop),
                        self.config.request_timeout)
        chat = call.endpoint in ("chat", "responses")
        keywords = CallKeywords(tools=call.tools, tool_choice=call.tool_choice, response_format=call.response_format)
        try:
            opened = caller.open(ChatInput(call.messages) if chat else TextInput(call.prompts), keywords)
        except (ValueError, TypeError, NotImplementedError, ImportError) as exc:
            raise RequestError(400, str(exc)) from None
        return _Prepared(opened, sum(self._count(prepared.prompt) for prepared in opened.prepared))

    def _count(self, text: str) -> int:
        try:
            return int(self.engine.backend.count_tokens(text))
        except Exception:  # a backend that cannot count (an HTTP backend without a tokenizer)
            return 0

    def _submit(self, call: ServeCall, prepared: _Prepared, stream: DecodeStream, share: int,
                started: float) -> list[Future]:
        """Start the call's decodes: per prompt, ``n`` decodes seeded ``seed``, ``seed + 1``, ...

        Streamed calls send their events to ``stream`` labelled with the choice's index; the
        others write them, per choice, into ``prepared.reasoning`` (the text a stream would send).
        """
        if call.stream:
            on_event = stream.put
        else:
            prepared.reasoning = writers = [ReasoningText() for _ in range(len(prepared.call.prepared) * call.n)]

            def on_event(event: DecodeEvent) -> None:  # the engine's worker thread: into the choice's reasoning
                writers[event.index].delta(event)
        try:
            with share_group(next(self._request_numbers)):  # the request's decodes: one party of the fair share
                futures: list[Future] = list(prepared.call.submit(on_event, n=call.n))  # abandoned on failure
        except (ValueError, TypeError) as exc:
            raise RequestError(400, str(exc)) from None
        except BackendDeadError as exc:  # died since the request was admitted
            raise self.watch.failed_decode(exc) from None
        stream.attach(futures)
        left = [len(futures)]
        for future in futures:
            self._futures.add(future)
            future.add_done_callback(functools.partial(self._ended, share=share, started=started, left=left))
        return futures

    def _ended(self, future: Future, *, share: int, started: float, left: list[int]) -> None:
        """A decode ended (worker thread): give its slot and its ``share`` of work back on the loop, count it."""
        if future.cancelled():
            outcome, seconds = "abandoned", None
        else:
            error = future.exception()
            outcome = "ok" if error is None else "abandoned" if isinstance(error, CancelledError) else "failed"
            seconds = future.result().wall_seconds if error is None else None
            if outcome == "failed":
                self.metrics.backend_errors.labels(type(error).__name__).inc()
                self.watch.poke()  # a backend that died: the watch reacts now, not at its next look
        self.metrics.decodes.labels(outcome).inc()
        if seconds is not None:
            self.metrics.decode_seconds.observe(seconds)

        def release() -> None:
            self._futures.discard(future)
            self._release(1, share)
            left[0] -= 1
            if left[0] == 0:
                self.admission.finished(started)
            if seconds is not None:
                self.admission.observe(seconds)

        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(release)

    async def _wait(self, request: Request, futures: list[Future]) -> list[DecodeResult]:
        """The results, in order; a client that disconnects abandons the decodes (checked every 0.25 s).

        Raises:
            _Disconnected: the client went away.
            DecodeTimeoutError: ``request_timeout`` passed (the decodes are abandoned).
            The first decode's exception (the call's other decodes are abandoned).
        """
        waiting = asyncio.ensure_future(await_results(futures, self.config.request_timeout))  # the one wait helper
        try:
            while not (await asyncio.wait({waiting}, timeout=0.25))[0]:
                if self.stopping:
                    raise _Stopped
                if await request.is_disconnected():
                    raise _Disconnected
            return waiting.result()
        finally:
            waiting.cancel()  # a no-op once done; else await_results abandons the decodes as it is cancelled

    # --- answers ------------------------------------------------------------------------------
    def _reply(self, call: ServeCall, prepared: _Prepared, result: DecodeResult) -> tuple[str, ParsedOutput | None]:
        """The reply text and parsed calls of one decode (:meth:`mfs_core.call.Call.finish`); a text
        completion has no calls to report (None). The prompts of one request share one plan."""
        reply = prepared.call.finish(result)
        return reply.text, (None if call.endpoint == "completions" else reply.parsed)

    def _account(self, results: list[DecodeResult], prompt_tokens: int, answer_tokens: int) -> dict[str, Any]:
        counts = usage(results, prompt_tokens, answer_tokens)
        self.metrics.prompt_tokens.inc(counts["prompt_tokens"])
        self.metrics.completion_tokens.inc(counts["completion_tokens"])
        self.metrics.reasoning_tokens.inc(counts["completion_tokens_details"]["reasoning_tokens"])
        return counts

    def _response(self, call: ServeCall, prepared: _Prepared, results: list[DecodeResult]) -> dict[str, Any]:
        """The chat completion, text completion or Response object of a finished, non-streamed call."""
        if call.endpoint == "responses":
            (result,) = results
            text, parsed = self._reply(call, prepared, result)
            reasoning = prepared.reasoning[0].text if prepared.reasoning else ""
            counts = self._account(results, prepared.prompt_tokens, self._count(text))
            return response_object(call, self.served, reasoning, text, parsed, counts,
                                   choice_metadata(result, parsed, call.return_trace))
        choices, answer_tokens = [], 0
        for index, result in enumerate(results):
            text, parsed = self._reply(call, prepared, result)
            answer_tokens += self._count(text)
            metadata = choice_metadata(result, parsed, call.return_trace)
            reasoning = prepared.reasoning[index].text if index < len(prepared.reasoning) else ""
            if call.endpoint == "chat":
                calls = openai_tool_calls(parsed)
                message: dict[str, Any] = {"role": "assistant", "content": text if text or not calls else None}
                if reasoning:  # vLLM's reasoning parsers' fields, the text a stream sends as delta.reasoning
                    message.update(reasoning=reasoning, reasoning_content=reasoning)
                if calls:
                    message["tool_calls"] = calls
                choices.append({"index": index, "message": message, "logprobs": None,
                                "finish_reason": finish_reason(parsed), "mfs": metadata})
            else:
                choices.append({"index": index, "text": text, "logprobs": None, "finish_reason": "stop",
                                **({"reasoning": reasoning} if reasoning else {}), "mfs": metadata})
        kind = "chat.completion" if call.endpoint == "chat" else "text_completion"
        prefix = "chatcmpl" if call.endpoint == "chat" else "cmpl"
        return {"id": f"{prefix}-{uuid.uuid4().hex}", "object": kind, "created": int(time.time()), "model": self.served,
                "choices": choices, "usage": self._account(results, prepared.prompt_tokens, answer_tokens)}

    def _stream_response(self, call: ServeCall, prepared: _Prepared, stream: DecodeStream,
                         futures: list[Future]) -> AsyncIterator[bytes]:
        """The events of a streamed ``/v1/responses`` call (:func:`mfs_core.serve.streams.responses_stream`)."""
        return responses_stream(self, call, prepared, stream)

    def _stream(self, call: ServeCall, prepared: _Prepared, stream: DecodeStream,
                futures: list[Future]) -> AsyncIterator[bytes]:
        """The events of a streamed chat or text completion (:func:`mfs_core.serve.streams.chat_stream`)."""
        return chat_stream(self, call, prepared, stream, futures)


def create_app(engine: MFSEngine, config: ServerSettings | None = None) -> Starlette:
    """The ASGI app serving ``engine`` (run it with uvicorn, or :func:`mfs_core.serve.run`).

    Example:
        >>> app = create_app(MFSEngine.from_settings(MFSSettings(step_beam_size=4)))  # doctest: +SKIP
        >>> uvicorn.run(app, host="127.0.0.1", port=8000)  # doctest: +SKIP
    """
    server = MFSServer(engine, config)
    app = server.app()
    app.state.mfs = server
    return app
