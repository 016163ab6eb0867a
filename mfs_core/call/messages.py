"""Chat messages in the one neutral shape the call layer renders: ``{"role", "content", ...}``.

The front ends translate their own message types (LangChain's ``BaseMessage`` s, LlamaIndex's
``ChatMessage`` s, OpenAI's JSON) into these dicts with :func:`chat_message`; how tool calls and
tool results then reach the chat template is decided when rendering
(:func:`mfs_core.tools.rendering.template_messages`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["chat_message"]

# Role names of the frameworks (LangChain message types, LlamaIndex ``MessageRole``,
# OpenAI roles) mapped to the three roles every chat template knows.
_ROLES = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "ai": "assistant",
    "model": "assistant",
    "chatbot": "assistant",
    "tool": "tool",
    "function": "tool",
}


def chat_message(
    role: str,
    content: str,
    *,
    name: str | None = None,
    tool_calls: Sequence[Mapping[str, Any]] | None = None,
    tool_call_id: str | None = None,
) -> dict[str, Any]:
    """One chat message as the neutral dict :func:`mfs_core.prompts.render_messages` takes.

    Roles are normalised to ``system`` / ``user`` / ``assistant`` / ``tool``: ``human`` and
    ``user`` are the user; ``ai``, ``assistant``, ``model`` and ``chatbot`` the assistant;
    ``system`` and ``developer`` the system; ``tool`` and ``function`` a tool result. How
    tool results and tool calls reach the template (the Hugging Face tool format, or text
    turns for a template without tools) is decided when rendering
    (:func:`mfs_core.tools.rendering.template_messages`).

    Args:
        role: the framework's role name (case-insensitive).
        content: the message text.
        name: the tool's name (tool results only; the speaker's name is dropped).
        tool_calls: an assistant message's calls, ``[{"name", "arguments": dict, "id"}]``.
        tool_call_id: the call a tool result answers.

    Returns:
        ``{"role", "content"}``, plus ``tool_calls`` (assistant), ``name`` and
        ``tool_call_id`` (tool) when given.

    Raises:
        TypeError: ``content`` is not a string.
        ValueError: an unknown role (the message lists the known ones).
    """
    if not isinstance(content, str):
        msg = f"message content must be a string, got {type(content).__name__}: {content!r:.80}"
        raise TypeError(msg)
    normalised = _ROLES.get(str(role).lower())
    if normalised is None:
        msg = f"unknown chat role {role!r}; known: {sorted(_ROLES)}"
        raise ValueError(msg)
    message: dict[str, Any] = {"role": normalised, "content": content}
    if normalised == "tool":
        message.update({key: value for key, value in (("name", name), ("tool_call_id", tool_call_id)) if value})
    elif normalised == "assistant" and tool_calls:
        message["tool_calls"] = [
            {"name": call["name"], "arguments": dict(call.get("arguments") or {}), "id": call.get("id")} for call in tool_calls
        ]
    return message
