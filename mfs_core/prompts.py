"""Turning a question or chat messages into the text the model is prompted with.

``chat`` format (MFS_SPEC.md, "question x"): the question is the single user message of
the model's chat template (after an optional system message), the generation prompt opens
the assistant turn, and the assistant prefix starts the answer (:func:`assistant_prefix`: by
default the φ-Decoding release's ``The reasoning steps are:\\n\\n`` for the demo model only).
``raw`` format: the prompt is used verbatim.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mfs_core.backends.base import Backend
from mfs_core.settings import DEMO_ASSISTANT_PREFIX, DEMO_MODEL, MFSSettings
from mfs_core.tools.rendering import ToolsNotSupportedError, renders_tools, template_messages

__all__ = ["assistant_prefix", "check_encodable", "render_messages", "render_question", "validate_question"]


def assistant_prefix(settings: MFSSettings, model_name: str) -> str:
    """The text that opens the assistant's answer after the chat template, for ``model_name``.

    ``settings.assistant_prefix`` when it is a string (``""`` included), tools or not. None
    (the default) is model-aware: :data:`~mfs_core.settings.DEMO_ASSISTANT_PREFIX`, the
    φ-Decoding release's ``"The reasoning steps are:\\n\\n"``, for the demo model
    (:data:`~mfs_core.settings.DEMO_MODEL`, trained with it, tool calls included), and ``""``
    for every other model: a chat model opens its own answer, and the release's prefix, written
    after the generation prompt, turned Qwen2.5-Coder-0.5B's tool calls into prose
    and cost it GSM8K questions (docs/real_models.md, "The assistant prefix").

    Args:
        settings: gives ``assistant_prefix``.
        model_name: the backend's model name (:attr:`Backend.model_name`, ``settings.model``
            for the local backends, the served name for the HTTP one).
    """
    if settings.assistant_prefix is not None:
        return settings.assistant_prefix
    return DEMO_ASSISTANT_PREFIX if model_name == DEMO_MODEL else ""


def validate_question(question: object) -> str:
    """Return ``question`` if it is a non-blank string.

    Raises:
        TypeError: not a string (the message names its type).
        ValueError: empty or whitespace only (the message shows the value), or text that
            cannot be encoded as UTF-8 (a lone surrogate; the message names it and where).
    """
    if not isinstance(question, str):
        msg = f"a prompt must be a string, got {type(question).__name__}: {question!r:.80}"
        raise TypeError(msg)
    if not question.strip():
        msg = f"a prompt must not be empty or whitespace only, got {question!r}"
        raise ValueError(msg)
    check_encodable(question, "a prompt")
    return question


def check_encodable(text: str, what: str) -> None:
    """Refuse ``text`` that a tokenizer cannot encode (a lone UTF-16 surrogate such as ``'\\ud800'``).

    Raises:
        ValueError: one line naming the character, its position and ``what`` held it.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        msg = (
            f"{what} must be valid Unicode text, got the lone surrogate {text[exc.start]!r} at character "
            f"{exc.start} of {text[max(0, exc.start - 20):exc.start + 20]!r}"
        )
        raise ValueError(msg) from None


def render_messages(
    messages: Sequence[dict[str, Any]],
    backend: Backend,
    settings: MFSSettings,
    *,
    tools: Sequence[dict[str, Any]] | None = None,
) -> str:
    """Render chat ``messages`` (and ``tools``) into the model prompt.

    The model's chat template with the generation prompt, then the assistant prefix
    (:func:`assistant_prefix`).
    Messages are the neutral dicts of :mod:`mfs_core.tools.rendering` (``role``,
    ``content``; ``tool_calls`` on assistant messages, ``name`` / ``tool_call_id`` on tool
    messages): where the template renders tools they go to it in the Hugging Face format,
    else as text turns (:func:`~mfs_core.tools.rendering.template_messages`).

    Args:
        messages: the conversation.
        backend: renders the template.
        settings: gives ``assistant_prefix``.
        tools: OpenAI-format function tools (checked by the caller with
            :func:`~mfs_core.tools.rendering.check_tools`); None or empty: no tools.

    Raises:
        ValueError: the tokenizer has no chat template, or a message content is not a
            string, or no message holds text.
        ToolsNotSupportedError: ``tools`` given but the template does not render tools.
    """
    for i, message in enumerate(messages):
        content = message.get("content")
        if not isinstance(content, str):
            msg = f"message {i} ({message.get('role')!r}) content must be a string, got {type(content).__name__}"
            raise TypeError(msg)
        check_encodable(content, f"message {i} ({message.get('role')!r})")
    if not messages or not any(m["content"].strip() or m.get("tool_calls") for m in messages):
        msg = f"the messages hold no text: {list(messages)!r:.200}"
        raise ValueError(msg)
    uses_tools = bool(tools) or any(m["role"] == "tool" or m.get("tool_calls") for m in messages)
    native = uses_tools and renders_tools(backend)
    if tools and not native:
        raise ToolsNotSupportedError(backend.model_name)
    prepared = template_messages(messages, native=native)
    rendered = backend.apply_chat_template(prepared, tools=list(tools)) if tools else backend.apply_chat_template(prepared)
    if rendered is None:
        msg = f"model {backend.model_name!r} has no chat template; use prompt_format='raw'"
        raise ValueError(msg)
    return rendered + assistant_prefix(settings, backend.model_name)


def render_question(question: str, backend: Backend, settings: MFSSettings) -> str:
    """The model prompt for ``question`` under ``settings.prompt_format``.

    ``auto`` is ``chat`` when the tokenizer has a chat template, else ``raw``.

    Raises:
        TypeError / ValueError: see :func:`validate_question`; ``chat`` without a template.
    """
    validate_question(question)
    fmt = settings.prompt_format
    if fmt == "raw":
        return question
    messages = []
    if settings.system_prompt:
        messages.append({"role": "system", "content": settings.system_prompt})
    messages.append({"role": "user", "content": question})
    rendered = backend.apply_chat_template(messages)
    if rendered is None:
        if fmt == "chat":
            msg = f"prompt_format='chat' but model {backend.model_name!r} has no chat template"
            raise ValueError(msg)
        return question
    return rendered + assistant_prefix(settings, backend.model_name)
