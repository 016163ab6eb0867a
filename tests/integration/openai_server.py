"""A test server of vLLM's ``/v1/completions`` API over the transformers backend, with faults.

:class:`CompletionServer` listens on ``127.0.0.1`` (a free port), samples each POST with a
:class:`~mfs_core.backends.transformers.TransformersBackend` and the request's ``seed``, and
answers in the JSON shape of ``vllm serve`` 0.33.0 (``CompletionResponse``: ``choices[].text``,
``logprobs.tokens / token_logprobs / text_offset / top_logprobs`` (the sampled token, then the
request's ``logprobs`` most likely ones; tokens keyed ``token_id:N`` with
``return_tokens_as_token_ids``), ``finish_reason``, ``stop_reason``, ``token_ids`` when
``return_token_ids`` is sent, and ``usage``). GET
``/v1/models`` returns a model card with ``max_model_len``.

Per-token log-probs are recomputed by one teacher-forced forward pass over prompt + sampled
tokens (raw ``log_softmax``, temperature 1), because the transformers backend reports only
their sum. Tokenization follows vLLM: the prompt text is encoded with the request's
``add_special_tokens`` (default true); a request whose tokenization would differ from the
transformers backend's (a doubled BOS) is refused with a 400, so a client that forgets
``add_special_tokens=false`` for a chat prompt fails loudly.

Faults are scripted: :meth:`CompletionServer.inject` queues :class:`Fault` objects, and each
POST to ``/v1/completions`` takes the next one (if any) before it is served. While a POST is
held by a ``delay`` the server watches its connection, as ``vllm serve`` does (its
``with_cancellation``): a client that closes it ends the POST unserved, and the time is kept
in :attr:`CompletionServer.disconnects`.

The fixtures at the bottom (``warm_backend``, ``completion_server``, ``make_server``) are
imported by the tests that use them (``demo_backend`` comes from ``tests/conftest.py``); tests
that open sockets carry ``@pytest.mark.enable_socket``.
"""

from __future__ import annotations

import collections
import json
import select
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from mfs_core.backends.transformers import TransformersBackend
from mfs_core.types import Continuation, GenerationRequest

__all__ = ["CompletionServer", "Fault", "completion_server", "make_server", "teacher_forced_logprobs", "warm_backend"]


@dataclass(frozen=True)
class Fault:
    """One scripted misbehaviour, applied to the next POST ``/v1/completions``.

    Attributes:
        status: answer this HTTP status with an error body instead of serving (0: serve).
        retry_after: value of the ``Retry-After`` header sent with ``status``.
        delay: seconds to wait before answering (longer than the client timeout: a timeout).
        malformed: answer 200 with a body that is not JSON.
        no_logprobs: serve, but with ``logprobs: null`` in every choice.
        drop: close the connection without answering.
        message: error message of a ``status`` answer.
    """

    status: int = 0
    retry_after: str | None = None
    delay: float = 0.0
    malformed: bool = False
    no_logprobs: bool = False
    drop: bool = False
    message: str = "injected fault"


def teacher_forced_logprobs(backend: TransformersBackend, prompt_ids: list[int], token_ids: tuple[int, ...],
                            k: int = 1) -> tuple[list[float], list[list[tuple[int, float]]]]:
    """Raw log-prob of each sampled token, and the top-``k`` ``(token id, log-prob)`` at each position
    (most likely first)."""
    import torch

    if not token_ids:
        return [], []
    ids = torch.tensor([list(prompt_ids) + list(token_ids)], device=backend.model.device)
    with torch.inference_mode():
        logits = backend.model(input_ids=ids).logits[0, len(prompt_ids) - 1 : -1].float()
    raw = torch.log_softmax(logits, dim=-1)
    chosen = raw.gather(1, torch.tensor(token_ids, device=raw.device).unsqueeze(1)).squeeze(1).tolist()
    top_values, top_ids = torch.topk(raw, min(k, raw.shape[-1]), dim=-1)
    return chosen, [list(zip(i, v)) for i, v in zip(top_ids.tolist(), top_values.tolist())]


