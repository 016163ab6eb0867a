"""LlamaIndex's side of tool calling for :class:`~llamaindex_mfs.MFSLLM`.

Framework types only: LlamaIndex chat messages to the neutral dicts of
:func:`mfs_core.prompts.render_messages` (assistant tool calls from ``ToolCallBlock`` s or
OpenAI-style ``additional_kwargs["tool_calls"]``, tool results with their
``tool_call_id``), and a parsed completion back to ``ToolCallBlock`` s and ``ToolSelection`` s.
Rendering, parsing and the vote over actions are :mod:`mfs_core.tools`'.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from llama_index.core.base.llms.types import ChatMessage, ChatResponse, TextBlock, ThinkingBlock, ToolCallBlock
from llama_index.core.llms.llm import ToolSelection

from mfs_core.call import chat_message
from mfs_core.tools.parsers import ParsedOutput

__all__ = ["ToolResponses", "message_dict", "response_blocks", "tool_selections"]


def _openai_calls(raw: Any) -> list[dict[str, Any]]:
    """``additional_kwargs["tool_calls"]`` (OpenAI format, arguments as JSON text) as neutral calls."""
    calls = []
    for call in raw or []:
        function = call.get("function", call) if isinstance(call, dict) else {}
        arguments = function.get("arguments") or {}
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except json.JSONDecodeError:
                arguments = {"_raw": arguments}
        calls.append({"name": function.get("name", ""), "arguments": arguments, "id": call.get("id")})
    return calls


def message_dict(index: int, message: ChatMessage) -> dict[str, Any]:
    """One LlamaIndex chat message as a neutral chat dict.

    ``ThinkingBlock`` s (the search an earlier streamed answer showed) are dropped.

    Raises:
        ValueError: a block that is neither text nor a tool call (an image, audio), or an
            unknown role (the message names the index and the block type).
    """
    texts, calls = [], []
    for block in message.blocks:
        if isinstance(block, TextBlock):
            texts.append(block.text)
        elif isinstance(block, ToolCallBlock):
            kwargs = block.tool_kwargs
            if isinstance(kwargs, str):
                try:
                    kwargs = json.loads(kwargs) if kwargs.strip() else {}
                except json.JSONDecodeError:
                    kwargs = {"_raw": kwargs}
            calls.append({"name": block.tool_name, "arguments": kwargs, "id": block.tool_call_id})
        elif isinstance(block, ThinkingBlock):
            continue  # the search's reasoning of an earlier answer (stream_chat) is not re-read
        else:
            msg = f"MFSLLM takes text only; message {index} ({message.role.value}) holds a {block.block_type!r} block"
            raise ValueError(msg)
    if not calls:
        calls = _openai_calls(message.additional_kwargs.get("tool_calls"))
    extra = message.additional_kwargs
    return chat_message(
        message.role.value, "\n".join(texts), name=extra.get("name"), tool_calls=calls or None,
        tool_call_id=extra.get("tool_call_id"),
    )


def response_blocks(text: str, parsed: ParsedOutput) -> tuple[list[Any], dict[str, Any]]:
    """The assistant message's blocks (text, then one ``ToolCallBlock`` per call) and the
    ``additional_kwargs`` holding ``tool_calls`` (OpenAI format) and ``invalid_tool_calls``."""
    blocks: list[Any] = [TextBlock(text=text)]
    blocks += [ToolCallBlock(tool_call_id=c.id, tool_name=c.name, tool_kwargs=c.arguments) for c in parsed.tool_calls]
    extra: dict[str, Any] = {}
    if parsed.tool_calls:
        extra["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
            for c in parsed.tool_calls
        ]
    if parsed.invalid_tool_calls:
        extra["invalid_tool_calls"] = [
            {"id": c.id, "name": c.name, "arguments": c.arguments, "error": c.error} for c in parsed.invalid_tool_calls
        ]
    return blocks, extra


def tool_selections(message: ChatMessage) -> list[ToolSelection]:
    """The ``ToolSelection`` of each ``ToolCallBlock`` of ``message``, in order."""
    return [
        ToolSelection(tool_id=block.tool_call_id or "", tool_name=block.tool_name, tool_kwargs=block.tool_kwargs)
        for block in message.blocks
        if isinstance(block, ToolCallBlock)
    ]


def first_call_only(message: ChatMessage) -> ChatMessage:
    """``message`` with only its first tool call (LlamaIndex's ``allow_parallel_tool_calls=False``)."""
    seen = False
    blocks = []
    for block in message.blocks:
        if isinstance(block, ToolCallBlock):
            if seen:
                continue
            seen = True
        blocks.append(block)
    extra = dict(message.additional_kwargs)
    if "tool_calls" in extra:
        extra["tool_calls"] = extra["tool_calls"][:1]
    return message.model_copy(update={"blocks": blocks, "additional_kwargs": extra})


def to_tool_specs(tools: Sequence[Any]) -> list[dict[str, Any]]:
    """LlamaIndex tools as OpenAI-format function tools (``ToolMetadata.to_openai_tool``)."""
    return [tool.metadata.to_openai_tool(skip_length_check=True) for tool in tools]


class ToolResponses:
    """``FunctionCallingLLM``'s reading of a tool-calling reply, for :class:`~llamaindex_mfs.MFSLLM` (a mixin):
    the first call only unless parallel calls are allowed, and the ``ToolSelection`` s of a reply."""

    def _validate_chat_with_tools_response(
        self, response: ChatResponse, tools: Sequence[Any], allow_parallel_tool_calls: bool = False, **kwargs: Any
    ) -> ChatResponse:
        """Keep only the first tool call unless ``allow_parallel_tool_calls``."""
        if not allow_parallel_tool_calls:
            response.message = first_call_only(response.message)
        return response

    def get_tool_calls_from_response(
        self, response: ChatResponse, error_on_no_tool_call: bool = True, **kwargs: Any
    ) -> list[ToolSelection]:
        """The ``ToolSelection`` of each tool call of ``response`` (from its ``ToolCallBlock`` s).

        Malformed calls are not selections; they are in
        ``response.message.additional_kwargs["invalid_tool_calls"]``.

        Raises:
            ValueError: no tool call and ``error_on_no_tool_call`` (the message quotes any
                invalid calls).
        """
        selections = tool_selections(response.message)
        if not selections and error_on_no_tool_call:
            invalid = response.message.additional_kwargs.get("invalid_tool_calls", [])
            msg = f"expected at least one tool call, got 0 (invalid calls: {[(c['name'], c['error']) for c in invalid]})"
            raise ValueError(msg)
        return selections
