"""LangChain's side of tool calling and structured output for :class:`~langchain_mfs.ChatMFS`.

Framework types only: a call's tool keywords converted for :class:`mfs_core.call.CallKeywords`,
the parsed completion as ``AIMessage`` tool calls, and the output parsers of ``with_structured_output``.
Rendering, the vote over actions and the tool-call parsers are :mod:`mfs_core.tools`'.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.exceptions import OutputParserException
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.messages.tool import invalid_tool_call, tool_call, tool_call_chunk
from langchain_core.utils.function_calling import convert_to_json_schema, convert_to_openai_tool
from langchain_core.utils.pydantic import is_basemodel_subclass, is_pydantic_v1_subclass
from pydantic import ValidationError
from pydantic.v1 import ValidationError as ValidationErrorV1

from mfs_core.tools import StructuredOutputError, extract_json, validate_json
from mfs_core.tools.parsers import ParsedOutput

__all__ = [
    "call_tool_kwargs",
    "json_schema_of",
    "message_tool_fields",
    "parse_json_output",
    "parse_tool_output",
    "tool_call_chunks",
    "tools_to_openai",
]

_IGNORED_KEYS = ("parallel_tool_calls", "strict", "ls_structured_output_format")
"""What ``bind_tools`` / ``with_structured_output`` bind beside the call keywords: accepted, not enforced
(a completion may write several calls; ``strict`` was applied when the tools were converted)."""


def call_tool_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` as :class:`mfs_core.call.CallKeywords` reads them: ``tools`` converted to OpenAI tools
    (``convert_to_openai_tool``), LangChain's own :data:`_IGNORED_KEYS` left out; the rest as given.

    Arguments are sampled under their schema's grammar when ``constrain_actions`` is on (the default;
    Hermes call format), else parsed afterwards.
    """
    converted = {key: value for key, value in kwargs.items() if key not in _IGNORED_KEYS}
    if converted.get("tools"):
        converted["tools"] = [convert_to_openai_tool(tool) for tool in converted["tools"]]
    return converted


def message_tool_fields(parsed: ParsedOutput) -> dict[str, Any]:
    """``tool_calls`` and ``invalid_tool_calls`` of an ``AIMessage`` for a parsed completion."""
    return {
        "tool_calls": [tool_call(name=c.name, args=c.arguments, id=c.id) for c in parsed.tool_calls],
        "invalid_tool_calls": [
            invalid_tool_call(name=c.name, args=c.arguments, id=c.id, error=c.error) for c in parsed.invalid_tool_calls
        ],
    }


def tool_call_chunks(parsed: ParsedOutput) -> list[Any]:
    """The parsed calls as stream chunks (valid calls' arguments as JSON text)."""
    import json

    chunks = [tool_call_chunk(name=c.name, args=json.dumps(c.arguments), id=c.id, index=i) for i, c in enumerate(parsed.tool_calls)]
    offset = len(chunks)
    chunks += [
        tool_call_chunk(name=c.name, args=c.arguments, id=c.id, index=offset + i) for i, c in enumerate(parsed.invalid_tool_calls)
    ]
    return chunks


def json_schema_of(schema: Any) -> dict[str, Any]:
    """The JSON schema of a pydantic model, a TypedDict, a JSON schema or an OpenAI tool.

    Raises:
        ValueError: ``schema`` is none of these.
    """
    if isinstance(schema, type) and is_pydantic_v1_subclass(schema):  # pydantic.v1 models, as LangChain takes them
        return schema.schema()
    if isinstance(schema, type) and is_basemodel_subclass(schema):
        return schema.model_json_schema()
    if isinstance(schema, dict) and ("properties" in schema or schema.get("type") == "object") and "function" not in schema:
        return schema
    try:
        return convert_to_json_schema(schema)
    except (ValueError, TypeError) as exc:
        msg = f"schema must be a pydantic model, a TypedDict or a JSON schema dict, got {schema!r:.120}"
        raise ValueError(msg) from exc


def _validated(obj: Any, schema: Any) -> Any:
    """``obj`` validated: a pydantic instance for a pydantic ``schema``, else the dict."""
    try:
        if isinstance(schema, type) and is_pydantic_v1_subclass(schema):
            return schema.parse_obj(obj)
        if isinstance(schema, type) and is_basemodel_subclass(schema):
            return schema.model_validate(obj)
        if schema is None:
            return validate_json(obj, None)
        return validate_json(obj, json_schema_of(schema))
    except (ValidationError, ValidationErrorV1, StructuredOutputError) as exc:
        raise OutputParserException(f"structured output does not match the schema: {exc}") from exc


def parse_tool_output(message: BaseMessage, schema: Any, name: str) -> Any:
    """The arguments of the first call to ``name`` in ``message``, validated against ``schema``.

    Raises:
        OutputParserException: no call to ``name`` (invalid calls are quoted), or arguments
            the schema rejects.
    """
    calls = [call for call in getattr(message, "tool_calls", []) if call["name"] == name]
    if not calls:
        invalid = [(c.get("name"), c.get("error")) for c in getattr(message, "invalid_tool_calls", [])]
        raise OutputParserException(f"the model did not call {name!r}; invalid calls: {invalid}")
    return _validated(calls[0]["args"], schema)


def parse_json_output(message: BaseMessage, schema: Any) -> Any:
    """The last JSON object of ``message``'s text, validated against ``schema`` (None: any object).

    Raises:
        OutputParserException: no JSON object, or one the schema rejects.
    """
    text = message.text if isinstance(message, AIMessage) else str(message.content)
    obj = extract_json(text)
    if obj is None:
        raise OutputParserException(f"the completion holds no JSON object: {text!r:.200}", llm_output=text)
    return _validated(obj, schema)


def tools_to_openai(tools: Sequence[Any], strict: bool | None = None) -> list[dict[str, Any]]:
    """``convert_to_openai_tool`` of each tool (functions, pydantic models, ``BaseTool``, dicts)."""
    return [convert_to_openai_tool(tool, strict=strict) for tool in tools]
