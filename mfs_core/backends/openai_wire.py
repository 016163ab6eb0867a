"""The wire format of OpenAI-compatible completion servers, for :mod:`mfs_core.backends.openai`: what a
server's answer means (a choice's text, token ids, log-probs, finish and stop reasons, DeepConf's token
confidences) and what its error bodies and ``Retry-After`` headers say.

Pure functions, no I/O: :class:`~mfs_core.backends.openai_sender.HTTPSender` sends the requests and maps
each answer through :func:`parse_completion`; an answer that cannot be used raises
:class:`~mfs_core.errors.BackendOutputError` (:class:`~mfs_core.errors.MissingLogprobsError` without
log-probs, :class:`~mfs_core.errors.SingleSampleError` with one choice for ``n`` > 1).
"""

from __future__ import annotations

import email.utils
import hashlib
import json
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

from mfs_core.errors import BackendOutputError, MissingLogprobsError, SingleSampleError
from mfs_core.types import Continuation, FinishReason, GenerationRequest

__all__ = ["UNKNOWN_CONTEXT_WINDOW", "ServerN", "parse_completion", "sample_seed", "token_confidences"]


UNKNOWN_CONTEXT_WINDOW = 2**31 - 1
"""``context_window`` when neither settings, the server nor the tokenizer tell it (tokens)."""

_RETRY_STATUS = frozenset({408, 429})
_MAX_RETRY_AFTER = 300.0
_TOKEN_ID = re.compile(r"^token_id:(\d+)$")
_CONTEXT_ERROR = re.compile(r"context length|context window|max_model_len|maximum model length", re.IGNORECASE)


ServerN = Literal["auto", "yes", "no"]
"""Whether a server returns ``n`` samples per request: ``"yes"`` (vLLM), ``"no"`` (llama.cpp's
server, Ollama: one request per sample), ``"auto"`` (send ``n``; fan out from the first
answer that shows the server cannot)."""

_N_REFUSED = re.compile(r"choice|\bn\b", re.IGNORECASE)
"""An error message that refuses ``n`` > 1 (llama.cpp's server: "Only one completion choice is allowed")."""


def sample_seed(seed: int | None, k: int) -> int | None:
    """The seed of sample ``k`` when a request with ``seed`` is fanned out into single-sample requests.

    Sample 0 keeps ``seed``; sample ``k`` > 0 gets 31 bits of BLAKE2b over ``(seed, k)``, so
    two requests whose seeds differ by a few (beams of one step) draw no sample with the same
    seed, as ``seed + k`` would. None (a request drawn from entropy) stays None.
    """
    if seed is None or k == 0:
        return seed
    digest = hashlib.blake2b(f"{seed}:{k}".encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big") & 0x7FFFFFFF


@dataclass(frozen=True)
class _Fault:
    """A retryable failure of one attempt: what happened, and the server's Retry-After (seconds)."""

    message: str
    retry_after: float | None = None


def _import_httpx() -> Any:
    try:
        import httpx
    except ImportError as exc:
        msg = 'the openai backend needs httpx: pip install "mfs-decoding[openai]"'
        raise ImportError(msg) from exc
    return httpx


def _normalise_url(url: str) -> str:
    """``http://host:8000`` becomes ``http://host:8000/v1``; a URL with a path is kept as is."""
    url = url.rstrip("/")
    return url + "/v1" if urlsplit(url).path in ("", "/") else url


def _retry_after(value: str | None) -> float | None:
    """Seconds a ``Retry-After`` header asks for (delta-seconds or an HTTP date), or None."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = when.timestamp() - time.time()
    return min(max(seconds, 0.0), _MAX_RETRY_AFTER)


def _error_text(body: bytes, limit: int = 300) -> str:
    """The server's error message (OpenAI ``{"error": {"message"}}`` or vLLM ``{"message"}``)."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return body[:limit].decode("utf-8", "replace")
    if isinstance(data, dict):
        error = data.get("error", data)
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])[:limit]
        if isinstance(error, str):
            return error[:limit]
    return json.dumps(data)[:limit]


