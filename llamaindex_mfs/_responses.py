"""LlamaIndex responses of a call: :class:`~mfs_core.call.Reply` to ``CompletionResponse`` / ``ChatResponse``.

Pure functions of the reply (the call layer already cut its text at ``stop`` and parsed its tool
calls): the text, usage and the decode in ``raw``, :func:`mfs_core.call.result_metadata` in
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
from mfs_core.call import Reply
from mfs_core.events import DecodeEvent
from mfs_core.streaming import ReasoningText
from mfs_core.tools.parsers import ParsedOutput

__all__ = ["as_chat", "chat_chunks", "chat_response", "completion", "completion_chunks", "thinking_chunk"]


def completion(reply: Reply) -> CompletionResponse:
    """The whole answer: its text, usage and the decode in ``raw``, the metadata in ``additional_kwargs``."""
    raw = {"usage": reply.usage, "result": reply.result}
    return CompletionResponse(text=reply.text, raw=raw, additional_kwargs=reply.metadata)


def completion_chunks(reply: Reply) -> Iterator[CompletionResponse]:
    """The answer as cumulative chunks with their ``delta`` (at least one, maybe empty)."""
    whole = completion(reply)
    cumulative = ""
    for piece in reply.chunks():
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


def chat_response(reply: Reply) -> ChatResponse:
    """The whole chat answer: the message text, then the tool calls of the reply's parse."""
    return as_chat(completion(reply), reply.parsed)


def chat_chunks(reply: Reply, thinking: str | None = None) -> Iterator[ChatResponse]:
    """Streamed chat: cumulative text chunks, each carrying the (already decided) tool calls."""
    for chunk in completion_chunks(reply):
        yield as_chat(chunk, reply.parsed, thinking=thinking)
