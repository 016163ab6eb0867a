"""Foresight over actions: the key the final vote of a decode groups completed paths by.

MFS searches reasoning steps as for any question; with tools bound, each completed path
ends in an *action*: one or more tool calls, or a final answer. :class:`ActionVote` maps a
path to a normalised action key (tool name plus canonical JSON arguments, or the extracted
answer), so the majority vote of :func:`mfs_core.answers.majority_vote` picks the action
most foresight paths agree on, and the returned completion is the best-``F`` path of it.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from typing import Any, Literal

from mfs_core.answers import extract_answer
from mfs_core.grammar import ActionGrammar, ActionTag
from mfs_core.tools.parsers import InvalidToolCall, ParsedOutput, parse_tool_calls
from mfs_core.types import TriggeredChoice

__all__ = ["ActionVote", "ToolChoice", "ToolRequest", "canonical_json", "extract_json", "normalise_tool_choice"]


def _normalise(value: Any) -> Any:
    """Numbers normalised (an integral finite float becomes an int), recursively."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, float):
        return int(value) if math.isfinite(value) and value.is_integer() else value
    if isinstance(value, dict):
        return {str(k): _normalise(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_normalise(v) for v in value]
    return value


def canonical_json(value: Any) -> str:
    """One canonical JSON text per value: keys sorted, no spaces, ``3.0`` written ``3``.

    ``{"b": 2.0, "a": 1}`` and ``{"a": 1, "b": 2}`` both give ``{"a":1,"b":2}``.

    Raises:
        TypeError: a value JSON cannot hold.
    """
    return json.dumps(_normalise(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


_DECODER = json.JSONDecoder()


def extract_json(text: str) -> Any | None:
    """The last JSON object written in ``text`` (fenced in ```json or bare), or None.

    Objects nested in a larger object count as part of it; text around them is ignored.
    """
    found: Any | None = None
    pos = 0
    while True:
        start = text.find("{", pos)
        if start == -1:
            return found
        try:
            obj, end = _DECODER.raw_decode(text, start)
        except json.JSONDecodeError:
            pos = start + 1
            continue
        found, pos = obj, end


@dataclass(frozen=True)
class ToolChoice:
    """Which action the caller allows.

    Attributes:
        mode: ``"auto"`` (the model decides), ``"none"`` (no tool: tools are not rendered),
            ``"required"`` (some tool must be called), ``"named"`` (the tool ``name``).
        name: the forced tool's name, for ``"named"``.
    """

    mode: Literal["auto", "none", "required", "named"] = "auto"
    name: str | None = None


def normalise_tool_choice(choice: Any, tool_names: list[str]) -> ToolChoice:
    """The :class:`ToolChoice` a framework's ``tool_choice`` value means.

    Args:
        choice: None / ``"auto"``; ``"none"`` / False; ``"any"`` / ``"required"`` / True;
            a tool name; ``{"type": "function", "function": {"name": ...}}`` (OpenAI) or
            ``{"type": "tool", "name": ...}`` (Anthropic).
        tool_names: names of the bound tools.

    Raises:
        ValueError: a name that is not among ``tool_names`` or an unknown value (the
            message lists the allowed ones).
    """
    name: Any = None
    if choice is None or choice == "auto":
        return ToolChoice("auto")
    if choice is False or choice == "none":
        return ToolChoice("none")
    if choice is True or choice in ("any", "required"):
        return ToolChoice("required")
    if isinstance(choice, str):
        name = choice
    elif isinstance(choice, dict):
        name = (choice.get("function") or {}).get("name") if "function" in choice else choice.get("name")
    if isinstance(name, str) and name in tool_names:
        return ToolChoice("named", name)
    msg = (
        f"tool_choice {choice!r} is not allowed; use 'auto', 'none', 'any'/'required', or one of the "
        f"bound tools' names {tool_names}"
    )
    raise ValueError(msg)


@dataclass(frozen=True)
class ToolRequest:
    """The tools of one call and the caller's choice among them.

    Attributes:
        tools: OpenAI-format function tools, ``{"type": "function", "function": {"name",
            "description", "parameters"}}`` (see :func:`mfs_core.tools.rendering.check_tools`).
        choice: the :class:`ToolChoice`.
    """

    tools: tuple[dict[str, Any], ...]
    choice: ToolChoice = ToolChoice()

    @property
    def names(self) -> list[str]:
        """Names of the tools, in order."""
        return [tool["function"]["name"] for tool in self.tools]

    def forced_opening(self, parser: str, *, constrained: bool = False) -> str:
        """The text every completion starts with when a call is forced, or ``""``.

        Under ``"required"`` / ``"named"`` the prompt ends with the opening of a call in the
        model's own format, so every sampled path is a call (what vLLM's guided decoding does
        for a forced ``tool_choice``): for the ``hermes`` format ``<tool_call>\n{"name": "``,
        and for a named tool (or ``"required"`` with one tool, the only call allowed) its
        name and ``", "arguments": {``. Other formats (and ``auto``)
        get none: the vote then only drops paths that do not call.

        Args:
            parser: the resolved parser name (:func:`~mfs_core.tools.rendering.resolve_parser`).
            constrained: the arguments are sampled under a grammar (:meth:`action_grammar`):
                the opening stops before the arguments' ``{``, where the grammar's JSON
                value starts, so every backend can continue it.
        """
        if parser != "hermes" or self.choice.mode not in ("required", "named") or not self.tools:
            return ""
        if self.choice.mode == "required" and len(self.tools) > 1:
            return '<tool_call>\n{"name": "'
        name = self.choice.name if self.choice.mode == "named" else self.names[0]  # one tool: the only call allowed
        return f'<tool_call>\n{{"name": {json.dumps(name)}, "arguments": ' + ("" if constrained else "{")

    def action_grammar(self, parser: str, action_tokens: int) -> ActionGrammar | None:
        """The grammar a call is written under, or None (no tools shown, or a format other
        than ``hermes``, whose calls are parsed afterwards).

        One :class:`~mfs_core.grammar.ActionTag` per shown tool: ``<tool_call>\n{"name":
        "<name>", "arguments": `` + its parameters' JSON schema + ``}\n</tool_call>``,
        triggered by ``<tool_call>`` (vLLM's and xgrammar's Hermes structural tag). In
        ``auto`` the model still chooses between answering and calling; once it opens a call,
        the call is one of the tools with valid arguments.

        Args:
            parser: the resolved parser name.
            action_tokens: token budget of a call (tokens).

        Raises:
            ValueError: a tool's parameters schema xgrammar cannot convert.
            GrammarUnavailableError: xgrammar is not installed.
        """
        shown = self.prompt_tools()
        if parser != "hermes" or not shown:
            return None
        tags = []
        for tool in shown:
            function = tool["function"]
            schema = function.get("parameters") or {"type": "object", "properties": {}}
            begin = f'<tool_call>\n{{"name": {json.dumps(function["name"])}, "arguments": '
            tag = ActionTag(begin, schema, "}\n</tool_call>")
            tag.content_format()  # a schema xgrammar cannot convert fails here, naming the tool's schema
            tags.append(tag)
        return ActionGrammar(tuple(tags), "<tool_call>", action_tokens)

    def name_choice(self, parser: str) -> TriggeredChoice | None:
        """The constraint that keeps a call's name to the tools the prompt shows, or None.

        For the ``hermes`` format: wherever the text reaches ``<tool_call>\n{"name": "``, the
        name written is one of :meth:`prompt_tools`' names, closed by ``", "arguments": ``
        (the call's fixed JSON up to its arguments, as the ``begin`` of vLLM's structural tag
        for a Hermes call and llama.cpp's lazy tool-call grammar fix it; a model that knows
        the format but not the name would otherwise close the object wrongly, e.g.
        ``"magic_function": "arguments"``). None for other formats,
        for ``"none"`` and for no tools. The backends that honour it: see
        :class:`~mfs_core.types.GenerationRequest`.

        Args:
            parser: the resolved parser name.
        """
        shown = self.prompt_tools()
        if parser != "hermes" or not shown:
            return None
        return TriggeredChoice('<tool_call>\n{"name": "', tuple(f'{tool["function"]["name"]}", "arguments": ' for tool in shown))

    def prompt_tools(self) -> list[dict[str, Any]] | None:
        """The tools rendered into the prompt: none for ``"none"``, only the forced one for
        ``"named"``, else all."""
        if self.choice.mode == "none" or not self.tools:
            return None
        if self.choice.mode == "named":
            return [tool for tool in self.tools if tool["function"]["name"] == self.choice.name]
        return list(self.tools)


class ActionVote:
    """The vote key of a completed path under a tool request, and the parse of the winner.

    Call it on a completion to get its action key (what :func:`~mfs_core.answers.majority_vote`
    groups by):

    * calls to tools: ``call `` + the canonical JSON of ``[{"arguments", "name"}, ...]``
      (several calls in order), e.g. ``call [{"arguments":{"a":3,"b":4},"name":"add"}]``;
    * no call: the extracted final answer (:func:`~mfs_core.answers.extract_answer`), or with
      ``json_answers`` ``json `` + the canonical JSON of the last JSON object written;
    * None (no vote) for a malformed call, a call to a tool the choice does not allow, or
      no call when ``"required"`` / ``"named"`` demands one.

    Args:
        parser: a parser name of :func:`~mfs_core.tools.parsers.parse_tool_calls` (resolved:
            ``auto`` tries every parser).
        request: the call's tools and choice; None: no tools (only answers are voted on).
        json_answers: vote on the final JSON object instead of the extracted answer
            (structured output).
        opening: text the prompt ends with and every completion continues
            (:meth:`ToolRequest.forced_opening`); it is put back in front of a completion
            before it is parsed or voted on.
        triggered_choice: a constraint every generation request of the decode carries
            (:meth:`ToolRequest.name_choice`), or None; the engine adds it to the requests
            (:meth:`mfs_core.engine.MFSEngine.submit_prompts`).
        action_grammar: the grammar every generation request of the decode samples under
            (:meth:`ToolRequest.action_grammar`, or a JSON object for structured output), or
            None; the engine binds it to each request.
    """

    def __init__(self, parser: str = "auto", request: ToolRequest | None = None, *, json_answers: bool = False,
                 opening: str = "", triggered_choice: TriggeredChoice | None = None,
                 action_grammar: ActionGrammar | None = None) -> None:
        self.parser = parser
        self.request = request
        self.json_answers = json_answers
        self.opening = opening
        self.triggered_choice = triggered_choice
        self.action_grammar = action_grammar

    @property
    def _parses_calls(self) -> bool:
        return self.request is not None and self.request.prompt_tools() is not None

    def parse(self, text: str) -> ParsedOutput:
        """The calls of ``text``; calls the choice does not allow become invalid calls.

        With ``tool_choice="none"`` (or no tools) nothing is parsed: the text is the content.
        """
        if not self._parses_calls:
            return ParsedOutput(content=text.strip())
        parsed = parse_tool_calls(self.opening + text, self.parser)
        allowed = {tool["function"]["name"] for tool in self.request.prompt_tools() or []}  # type: ignore[union-attr]
        refused = [call for call in parsed.tool_calls if call.name not in allowed]
        if not refused:
            return parsed
        invalid = [
            InvalidToolCall(
                name=call.name, arguments=json.dumps(call.arguments), id=call.id,
                error=f"tool {call.name!r} is not among the allowed tools {sorted(allowed)}",
            )
            for call in refused
        ]
        kept = [call for call in parsed.tool_calls if call.name in allowed]
        return replace(parsed, tool_calls=kept, invalid_tool_calls=[*parsed.invalid_tool_calls, *invalid])

    def __call__(self, text: str) -> str | None:
        """The action key of one completed path (see the class docstring)."""
        if self._parses_calls:
            parsed = self.parse(text)
            if parsed.invalid_tool_calls:
                return None
            if parsed.tool_calls:
                calls = [{"name": call.name, "arguments": call.arguments} for call in parsed.tool_calls]
                return "call " + canonical_json(calls)
            if self.request.choice.mode in ("required", "named"):  # type: ignore[union-attr]
                return None
        if self.json_answers:
            obj = extract_json(text)
            return None if obj is None else "json " + canonical_json(obj)
        return extract_answer(text)