def _finish(
    choice: dict[str, Any], request: GenerationRequest, tokens: Sequence[str]
) -> tuple[FinishReason, str | None]:
    """``(finish_reason, stop_reason)`` of a choice (see the module docstring)."""
    reason = choice.get("finish_reason")
    if reason == "length":
        return "length", None
    if reason != "stop":
        msg = f"the server finished a completion with finish_reason={reason!r}; expected 'stop' or 'length'"
        raise BackendOutputError(msg)
    if "stop_reason" in choice:
        stop = choice["stop_reason"]
        return ("stop", stop) if isinstance(stop, str) else ("eos", None)
    text = choice.get("text", "")
    tail = "".join(tokens)
    tail = tail[len(text):] if tail.startswith(text) else tail
    hits = [(tail.find(stop), stop) for stop in request.stop if stop in tail]
    return ("stop", min(hits)[1]) if hits else ("eos", None)


def _token_logprobs(choice: dict[str, Any]) -> tuple[list[Any] | None, list[str], list[Any] | None]:
    """``(log-probs, tokens, token ids or None)`` of a choice, in either shape servers send.

    * OpenAI's legacy completions shape (vLLM, llama-cpp-python's server):
      ``logprobs = {"tokens": [...], "token_logprobs": [...], ...}``.
    * The chat shape, which llama.cpp's own server (``llama-server``) returns for
      ``/v1/completions`` too and Ollama for ``/v1/chat/completions``:
      ``logprobs = {"content": [{"token", "logprob", "id"?, "bytes"?, "top_logprobs"?}, ...]}``.
      ``id`` (llama-server) gives the token ids. An entry without ``logprob`` (llama-server's
      ``post_sampling_probs`` sends ``prob``, a probability after sampling, not a raw one)
      counts as missing.

    Returns ``(None, [], None)`` when neither shape is there.
    """
    logprobs = choice.get("logprobs") or {}
    if not isinstance(logprobs, dict):
        return None, [], None
    if logprobs.get("token_logprobs") is not None:
        return list(logprobs["token_logprobs"]), [str(t) for t in logprobs.get("tokens") or []], None
    content = logprobs.get("content")
    if isinstance(content, list):
        entries = [e if isinstance(e, dict) else {} for e in content]
        ids = [e.get("id") for e in entries]
        token_ids = ids if entries and all(isinstance(i, int) for i in ids) else None
        return [e.get("logprob") for e in entries], [str(e.get("token", "")) for e in entries], token_ids
    return None, [], None


def _top_logprobs(choice: dict[str, Any]) -> list[list[float]] | None:
    """The alternatives' log-probs at each position of a choice, in either shape of :func:`_token_logprobs`.

    * Legacy completions: ``logprobs.top_logprobs``, one ``{token: logprob}`` per position. vLLM
      (``serving.py`` ``_create_completion_logprobs``) writes the sampled token first, then the
      top ``k``: ``k + 1`` entries when the sampled token is not among them, else ``k``; keyed
      by text unless ``return_tokens_as_token_ids`` (then ``"token_id:N"``, never merged).
    * Chat shape: ``logprobs.content[i].top_logprobs``, a list of ``{"token", "logprob"}``.

    Returns None when the choice has neither, or a position has none.
    """
    logprobs = choice.get("logprobs") or {}
    if not isinstance(logprobs, dict):
        return None
    if isinstance(logprobs.get("top_logprobs"), list):
        positions = logprobs["top_logprobs"]
        if not all(isinstance(p, dict) and p for p in positions):
            return None
        return [[float(v) for v in p.values()] for p in positions]
    content = logprobs.get("content")
    if isinstance(content, list):
        tops = [e.get("top_logprobs") if isinstance(e, dict) else None for e in content]
        if not all(isinstance(t, list) and t and all(isinstance(x, dict) and "logprob" in x for x in t) for t in tops):
            return None
        return [[float(x["logprob"]) for x in t] for t in tops]
    return None


def token_confidences(choice: dict[str, Any], k: int, url: str = "") -> tuple[float, ...]:
    """DeepConf's confidence of each token of a choice: minus the mean of the ``k`` largest
    alternatives' log-probs at its position (:func:`mfs_core.confidence.token_confidence`).

    The ``k`` largest of what the server sent are vLLM's top ``k`` (the sampled token, when it
    is sent as a ``k + 1``-th entry, is below them). A server keyed by text may merge two tokens
    of the same text (fewer than ``k`` values): the mean is then over what came.

    Raises:
        MissingLogprobsError: no top log-probs, or not one entry per token.
    """
    from mfs_core.confidence import token_confidence

    tops = _top_logprobs(choice)
    tokens, _, _ = _token_logprobs(choice)
    if tops is None or tokens is None or len(tops) != len(tokens):
        msg = (f"{url} returned no top log-probs for every token (choices[{choice.get('index')}]) though the request "
               f"asked logprobs={k}; DeepConf's token confidence needs them (vllm serve returns up to its "
               "--max-logprobs, 20 by default; Ollama returns none)")
        raise MissingLogprobsError(msg)
    return tuple(token_confidence(sorted(values, reverse=True)[:k]) for values in tops)


