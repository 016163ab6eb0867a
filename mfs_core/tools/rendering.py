"""Tools and tool messages through the model's chat template.

Adapters hand over *neutral* chat messages: ``{"role": "system" | "user" | "assistant" |
"tool", "content": str}``, an assistant message optionally with ``tool_calls`` (``[{"name",
"arguments": dict, "id"}]``), a tool message optionally with ``name`` and ``tool_call_id``.
:func:`template_messages` turns them into what the template takes:

* a template that renders tools (:func:`renders_tools`): the Hugging Face format,
  ``tool_calls=[{"type": "function", "id", "function": {"name", "arguments": dict}}]`` on
  the assistant message and ``role="tool"`` messages (``transformers``' chat-template
  documentation, "Tool use");
* any other template (the first demo model's has no tool role): an assistant message's
  calls become ``Called tool NAME with {json}`` lines, a tool result a user turn
  ``Tool result (NAME): ...``, which a model reads as input.
"""

from __future__ import annotations

import json
import logging
import weakref
from collections.abc import Sequence
from typing import Any

from mfs_core.backends.base import Backend
from mfs_core.errors import MFSError

__all__ = [
    "PROBE_TOOL",
    "ToolsNotSupportedError",
    "check_tools",
    "renders_tools",
    "resolve_parser",
    "template_messages",
]

logger = logging.getLogger(__name__)

PROBE_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "add",
        "description": "Add two integers.",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
    },
}
"""The tool :func:`renders_tools` renders to see whether a template shows tools."""

_PROBE_MESSAGES = [{"role": "user", "content": "What is 2 + 3?"}]


class ToolsNotSupportedError(MFSError, NotImplementedError):
    """The model's chat template does not render tools, so the model cannot call them."""

    def __init__(self, model_name: str) -> None:
        super().__init__(
            f"model {model_name!r} cannot call tools: its chat template renders the same prompt with and "
            "without tools (apply_chat_template(..., tools=[...]) ignores them). Use a model whose template "
            "renders tools (Qwen 2.5, Llama 3.1, Mistral, Hermes, the tool-calling demo model), or keep this "
            "model as a reasoning tool of an agent driven by a tool-calling model: "
            "langchain_mfs.MFSReasoningTool (LangChain) or a FunctionTool around MFSLLM.complete (LlamaIndex)."
        )


_RENDERS_TOOLS: weakref.WeakKeyDictionary[Backend, bool] = weakref.WeakKeyDictionary()


def _render_probe(backend: Backend, tools: list[dict[str, Any]] | None) -> str | None:
    if tools is None:
        return backend.apply_chat_template(_PROBE_MESSAGES)
    return backend.apply_chat_template(_PROBE_MESSAGES, tools=tools)


def renders_tools(backend: Backend) -> bool:
    """True when ``backend``'s chat template renders tools (cached per backend object).

    A conversation is rendered with and without :data:`PROBE_TOOL`; the template renders
    tools when the two prompts differ. False without a template, and for a backend whose
    ``apply_chat_template`` takes no ``tools`` or fails on them (logged at INFO).
    """
    try:
        return _RENDERS_TOOLS[backend]
    except (KeyError, TypeError):
        pass
    try:
        plain = _render_probe(backend, None)
        with_tools = None if plain is None else _render_probe(backend, [PROBE_TOOL])
        answer = with_tools is not None and with_tools != plain
    except Exception as exc:  # a template that fails on tools cannot use them
        logger.info("chat template of %r does not take tools (%s: %s)", backend.model_name, type(exc).__name__, exc)
        answer = False
    try:
        _RENDERS_TOOLS[backend] = answer
    except TypeError:  # not weak-referenceable: not cached
        pass
    return answer