class CompletionServer:
    """vLLM-shaped ``/v1/completions`` over a transformers backend, on 127.0.0.1.

    Args:
        backend: the backend that samples (shared, used under a lock).
        model_name: the served model name (``model`` of requests must match it).
        max_model_len: the context window advertised by GET ``/v1/models`` (tokens).
        vllm_fields: send vLLM's ``stop_reason`` and ``token_ids`` (False: plain OpenAI shape).
    """

    def __init__(self, backend: TransformersBackend, model_name: str = "mfs-demo", *,
                 max_model_len: int | None = None, vllm_fields: bool = True) -> None:
        self.backend = backend
        self.model_name = model_name
        self.max_model_len = max_model_len or backend.context_window
        self.vllm_fields = vllm_fields
        self.received: list[tuple[float, dict[str, Any]]] = []
        self.disconnects: list[float] = []
        """``time.monotonic()`` of each delayed POST whose client closed the connection before the answer."""
        self._faults: collections.deque[Fault] = collections.deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """Base URL, ``http://127.0.0.1:PORT/v1``."""
        assert self._httpd is not None, "server not started"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def inject(self, *faults: Fault) -> None:
        """Queue faults; each POST to /v1/completions takes the next one."""
        self._faults.extend(faults)

    @property
    def posts(self) -> list[dict[str, Any]]:
        """Bodies of the POSTs received so far, in arrival order."""
        return [body for _, body in self.received]

    def start(self) -> CompletionServer:
        """Bind a free port on 127.0.0.1 and serve in a daemon thread."""
        server = self

        class Handler(_Handler):
            owner = server

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="completion-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, wake delayed handlers and close the listening socket."""
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    # --- serving ------------------------------------------------------------------------
    def next_fault(self) -> Fault | None:
        try:
            return self._faults.popleft()
        except IndexError:
            return None

    def models(self) -> dict[str, Any]:
        card = {"id": self.model_name, "object": "model", "created": 0, "owned_by": "mfs-tests",
                "root": self.model_name, "parent": None, "max_model_len": self.max_model_len}
        return {"object": "list", "data": [card]}

    def complete(self, body: dict[str, Any], no_logprobs: bool = False) -> tuple[int, dict[str, Any]]:
        """Serve one completion request: ``(status, JSON body)``."""
        if body.get("model") != self.model_name:
            return 404, {"error": {"message": f"The model `{body.get('model')}` does not exist.", "code": 404}}
        prompt = body.get("prompt")
        if not isinstance(prompt, str) or not prompt:
            return 400, {"error": {"message": "test server: prompt must be a non-empty string", "code": 400}}
        tokenizer = self.backend.tokenizer
        ids = tokenizer(prompt, add_special_tokens=bool(body.get("add_special_tokens", True)))["input_ids"]
        if ids != self.backend.encode_prompt(prompt):
            return 400, {"error": {"message": "test server: add_special_tokens gives a tokenization the transformers "
                                              "backend would not use (a doubled BOS?)", "code": 400}}
        max_tokens = int(body.get("max_tokens") or 16)
        if len(ids) + max_tokens > self.max_model_len:
            message = (f"This model's maximum context length is {self.max_model_len} tokens. However, you requested "
                       f"{len(ids) + max_tokens} tokens ({len(ids)} in the messages, {max_tokens} in the completion).")
            return 400, {"error": {"message": message, "code": 400}}
        stop = body.get("stop") or []
        temperature = float(body.get("temperature", 1.0))
        request = GenerationRequest(  # temperature 0 is greedy, as in vLLM
            prompt=prompt, n=int(body.get("n", 1)), max_tokens=max_tokens,
            stop=(stop,) if isinstance(stop, str) else tuple(stop), temperature=temperature or 1.0,
            top_p=float(body.get("top_p", 1.0)), seed=body.get("seed"), greedy=temperature == 0,
        )
        with self._lock:
            continuations = self.backend.generate([request])[0]
            choices = [self._choice(i, c, ids, body, no_logprobs) for i, c in enumerate(continuations)]
        completion_tokens = sum(c.num_tokens for c in continuations)
        usage = {"prompt_tokens": len(ids), "total_tokens": len(ids) + completion_tokens, "completion_tokens": completion_tokens}
        return 200, {"id": f"cmpl-{len(self.received)}", "object": "text_completion", "created": int(time.time()),
                     "model": self.model_name, "choices": choices, "usage": usage}

    def _choice(self, index: int, cont: Continuation, prompt_ids: list[int], body: dict[str, Any], no_logprobs: bool) -> dict[str, Any]:
        tokenizer = self.backend.tokenizer
        logprobs = None
        if body.get("logprobs") is not None and not no_logprobs:
            k = max(1, int(body["logprobs"]))
            chosen, top = teacher_forced_logprobs(self.backend, prompt_ids, cont.token_ids, k)
            texts = [tokenizer.decode([t]) for t in cont.token_ids]
            offsets, position = [], 0
            for text in texts:
                offsets.append(position)
                position += len(text)
            # vLLM's shape: the sampled token first, then the top k (a second write of the sampled
            # token keeps its place); keyed by text, or by "token_id:N" with return_tokens_as_token_ids.
            as_ids = bool(body.get("return_tokens_as_token_ids"))
            key = (lambda t: f"token_id:{t}") if as_ids else (lambda t: tokenizer.decode([t]))
            tokens = [key(t) for t in cont.token_ids]
            top_logprobs = []
            for token_id, lp, alternatives in zip(cont.token_ids, chosen, top):
                entry = {key(token_id): lp}
                entry.update((key(i), v) for i, v in alternatives)
                top_logprobs.append(entry)
            logprobs = {"text_offset": offsets, "token_logprobs": chosen, "tokens": tokens, "top_logprobs": top_logprobs}
        choice: dict[str, Any] = {
            "index": index, "text": cont.text, "logprobs": logprobs,
            "finish_reason": "length" if cont.finish_reason == "length" else "stop",
        }
        if self.vllm_fields:
            choice["stop_reason"] = cont.stop_reason
            choice["prompt_logprobs"] = None
            choice["token_ids"] = list(cont.token_ids) if body.get("return_token_ids") else None
            choice["prompt_token_ids"] = list(prompt_ids) if body.get("return_token_ids") else None
        return choice