def parse_completion(
    body: Any, request: GenerationRequest, *, url: str = "", prompt_tokens: int | None = None
) -> list[Continuation]:
    """Map one ``/v1/completions`` response onto its continuations.

    Args:
        body: the decoded JSON of a response to a POST with one prompt.
        request: the request it answers.
        url: the endpoint, for error messages.
        prompt_tokens: prompt tokens to report when the body has no ``usage``.

    Returns:
        ``request.n`` continuations in ``choices[].index`` order (a greedy request was sent
        with ``n=1``: its one choice is repeated ``request.n`` times).

    Raises:
        SingleSampleError: one choice for ``n`` > 1 (a server that ignores ``n``).
        MissingLogprobsError: a choice has no per-token log-probs (in neither shape of
            :func:`_token_logprobs`) or a null entry; or, for a request with ``top_logprobs``,
            no top log-probs for every token (:func:`token_confidences`).
        BackendOutputError: no ``choices`` list, a different number of choices than ``n``,
            an unknown ``finish_reason``, or token ids of the wrong length.
    """
    choices = body.get("choices") if isinstance(body, dict) else None
    if not isinstance(choices, list):
        msg = f"{url} answered without a 'choices' list: {json.dumps(body)[:200]}"
        raise BackendOutputError(msg)
    sent = 1 if request.greedy else request.n
    if len(choices) == 1 and sent > 1:
        msg = (f"{url} returned 1 choice for n={sent}: the server samples once per request (llama.cpp's server, "
               "Ollama); set server_n='no' (MFS_SERVER_N=no) or 'auto' to send one request per sample")
        raise SingleSampleError(msg)
    if len(choices) != sent:
        msg = f"{url} returned {len(choices)} choices for n={sent}"
        raise BackendOutputError(msg)
    if sorted(c.get("index", -1) for c in choices) == list(range(sent)):
        choices = sorted(choices, key=lambda c: c["index"])
    usage = body.get("usage") if isinstance(body.get("usage"), dict) else {}
    if isinstance(usage.get("prompt_tokens"), int):
        prompt_tokens = usage["prompt_tokens"]  # one prompt per POST: all of usage.prompt_tokens is its
    results = []
    for choice in choices:
        token_logprobs, tokens, content_ids = _token_logprobs(choice)
        if token_logprobs is None or any(not isinstance(lp, (int, float)) for lp in token_logprobs):
            msg = (
                f"{url} returned a completion without per-token log-probs (choices[{choice.get('index')}].logprobs"
                f" = {json.dumps(choice.get('logprobs'))[:120]}); MFS scores steps by log-probabilities and "
                "cannot run without them: the server must honour the 'logprobs' parameter of /v1/completions "
                "(vllm serve, llama.cpp's server and llama-cpp-python's do; Ollama's /v1/completions does not)"
            )
            raise MissingLogprobsError(msg)
        if choice.get("token_ids") is not None:
            token_ids = tuple(int(t) for t in choice["token_ids"])
        elif content_ids is not None:
            token_ids = tuple(content_ids)
        elif tokens and all(_TOKEN_ID.match(t) for t in tokens):
            token_ids = tuple(int(_TOKEN_ID.match(t).group(1)) for t in tokens)
        else:
            token_ids = (-1,) * len(token_logprobs)
        if len(token_ids) != len(token_logprobs):
            msg = f"{url} returned {len(token_ids)} token ids but {len(token_logprobs)} token log-probs"
            raise BackendOutputError(msg)
        finish, stop_reason = _finish(choice, request, tokens)
        confidences = token_confidences(choice, request.top_logprobs, url) if request.top_logprobs else ()
        results.append(
            Continuation(text=str(choice.get("text", "")), token_ids=token_ids, logprob_sum=float(sum(token_logprobs)),
                         finish_reason=finish, stop_reason=stop_reason, prompt_tokens=int(prompt_tokens or 0),
                         token_confidences=confidences)
        )
    return results * request.n if request.greedy else results
