"""Tool-call parsers: the tool calls a completion writes, per model family.

Each parser turns a completed reasoning path into :class:`ParsedOutput`: the text outside
the calls, the well-formed :class:`ToolCall` s and the malformed :class:`InvalidToolCall` s
(a call that cannot be read is reported, never raised). The formats are those of the
families' chat templates, as vLLM's tool parsers read them
(``vllm/entrypoints/openai/tool_parsers``):

* ``hermes`` (Hermes 2 Pro, Qwen 2.5 / 3, the demo model): ``<tool_call>{"name": ...,
  "arguments": {...}}</tool_call>``, one block per call, newlines optional.
* ``llama3_json`` (Llama 3.1 / 3.2 / 3.3 custom tools): a JSON object ``{"name": ...,
  "parameters": {...}}`` on a line of its own, optionally after ``<|python_tag|>``; several
  separated by ``;`` or newlines.
* ``mistral`` (Mistral 7B v0.3, Mixtral, Mistral Small / Nemo): ``[TOOL_CALLS]`` then a JSON
  array ``[{"name": ..., "arguments": {...}}]``, or the newer ``[TOOL_CALLS]name[ARGS]{...}``.

``auto`` picks by the prompt the chat template renders with tools (:func:`detect_parser`);
when the template names no format, every parser is tried in the order hermes, mistral,
llama3_json and the first that finds a call (valid or not) wins.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "PARSERS",
    "InvalidToolCall",
    "ParsedOutput",
    "ParserName",
    "ToolCall",
    "detect_parser",
    "parse_hermes",
    "parse_llama3_json",
    "parse_mistral",
    "parse_tool_calls",
]

ParserName = Literal["auto", "hermes", "llama3_json", "mistral"]


@dataclass(frozen=True)
class ToolCall:
    """A well-formed tool call.

    Attributes:
        name: the tool's name.
        arguments: the keyword arguments, a JSON object.
        id: an identifier derived from the completion text and the call's position
            (``call_`` + 16 hex digits), so the same text always gives the same id.
    """

    name: str
    arguments: dict[str, Any]
    id: str


@dataclass(frozen=True)
class InvalidToolCall:
    """A call the completion started but did not write as the format requires.

    Attributes:
        name: the tool name if it could be read, else None.
        arguments: the raw text of the call (or of its arguments), as written.
        error: why it is invalid, one line.
        id: as :attr:`ToolCall.id`.
    """

    name: str | None
    arguments: str
    error: str
    id: str


@dataclass(frozen=True)
class ParsedOutput:
    """What a parser found in a completion.

    Attributes:
        content: the completion's text with every call (and its tags) removed, stripped.
        tool_calls: well-formed calls, in order.
        invalid_tool_calls: malformed calls, in order.
    """

    content: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    invalid_tool_calls: list[InvalidToolCall] = field(default_factory=list)

    @property
    def has_calls(self) -> bool:
        """True when the completion wrote at least one call, well-formed or not."""
        return bool(self.tool_calls or self.invalid_tool_calls)


def _call_id(text: str, index: int) -> str:
    return "call_" + hashlib.sha1(f"{index}\x00{text}".encode()).hexdigest()[:16]


class _Builder:
    """Collects calls for one completion, numbering them for their ids."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.calls: list[ToolCall] = []
        self.invalid: list[InvalidToolCall] = []

    def _next_id(self) -> str:
        return _call_id(self.text, len(self.calls) + len(self.invalid))

    def add_object(self, obj: Any, raw: str, *, args_keys: tuple[str, ...] = ("arguments", "parameters")) -> None:
        """Add the call ``obj`` (a decoded JSON value) describes, or an invalid call saying why."""
        if not isinstance(obj, dict):
            self.add_invalid(None, raw, f"a tool call must be a JSON object, got {type(obj).__name__}")
            return
        name = obj.get("name")
        if not isinstance(name, str) or not name.strip():
            self.add_invalid(None, raw, f"a tool call needs a non-empty string 'name', got {name!r}")
            return
        key = next((k for k in args_keys if k in obj), None)
        arguments: Any = obj.get(key, {}) if key is not None else {}
        if isinstance(arguments, str):  # some models write the arguments as a JSON string
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except json.JSONDecodeError as exc:
                self.add_invalid(name, arguments, f"arguments of {name!r} are not valid JSON: {exc.msg} at {exc.pos}")
                return
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            self.add_invalid(name, raw, f"arguments of {name!r} must be a JSON object, got {type(arguments).__name__}")
            return
        self.calls.append(ToolCall(name=name.strip(), arguments=arguments, id=self._next_id()))

    def add_json(self, raw: str) -> None:
        """Decode ``raw`` as one JSON call (an invalid call when it is not JSON)."""
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            name = _NAME_IN_TEXT.search(raw)
            self.add_invalid(name.group(1) if name else None, raw, f"not valid JSON: {exc.msg} at {exc.pos}")
            return
        self.add_object(obj, raw)

    def add_invalid(self, name: str | None, raw: str, error: str) -> None:
        self.invalid.append(InvalidToolCall(name=name, arguments=raw, error=error, id=self._next_id()))

    def result(self, content: str) -> ParsedOutput:
        return ParsedOutput(content=content.strip(), tool_calls=self.calls, invalid_tool_calls=self.invalid)


