"""The OpenAI response objects of ``mfs serve``: a decode's result as a choice, usage, stream chunks.

What a chat answer holds is what the adapters return (:meth:`mfs_core.tools.plan.CallPlan.reply`:
the chosen completion with its tool calls parsed, cut at ``stop``); the reasoning streamed
while the search runs is :class:`mfs_core.streaming.ReasoningText`'s, the adapters' too.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

from mfs_core.call import result_metadata, stream_chunks, trace_summary
from mfs_core.tools.parsers import ParsedOutput
from mfs_core.types import DecodeResult

__all__ = ["choice_metadata", "finish_reason", "openai_tool_calls", "sse", "usage", "content_deltas"]


def finish_reason(parsed: ParsedOutput | None) -> str:
    """``"tool_calls"`` when the chosen completion calls a tool, else ``"stop"``."""
    return "tool_calls" if parsed is not None and parsed.tool_calls else "stop"


def openai_tool_calls(parsed: ParsedOutput | None, *, stream: bool = False) -> list[dict[str, Any]]:
    """The parsed calls in the OpenAI shape (arguments as JSON text; with ``stream``, each with its ``index``).

    Invalid calls (malformed JSON, a tool not offered) are not returned as calls: the
    choice's ``mfs.invalid_tool_calls`` lists them (:func:`choice_metadata`).
    """
    if parsed is None:
        return []
    calls = []
    for index, call in enumerate(parsed.tool_calls):
        entry: dict[str, Any] = {"id": call.id, "type": "function",
                                 "function": {"name": call.name, "arguments": json.dumps(call.arguments)}}
        calls.append({"index": index, **entry} if stream else entry)
    return calls


def choice_metadata(result: DecodeResult, parsed: ParsedOutput | None, trace: bool) -> dict[str, Any]:
    """The ``mfs`` object of a choice: :func:`mfs_core.call.result_metadata` (answer, vote,
    stop reason, steps, FLOPs, wall seconds), the search's trace only when ``trace`` asks
    (``trace``: per-step summary; ``result``: the whole :class:`DecodeResult` as a dict)."""
    metadata = result_metadata(result)
    metadata.pop("trace")
    if parsed is not None and parsed.invalid_tool_calls:
        metadata["invalid_tool_calls"] = [{"name": c.name, "arguments": c.arguments, "error": c.error}
                                          for c in parsed.invalid_tool_calls]
    if trace:
        metadata["trace"] = trace_summary(result)
        metadata["result"] = result.to_dict()
    return metadata


def usage(results: Sequence[DecodeResult], prompt_tokens: int, answer_tokens: int) -> dict[str, Any]:
    """OpenAI ``usage`` of a request.

    Args:
        results: the request's decodes.
        prompt_tokens: tokens of the rendered prompt(s), counted once per prompt (tokens).
        answer_tokens: tokens of the answers returned (tokens).

    Returns:
        ``prompt_tokens``; ``completion_tokens``, every token the searches sampled (steps,
        foresight rollouts, completions); ``completion_tokens_details.reasoning_tokens``,
        those of them not in the returned answers (the search); ``total_tokens``.
    """
    completion = sum(result.output_tokens for result in results)
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion,
        "total_tokens": prompt_tokens + completion,
        "completion_tokens_details": {"reasoning_tokens": max(0, completion - answer_tokens)},
    }


def content_deltas(text: str, parsed: ParsedOutput | None) -> Iterator[dict[str, Any]]:
    """The answer as chat ``delta`` objects: its text in chunks (:func:`mfs_core.call.stream_chunks`),
    then the tool calls in one delta."""
    for piece in stream_chunks(text):
        yield {"content": piece}
    calls = openai_tool_calls(parsed, stream=True)
    if calls:
        yield {"tool_calls": calls}


def sse(data: Any) -> bytes:
    """One server-sent event: ``data: <json>`` (or ``data: [DONE]`` for the string ``"[DONE]"``)."""
    text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    return f"data: {text}\n\n".encode()
