"""The server-sent events of ``mfs serve``'s streamed calls: chat and text completions
(:func:`chat_stream`) and the Responses API (:func:`responses_stream`).

Both read the decode events of one call's :class:`~mfs_core.streaming.DecodeStream`, write the
search as reasoning text (:class:`~mfs_core.streaming.ReasoningText`) while it runs, then the
answer the server's call path finishes (``server._reply``), and end with an error event when a
decode fails, times out or is stopped by the shutdown (``server._stream_failure``). Closing a
stream early abandons its decodes.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from concurrent.futures import Future
from typing import Any

from mfs_core.call import stream_chunks
from mfs_core.engine.waiting import astream_events
from mfs_core.events import StopEvent
from mfs_core.serve.responses import choice_metadata, content_deltas, finish_reason, sse
from mfs_core.serve.responses_api import ResponseEvents
from mfs_core.serve.schemas import ServeCall
from mfs_core.streaming import DecodeStream, ReasoningText
from mfs_core.types import DecodeResult

__all__ = ["chat_stream", "responses_stream"]


async def chat_stream(server: Any, call: ServeCall, prepared: Any, stream: DecodeStream,
                      futures: list[Future]) -> AsyncIterator[bytes]:
    """The server-sent events of a streamed call.

    Per choice: (chat) a first delta with the role; per finished step and at the stop,
    ``delta.reasoning`` / ``delta.reasoning_content`` (completions: ``reasoning``) with the
    text :class:`ReasoningText` writes; once the search stopped, the answer in chunks,
    its tool calls, and a last chunk with ``finish_reason`` and the choice's ``mfs``
    metadata. Then a chunk with ``usage`` and no choices (unless
    ``stream_options.include_usage`` is false) and ``[DONE]``. A decode that fails
    sends an ``error`` event. Closing the stream early abandons the decodes.
    """
    chat = call.endpoint == "chat"
    head = {"id": f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex}",
            "object": "chat.completion.chunk" if chat else "text_completion", "created": int(time.time()),
            "model": server.served}

    def chunk(index: int, delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
        if chat:
            choice = {"index": index, "delta": delta, "logprobs": None, "finish_reason": finish, **extra}
        else:
            choice = {"index": index, "text": delta.get("content", ""), "logprobs": None, "finish_reason": finish,
                      **({"reasoning": delta["reasoning"]} if "reasoning" in delta else {}), **extra}
        return sse({**head, "choices": [choice]})

    writers = [ReasoningText() for _ in futures]
    results: list[DecodeResult] = []
    answer_tokens = 0
    finished = False
    try:
        if chat:
            for index in range(len(futures)):
                yield chunk(index, {"role": "assistant", "content": ""})
        # cancelled (client gone) or past request_timeout: it abandons the decodes
        async for event in astream_events(stream, server.config.request_timeout):
            index = event.index
            piece = writers[index].delta(event)
            yield chunk(index, {"reasoning": piece, "reasoning_content": piece} if chat else {"reasoning": piece})
            if isinstance(event, StopEvent):
                result = event.result
                results.append(result)
                text, parsed = server._reply(call, prepared, result)
                answer_tokens += server._count(text)
                for delta in content_deltas(text, parsed):
                    yield chunk(index, delta)
                yield chunk(index, {}, finish_reason(parsed), mfs=choice_metadata(result, parsed, call.return_trace))
        finished = True
        counts = server._account(results, prepared.prompt_tokens, answer_tokens)
        if call.include_usage:
            yield sse({**head, "choices": [], "usage": counts})
        yield sse("[DONE]")
    except Exception as exc:  # a failed decode: this stream ends with an error event, the others go on
        finished = True
        yield sse(server._stream_failure(exc).body())
        yield sse("[DONE]")
    finally:
        if not finished:
            stream.abandon("the client disconnected")


async def responses_stream(server: Any, call: ServeCall, prepared: Any, stream: DecodeStream) -> AsyncIterator[bytes]:
    """The Responses API's events of a streamed ``/v1/responses`` call (one decode; see
    :class:`~mfs_core.serve.responses_api.ResponseEvents`). A failure ends it with ``response.failed``;
    closing it early abandons the decode."""
    events = ResponseEvents(call, server.served)
    writer = ReasoningText()
    finished = False
    try:
        for event in events.start():
            yield sse(event)
        async for decode_event in astream_events(stream, server.config.request_timeout):
            for event in events.reasoning(writer.delta(decode_event)):
                yield sse(event)
            if isinstance(decode_event, StopEvent):
                result = decode_event.result
                text, parsed = server._reply(call, prepared, result)
                for event in events.answer(text, parsed, list(stream_chunks(text))):
                    yield sse(event)
                counts = server._account([result], prepared.prompt_tokens, server._count(text))
                finished = True
                yield sse(events.completed(counts, choice_metadata(result, parsed, call.return_trace)))
    except Exception as exc:  # a failed decode: the stream ends with response.failed
        finished = True
        yield sse(events.failed(server._stream_failure(exc)))
    finally:
        if not finished:
            stream.abandon("the client disconnected")
