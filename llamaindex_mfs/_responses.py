"""LlamaIndex responses of a decode: :class:`~mfs_core.DecodeResult` to ``CompletionResponse`` / ``ChatResponse``.

Pure functions of the result (and the call's stop sequences and tool plan): the text cut
at ``stop``, usage and the result in ``raw``, :func:`mfs_core.adapters.result_metadata` in
``additional_kwargs``; chat messages with a ``ThinkingBlock`` (streaming), the text and one
``ToolCallBlock`` per parsed call.
"""

from __future__ import annotations

from collections.abc import Iterator

from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    CompletionResponse,
    MessageRole,
    TextBlock,
    ThinkingBlock,
)

from llamaindex_mfs._tools import response_blocks
from mfs_core.adapters import apply_stop, result_metadata, stream_chunks, token_usage
from mfs_core.events import DecodeEvent
from mfs_core.streaming import ReasoningText
from mfs_core.tools.call import PreparedCall
from mfs_core.tools.parsers import ParsedOutput
from mfs_core.types import DecodeResult

__all__ = ["as_chat", "chat_chunks", "chat_response", "chat_text", "completion", "completion_chunks", "thinking_chunk"]


def completion(result: DecodeResult, stop: list[str] | None, text: str | None = None) -> CompletionResponse:
    """The whole answer (``text``, default the chosen path) cut at ``stop``, usage and the decode in ``raw``, metadata."""
    raw = {"usage": token_usage(result), "result": result}
    text = result.text if text is None else text
    return CompletionResponse(text=apply_stop(text, stop), raw=raw, additional_kwargs=result_metadata(result))


def completion_chunks(
    result: DecodeResult, stop: list[str] | None, text: str | None = None
) -> Iterator[CompletionResponse]:
    """The answer as cumulative chunks with their ``delta`` (at least one, maybe empty)."""
    whole = completion(result, stop, text)
    cumulative = ""
    for piece in list(stream_chunks(whole.text)) or [""]:
        cumulative += piece
        update = {"text": cumulative, "delta": piece, "additional_kwargs": dict(whole.additional_kwargs)}
        yield whole.model_copy(update=update)


def as_chat(
    response: CompletionResponse, parsed: ParsedOutput | None = None, thinking: str | None = None
) -> ChatResponse:
    """An assistant message: a ``ThinkingBlock`` with ``thinking`` (if given), the text,
    then a ``ToolCallBlock`` per parsed call."""
    blocks, extra = response_blocks(response.text, parsed or ParsedOutput(content=response.text))
    if thinking is not None:
        blocks.insert(0, ThinkingBlock(content=thinking))
    return ChatResponse(
        message=ChatMessage(role=MessageRole.ASSISTANT, blocks=blocks, additional_kwargs=extra),
        delta=response.delta,
        raw=response.raw,
        additional_kwargs=response.additional_kwargs,
    )


def thinking_chunk(reasoning: ReasoningText, event: DecodeEvent) -> ChatResponse:
    """The chat chunk of one decode event: the search so far as a ThinkingBlock, no text yet.

    ``additional_kwargs["thinking_delta"]`` holds the new reasoning (what LlamaIndex's
    agents read into ``AgentStream.thinking_delta``); ``delta`` is "".
    """
    delta = reasoning.delta(event)
    message = ChatMessage(role=MessageRole.ASSISTANT, blocks=[ThinkingBlock(content=reasoning.text), TextBlock(text="")])
    return ChatResponse(message=message, delta="", additional_kwargs={"thinking_delta": delta})


def chat_text(result: DecodeResult, call: PreparedCall) -> tuple[str, ParsedOutput]:
    """The message text (calls removed when tools were rendered) and the parsed calls
    (:meth:`~mfs_core.tools.call.PreparedCall.finish`)."""
    return call.finish(result.text)


def chat_response(result: DecodeResult, stop: list[str] | None, call: PreparedCall) -> ChatResponse:
    """The whole chat answer: the message text cut at ``stop``, then the tool calls of ``call``'s parse."""
    text, parsed = chat_text(result, call)
    return as_chat(completion(result, stop, text), parsed)


def chat_chunks(
    result: DecodeResult, stop: list[str] | None, call: PreparedCall, thinking: str | None = None
) -> Iterator[ChatResponse]:
    """Streamed chat: cumulative text chunks, each carrying the (already decided) tool calls."""
    text, parsed = chat_text(result, call)
    for chunk in completion_chunks(result, stop, text):
        yield as_chat(chunk, parsed, thinking=thinking)