_NAME_IN_TEXT = re.compile(r'"name"\s*:\s*"([^"]+)"')
_HERMES = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.DOTALL)


_FENCED = re.compile(r"\A```(?:json)?[ \t]*\n(.*?)\n?```\Z", re.DOTALL)


def _bare_call(text: str) -> Any:
    """The call object of a reply that is only ``{"name": ..., "arguments": ...}``, bare or
    in a Markdown ```` ```json ```` fence; None for any other text."""
    body = text.strip()
    fenced = _FENCED.match(body)
    if fenced:
        body = fenced.group(1).strip()
    if not body.startswith("{"):
        return None
    try:
        obj = json.loads(body)
    except json.JSONDecodeError:
        return None
    return obj if isinstance(obj, dict) and set(obj) == {"name", "arguments"} else None


def parse_hermes(text: str) -> ParsedOutput:
    """Hermes / Qwen calls: each ``<tool_call>{json}</tool_call>`` block is one call.

    A block left open at the end of the text (the end marker cut it) is still read. A reply
    with no block that is only one object with exactly the keys ``name`` and ``arguments``,
    bare or in a ```` ```json ```` fence, is one call too: Qwen2.5-Coder writes its calls so
    although its template asks for ``<tool_call>`` (8 of 8 greedy probes, docs/real_models.md);
    other JSON stays content.

    Args:
        text: a completion.

    Returns:
        The calls, and the text outside the blocks as ``content``.
    """
    builder = _Builder(text)
    if "<tool_call>" not in text and (bare := _bare_call(text)) is not None:
        builder.add_object(bare, text.strip(), args_keys=("arguments",))
        return builder.result("")
    for match in _HERMES.finditer(text):
        body = match.group(1).strip()
        if not body:
            builder.add_invalid(None, "", "an empty <tool_call> block")
            continue
        builder.add_json(body)
    return builder.result(_HERMES.sub("", text))


_PYTHON_TAG = "<|python_tag|>"
_LINE_OBJECT = re.compile(r"(?m)^[ \t;]*\{")
_DECODER = json.JSONDecoder()


def parse_llama3_json(text: str) -> ParsedOutput:
    """Llama 3.1 JSON calls: ``{"name": ..., "parameters": {...}}`` objects.

    A call is a JSON object that starts a line (or follows ``<|python_tag|>`` or a ``;``
    separating calls) and has a ``"name"``; ``"parameters"`` (Llama's key) or
    ``"arguments"`` hold the arguments. A line that opens such an object but is not valid
    JSON is an invalid call. Other JSON objects (no ``"name"``) stay in the content.

    Args:
        text: a completion.

    Returns:
        The calls, and the rest of the text as ``content``.
    """
    builder = _Builder(text)
    kept: list[str] = []
    source = text.replace(_PYTHON_TAG, "\n")
    pos = 0
    for match in _LINE_OBJECT.finditer(source):
        start = match.end() - 1
        while start >= pos and start < len(source) and source[start] == "{":
            try:
                obj, end = _DECODER.raw_decode(source, start)
            except json.JSONDecodeError as exc:
                line_end = source.find("\n", start)
                raw = source[start : len(source) if line_end == -1 else line_end]
                if '"name"' in raw:
                    name = _NAME_IN_TEXT.search(raw)
                    error = f"not valid JSON: {exc.msg} at {exc.pos - start}"
                    builder.add_invalid(name.group(1) if name else None, raw, error)
                    kept.append(source[pos:start])
                    pos = start + len(raw)
                break
            if not (isinstance(obj, dict) and "name" in obj):
                break
            builder.add_object(obj, source[start:end], args_keys=("parameters", "arguments"))
            kept.append(source[pos:start])
            pos = end
            while pos < len(source) and source[pos] in " \t;":
                pos += 1
            start = pos  # calls chained on one line: '{...}; {...}'
    kept.append(source[pos:])
    return builder.result("".join(kept))