def resolve_parser(setting: str, backend: Backend) -> str:
    """The tool-call parser to use: ``setting``, or for ``"auto"`` the one the template names.

    Returns:
        ``setting`` unless it is ``"auto"``; then :func:`~mfs_core.tools.parsers.detect_parser`
        of the probe conversation rendered with tools, or ``"auto"`` (try every parser)
        when the template names no format.
    """
    if setting != "auto":
        return setting
    from mfs_core.tools.parsers import detect_parser

    try:
        rendered = _render_probe(backend, [PROBE_TOOL])
    except Exception:  # a template without tools: nothing to detect
        return "auto"
    return (detect_parser(rendered) if rendered else None) or "auto"


def check_tools(tools: Sequence[Any]) -> tuple[dict[str, Any], ...]:
    """Validate OpenAI-format function tools; fill an empty ``parameters`` schema.

    Args:
        tools: ``{"type": "function", "function": {"name": str, "description": str,
            "parameters": JSON schema}}`` dicts.

    Returns:
        The tools as a tuple, each with ``parameters`` (``{"type": "object",
        "properties": {}}`` when absent).

    Raises:
        TypeError: ``tools`` is not a list of dicts.
        ValueError: a tool without a function name, or a ``parameters`` that is not an
            object schema (the message names the tool).
    """
    if isinstance(tools, (str, dict)) or not isinstance(tools, Sequence):
        msg = f"tools must be a list of tool dicts, got {type(tools).__name__}"
        raise TypeError(msg)
    checked = []
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict) or tool.get("type") != "function" or not isinstance(tool.get("function"), dict):
            msg = f"tool {i} must be {{'type': 'function', 'function': {{...}}}}, got {tool!r:.120}"
            raise ValueError(msg)
        function = dict(tool["function"])
        name = function.get("name")
        if not isinstance(name, str) or not name.strip():
            msg = f"tool {i} needs a non-empty function name, got {name!r}"
            raise ValueError(msg)
        parameters = function.get("parameters") or {"type": "object", "properties": {}}
        if not isinstance(parameters, dict) or parameters.get("type", "object") != "object":
            msg = f"tool {name!r}: parameters must be a JSON object schema, got {parameters!r:.120}"
            raise ValueError(msg)
        function["parameters"] = parameters
        checked.append({"type": "function", "function": function})
    return tuple(checked)


def _called_lines(calls: Sequence[dict[str, Any]]) -> list[str]:
    return [f"Called tool {call['name']} with {json.dumps(call.get('arguments') or {}, sort_keys=True)}" for call in calls]


def template_messages(messages: Sequence[dict[str, Any]], *, native: bool) -> list[dict[str, Any]]:
    """Neutral chat messages (module docstring) as the chat template takes them.

    A tool message without ``name`` takes the name of the call whose ``id`` equals its
    ``tool_call_id`` in an earlier assistant message.

    Args:
        messages: neutral messages.
        native: True when the template renders tools (:func:`renders_tools`): tool calls and
            tool messages in the Hugging Face format; False: as text turns.

    Returns:
        New message dicts (the input is not changed).
    """
    names: dict[str, str] = {}
    rendered: list[dict[str, Any]] = []
    for message in messages:
        role, content = message["role"], message.get("content") or ""
        calls = message.get("tool_calls") or []
        for call in calls:
            if call.get("id"):
                names[call["id"]] = call["name"]
        if role == "assistant" and calls:
            if native:
                hf_calls = [
                    {"type": "function", **({"id": call["id"]} if call.get("id") else {}),
                     "function": {"name": call["name"], "arguments": call.get("arguments") or {}}}
                    for call in calls
                ]
                rendered.append({"role": "assistant", "content": content, "tool_calls": hf_calls})
            else:
                rendered.append({"role": "assistant", "content": "\n".join(p for p in [content, *_called_lines(calls)] if p)})
        elif role == "tool":
            name = message.get("name") or names.get(message.get("tool_call_id") or "")
            if native:
                extra = {key: value for key, value in (("name", name), ("tool_call_id", message.get("tool_call_id"))) if value}
                rendered.append({"role": "tool", "content": content, **extra})
            else:
                label = f"Tool result ({name})" if name else "Tool result"
                rendered.append({"role": "user", "content": f"{label}: {content}"})
        else:
            rendered.append({"role": role, "content": content})
    return rendered