class _Handler(BaseHTTPRequestHandler):
    owner: CompletionServer
    protocol_version = "HTTP/1.1"
    timeout = 10  # seconds an idle keep-alive connection is kept

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        pass

    def _reply(self, status: int, payload: bytes, headers: dict[str, str] | None = None) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(payload)
        except OSError:  # the client gave up (a timeout test): nothing to answer
            self.close_connection = True

    def _ended_while_held(self, seconds: float) -> bool:
        """Hold the POST ``seconds``; True when the server stops or the client leaves first (recorded)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.owner._stopping.wait(0.01):
                return True
            readable, _, _ = select.select([self.connection], [], [], 0)
            if readable and not self.connection.recv(1, socket.MSG_PEEK):  # EOF: the client closed
                self.owner.disconnects.append(time.monotonic())
                self.close_connection = True
                return True
        return False

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        if self.path.rstrip("/") == "/v1/models":
            self._reply(200, json.dumps(self.owner.models()).encode())
        else:
            self._reply(404, b'{"error": {"message": "not found"}}')

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.path.rstrip("/") != "/v1/completions":
            self._reply(404, b'{"error": {"message": "not found"}}')
            return
        try:
            body = json.loads(raw)
        except ValueError:
            self._reply(400, b'{"error": {"message": "invalid JSON body"}}')
            return
        server = self.owner
        server.received.append((time.monotonic(), body))
        fault = server.next_fault()
        if fault is not None and fault.delay and self._ended_while_held(fault.delay):
            return
        if fault is not None and fault.drop:
            self.close_connection = True
            self.connection.close()
            return
        if fault is not None and fault.status:
            headers = {"Retry-After": fault.retry_after} if fault.retry_after is not None else None
            payload = json.dumps({"error": {"message": fault.message, "code": fault.status}}).encode()
            self._reply(fault.status, payload, headers)
            return
        if fault is not None and fault.malformed:
            self._reply(200, b'{"id": "cmpl-x", "choices": [{"index": 0, "text": "3 + ')
            return
        status, payload = server.complete(body, no_logprobs=fault is not None and fault.no_logprobs)
        self._reply(status, json.dumps(payload).encode())


# --- fixtures ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def warm_backend(demo_backend: TransformersBackend) -> TransformersBackend:
    """The session's demo backend (``tests/conftest.py``) after one small generate call.

    The first forward pass of a process is slow (seconds); it happens here, not inside a
    test whose timing or timeouts matter.
    """
    demo_backend.generate([GenerationRequest(prompt="warm up", n=2, max_tokens=2, seed=0)])
    return demo_backend


@pytest.fixture
def make_server(warm_backend: TransformersBackend) -> Iterator[Any]:
    """A factory of started :class:`CompletionServer` objects, all stopped after the test."""
    servers: list[CompletionServer] = []

    def make(**kwargs: Any) -> CompletionServer:
        server = CompletionServer(warm_backend, **kwargs).start()
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.stop()


@pytest.fixture
def completion_server(make_server: Any) -> CompletionServer:
    """One started :class:`CompletionServer` over the demo model."""
    return make_server()