_MISTRAL = "[TOOL_CALLS]"
_MISTRAL_ARGS = re.compile(r"\s*([A-Za-z_][\w.\-]*)\s*\[ARGS\]")


def parse_mistral(text: str) -> ParsedOutput:
    """Mistral calls after ``[TOOL_CALLS]``: a JSON array of calls, or ``name[ARGS]{json}``.

    Args:
        text: a completion.

    Returns:
        The calls, and the text before the first ``[TOOL_CALLS]`` (and between blocks)
        as ``content``.
    """
    builder = _Builder(text)
    pieces = text.split(_MISTRAL)
    kept = [pieces[0]]
    for piece in pieces[1:]:
        body = piece.lstrip()
        if body.startswith("["):
            try:
                calls, end = _DECODER.raw_decode(body)
            except json.JSONDecodeError as exc:
                builder.add_invalid(None, body.strip(), f"the [TOOL_CALLS] array is not valid JSON: {exc.msg} at {exc.pos}")
                continue
            if not isinstance(calls, list):
                builder.add_invalid(None, body[:end], "[TOOL_CALLS] must be followed by a JSON array")
            else:
                for call in calls:
                    builder.add_object(call, json.dumps(call))
            kept.append(body[end:])
            continue
        rest, found = body, False
        while True:
            match = _MISTRAL_ARGS.match(rest)
            if match is None:
                if not found and rest.strip():
                    builder.add_invalid(None, rest.strip(), "[TOOL_CALLS] must be followed by a JSON array or name[ARGS]{...}")
                else:
                    kept.append(rest)
                break
            name = match.group(1)
            try:
                arguments, end = _DECODER.raw_decode(rest, _skip_space(rest, match.end()))
            except json.JSONDecodeError as exc:
                builder.add_invalid(name, rest[match.end() :].strip(), f"arguments of {name!r} are not valid JSON: {exc.msg}")
                break
            builder.add_object({"name": name, "arguments": arguments}, rest[match.start() : end])
            found, rest = True, rest[end:]
    return builder.result("".join(kept))


def _skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    return pos


PARSERS: dict[str, Callable[[str], ParsedOutput]] = {
    "hermes": parse_hermes,
    "mistral": parse_mistral,
    "llama3_json": parse_llama3_json,
}
"""Parser name -> parser; the order is the one ``auto`` tries when the template names none."""

# What a chat template writes into the prompt when given tools, per family.
_MARKERS: tuple[tuple[str, str], ...] = (
    ("[AVAILABLE_TOOLS]", "mistral"),
    ("[TOOL_CALLS]", "mistral"),
    ("<tool_call>", "hermes"),
    ("<|python_tag|>", "llama3_json"),
    ('"parameters": dictionary of argument name', "llama3_json"),
    ("Environment: ipython", "llama3_json"),
)


def detect_parser(rendered_with_tools: str) -> str | None:
    """The parser a chat template asks for, read from the prompt it renders with tools.

    Args:
        rendered_with_tools: the template's output for a conversation with tools.

    Returns:
        ``"mistral"`` (``[AVAILABLE_TOOLS]``), ``"hermes"`` (``<tool_call>``),
        ``"llama3_json"`` (``<|python_tag|>``, Llama 3.1's JSON-call instruction or
        ``Environment: ipython``), or None when the prompt names no format.
    """
    for marker, parser in _MARKERS:
        if marker in rendered_with_tools:
            return parser
    return None


def parse_tool_calls(text: str, parser: str = "auto") -> ParsedOutput:
    """The tool calls in ``text`` under ``parser``.

    Args:
        text: a completion (the end marker already removed).
        parser: ``"hermes"``, ``"llama3_json"``, ``"mistral"``, or ``"auto"``: every parser
            in :data:`PARSERS` order, the first that finds a call wins (no call: the text
            is the content).

    Returns:
        The :class:`ParsedOutput`; never raises on malformed calls.

    Raises:
        ValueError: an unknown parser name (the message lists the known ones).
    """
    if parser == "auto":
        for candidate in PARSERS.values():
            parsed = candidate(text)
            if parsed.has_calls:
                return parsed
        return ParsedOutput(content=text.strip())
    try:
        return PARSERS[parser](text)
    except KeyError:
        msg = f"unknown tool_call_parser {parser!r}; known: ['auto', {', '.join(repr(p) for p in PARSERS)}]"
        raise ValueError(msg) from None
