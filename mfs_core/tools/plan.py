"""How one call uses tools or structured output: checked against the model once, then voted on and parsed.

:func:`plan_call` reads a call's tools, tool choice and response format with the model's chat template
and the call's settings; the :class:`CallPlan` it returns says which tools the template renders, which
JSON instruction the messages get, which vote key the decode votes by
(:class:`~mfs_core.tools.actions.ActionVote`) and how the chosen completion is parsed and cut
(:meth:`CallPlan.reply`). Rendering the prompt and decoding are the call layer's
(:mod:`mfs_core.call`), which sits above the engine; nothing here needs one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Union

from mfs_core.backends.base import Backend
from mfs_core.grammar import ActionGrammar, ActionTag
from mfs_core.settings import MFSSettings
from mfs_core.tools.actions import ActionVote, ToolRequest, normalise_tool_choice
from mfs_core.tools.parsers import ParsedOutput
from mfs_core.tools.rendering import ToolsNotSupportedError, check_tools, renders_tools, resolve_parser
from mfs_core.tools.structured import add_system_instruction, json_instruction

__all__ = ["CallPlan", "ResponseFormat", "ToolChoiceValue", "apply_stop", "plan_call"]

ToolChoiceValue = Union[str, bool, Mapping[str, Any], None]
"""A framework's ``tool_choice``: None / ``"auto"``, ``"none"`` / False, ``"any"`` / ``"required"`` / True,
a tool name, or ``{"type": "function", "function": {"name": ...}}``
(:func:`~mfs_core.tools.actions.normalise_tool_choice`)."""


@dataclass(frozen=True)
class ResponseFormat:
    """Structured output through the prompt.

    Attributes:
        kind: ``"json_schema"`` (an object valid under ``schema``) or ``"json_mode"`` (any
            object; ``schema`` optional, validated when given).
        schema: the JSON schema, or None.
    """

    kind: Literal["json_schema", "json_mode"]
    schema: dict[str, Any] | None = None

    @classmethod
    def coerce(cls, value: object) -> ResponseFormat | None:
        """``value`` as a :class:`ResponseFormat`: None, a ResponseFormat, or the adapters' dict
        ``{"type": "json_schema" | "json_mode", "schema": ...}`` (what ``with_structured_output`` and
        ``structured_predict`` bind).

        Raises:
            ValueError: any other value (the message shows it, cut to 120 characters).
        """
        if value is None or isinstance(value, ResponseFormat):
            return value
        kind = value.get("type") if isinstance(value, dict) else None
        if not isinstance(value, dict) or kind not in ("json_schema", "json_mode"):
            msg = f"response_format must be {{'type': 'json_schema' | 'json_mode', 'schema': ...}}, got {value!r:.120}"
            raise ValueError(msg)
        return cls(kind, value.get("schema"))


@dataclass(frozen=True)
class CallPlan:
    """How one call is rendered, voted on and parsed.

    Attributes:
        request: the tools and choice, or None (no tools, or ``tool_choice="none"`` with
            nothing to render).
        vote: the vote key of the decode, and the parser of the chosen completion.
        response_format: structured output through the prompt, or None.
    """

    request: ToolRequest | None
    vote: ActionVote
    response_format: ResponseFormat | None = None

    @property
    def uses_actions(self) -> bool:
        """True when the vote differs from the plain answer vote (tools or JSON)."""
        return self.prompt_tools() is not None or self.response_format is not None

    @property
    def answer_key(self) -> ActionVote | None:
        """What the decode votes by: :attr:`vote` when the call has tools or structured output, else
        None (the extracted answer)."""
        return self.vote if self.uses_actions else None

    def prompt_tools(self) -> list[dict[str, Any]] | None:
        """The tools the template renders (None: none)."""
        return self.request.prompt_tools() if self.request is not None else None

    def messages(self, messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """``messages`` with the JSON instruction added for structured output (the schema is
        shown for ``json_schema`` only; ``json_mode`` asks for any object)."""
        if self.response_format is None:
            return list(messages)
        shown = self.response_format.schema if self.response_format.kind == "json_schema" else None
        return add_system_instruction(messages, json_instruction(shown))

    def parse(self, text: str) -> ParsedOutput:
        """The tool calls of the chosen completion (see :meth:`ActionVote.parse`)."""
        return self.vote.parse(text)

    def reply(self, text: str, stop: Sequence[str] | None = None) -> tuple[str, ParsedOutput]:
        """The message text of the chosen completion ``text`` and its parse, as every front end answers.

        The text is the completion with its calls removed when tools were rendered (else the
        completion as is), cut before the first of the ``stop`` sequences
        (:func:`apply_stop`); the parse holds the calls.

        Raises:
            TypeError: ``stop`` is a bare string or holds a non-string.
        """
        parsed = self.parse(text)
        content = parsed.content if self.prompt_tools() is not None else text
        return apply_stop(content, stop), parsed


def plan_call(
    backend: Backend,
    settings: MFSSettings,
    *,
    tools: Sequence[dict[str, Any]] | None = None,
    tool_choice: ToolChoiceValue = None,
    response_format: ResponseFormat | None = None,
) -> CallPlan:
    """Check a call's tools, choice and format against the model; the :class:`CallPlan`.

    Args:
        backend: the model (its chat template decides whether tools can be rendered and,
            for ``tool_call_parser="auto"``, the parser).
        settings: the call's settings; read here: ``tool_call_parser``; ``constrain_tool_names``
            (keep the names of the calls the model writes to the tools shown,
            :meth:`~mfs_core.tools.actions.ToolRequest.name_choice`); ``constrain_actions`` (sample
            calls, Hermes format, and structured output under a grammar from their JSON schema,
            :mod:`mfs_core.grammar`; it supersedes the name constraint); ``max_answer_tokens`` (the
            token budget of one action, tokens).
        tools: OpenAI-format function tools (:func:`~mfs_core.tools.rendering.check_tools`).
        tool_choice: see :data:`ToolChoiceValue`.
        response_format: structured output through the prompt.

    Raises:
        ToolsNotSupportedError: tools to render but the template does not render tools.
        ValueError / TypeError: a malformed tool, a repeated name, a bad ``tool_choice``.
    """
    request = None
    if tools:
        checked = check_tools(tools)
        request = ToolRequest(checked, normalise_tool_choice(tool_choice, [t["function"]["name"] for t in checked]))
        if request.prompt_tools() is not None and not renders_tools(backend):
            raise ToolsNotSupportedError(backend.model_name)
    elif tool_choice not in (None, "auto", "none", False):
        msg = f"tool_choice {tool_choice!r} needs tools; bind tools first"
        raise ValueError(msg)
    parser = resolve_parser(settings.tool_call_parser, backend) if request is not None else settings.tool_call_parser
    action_tokens = settings.max_answer_tokens
    grammar = None
    if settings.constrain_actions and request is not None:
        grammar = request.action_grammar(parser, action_tokens)
    elif settings.constrain_actions and response_format is not None:
        schema = response_format.schema if response_format.schema is not None else {"type": "object"}
        grammar = ActionGrammar((ActionTag("", schema, ""),), "", action_tokens)
    opening = request.forced_opening(parser, constrained=grammar is not None) if request is not None else ""
    name_choice = None
    if request is not None and settings.constrain_tool_names and grammar is None:
        name_choice = request.name_choice(parser)
    vote = ActionVote(parser, request, json_answers=response_format is not None, opening=opening,
                      triggered_choice=name_choice, action_grammar=grammar)
    return CallPlan(request=request, vote=vote, response_format=response_format)


def apply_stop(text: str, stop: Sequence[str] | None) -> str:
    """``text`` cut before the earliest of the ``stop`` sequences (unchanged if none occurs).

    Raises:
        TypeError: ``stop`` is a bare string or holds a non-string (the message shows it).
    """
    if not stop:
        return text
    if isinstance(stop, str):
        msg = f"stop must be a list of strings, got the string {stop!r}"
        raise TypeError(msg)
    cut = len(text)
    for sequence in stop:
        if not isinstance(sequence, str):
            msg = f"stop sequences must be strings, got {sequence!r}"
            raise TypeError(msg)
        if sequence:
            index = text.find(sequence)
            if index != -1:
                cut = min(cut, index)
    return text[:cut]
