"""Grammar-constrained actions: tool calls and structured output that parse by construction.

An :class:`ActionGrammar` says where a decode's completion writes an *action* (a tool call
in the model's format, or the whole answer as a JSON object) and the JSON schema of what is
written there. Every generation request of the decode then samples under an xgrammar
*structural tag* (the grammar format of vLLM's ``StructuredOutputsParams(structural_tag=)``,
of its server's ``structured_outputs`` field, and of xgrammar's own matcher):

* outside an action the text is free until the action's trigger (``<tool_call>`` for the
  Hermes format), then the action's fixed opening (which carries the tool's name), its
  arguments under the tool's JSON schema, and its closing;
* a request whose prompt ends inside an action (a step cut at the step delimiter, or the
  forced opening of ``tool_choice="required"``) continues it under the same grammar: the
  transformers backend feeds the written part to its matcher (:attr:`RequestGrammar.prefix`);
  vLLM and HTTP get a grammar that starts where the prompt ends
  (:attr:`RequestGrammar.remote`), which exists while the prompt ends in the action's fixed
  opening or closing, not inside its JSON value;
* for structured output the whole completion is the action: one JSON object under the
  schema, then the end of the sequence.

JSON values are written with ``", "`` and ``": "`` between items and no other whitespace
(no newline, so an action is never split by the step delimiter ``"\\n"``): the EBNF comes
from ``xgrammar.Grammar.from_json_schema(schema, any_whitespace=False, separators=(", ",
": "))``, the style the demo model and most chat models write.

What the mask does to the log-probs that score a path (``F``) depends on the backend. The
transformers backend reports the raw ones (the mask changes what is sampled, not how it is
scored): a forced token the model found unlikely lowers ``F`` as it would unconstrained.
vLLM (in process or served) applies the grammar's bitmask to the logits before its sampler
computes log-probs, so a constrained token comes back as ``log p(t) - log sum_allowed p``:
never below the raw value, 0 where the grammar allows one token (no ``logprobs_mode``
gives the values before the mask). Free text outside an action is scored the same on all
backends; only the actions' own tokens differ, so on vLLM ``F`` is higher for paths whose
action the grammar steered.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mfs_core.errors import MFSError
from mfs_core.types import RequestGrammar

__all__ = ["ActionGrammar", "ActionTag", "GrammarUnavailableError", "choice_grammar", "grammar_available", "json_value_ebnf"]

_DECODER = json.JSONDecoder()


class GrammarUnavailableError(MFSError, ImportError):
    """``constrain_actions`` is on but the ``xgrammar`` package is not installed."""


def _xgrammar() -> Any:
    try:
        import xgrammar
    except ImportError:  # pragma: no cover - depends on the install
        msg = ("constrain_actions needs the xgrammar package: pip install 'mfs-decoding[grammar]' "
               "(or set constrain_actions=False to sample actions unconstrained)")
        raise GrammarUnavailableError(msg) from None
    return xgrammar


@functools.lru_cache(maxsize=256)
def _ebnf(schema_json: str) -> str:
    xgr = _xgrammar()
    return str(xgr.Grammar.from_json_schema(schema_json, any_whitespace=False, separators=(", ", ": ")))


def json_value_ebnf(schema: dict[str, Any] | bool) -> str:
    """The EBNF grammar (xgrammar's dialect, rule ``root``) of a JSON value under ``schema``.

    Separators ``", "`` and ``": "``, no other whitespace.

    Raises:
        GrammarUnavailableError: xgrammar is not installed.
        ValueError: xgrammar cannot convert ``schema`` (its message, one line).
    """
    try:
        return _ebnf(json.dumps(schema))  # property order kept: the grammar writes properties in it
    except GrammarUnavailableError:
        raise
    except Exception as error:  # xgrammar raises RuntimeError / its own types for a bad schema
        msg = f"cannot build a grammar from the JSON schema {json.dumps(schema)[:200]}: {converter_reason(error)}"
        raise ValueError(msg) from None


_SOURCE_PREFIX = re.compile(r"^\s*(?:\[[\d:.]+\]\s*)?(?:\S+\.(?:cc|cpp|cxx|h|hpp|py):\d+:\s*)?")
"""xgrammar's ``[02:49:17] /project/cpp/json_schema_converter.cc:4944: `` before its reason: a time and the C++
source position, which a client need not see."""


def converter_reason(error: BaseException) -> str:
    """The first line of a grammar converter's error without its time stamp and source position.

    Example:
        ``RuntimeError('[02:49:17] /project/cpp/json_schema_converter.cc:4944: Unsupported type "x"')``
        gives ``'Unsupported type "x"'``.
    """
    lines = str(error).strip().splitlines()
    return _SOURCE_PREFIX.sub("", lines[0]) if lines else type(error).__name__


@dataclass(frozen=True)
class ActionTag:
    """One action the model may write: ``begin``, a JSON value under ``schema``, ``end``.

    For a Hermes tool call ``begin = '<tool_call>\\n{"name": "add", "arguments": '``, the
    tool's parameters as ``schema`` and ``end = '}\\n</tool_call>'`` (vLLM's and
    xgrammar's Hermes structural tag); for structured output ``begin = end = ""``.
    """

    begin: str
    schema: dict[str, Any] | bool
    end: str

    def content_format(self) -> dict[str, Any]:
        """The JSON value as a structural-tag format (an EBNF ``grammar`` format)."""
        return {"type": "grammar", "grammar": json_value_ebnf(self.schema)}

    def format(self) -> dict[str, Any]:
        """The whole tag as a structural-tag ``tag`` format."""
        return {"type": "tag", "begin": self.begin, "content": self.content_format(), "end": self.end}

    def rest_elements(self, written: str) -> list[dict[str, Any]] | None:
        """Formats of what is left of this tag after ``written`` (the text since its begin
        started), or None when ``written`` ends inside the JSON value (no grammar can start
        there without the matcher's state) or does not follow this tag."""
        if self.begin.startswith(written):
            rest = self.begin[len(written):]
            elements = [{"type": "const_string", "value": rest}] if rest else []
            elements.append(self.content_format())
            if self.end:
                elements.append({"type": "const_string", "value": self.end})
            return elements
        if not written.startswith(self.begin):
            return None
        tail = _after_json(written[len(self.begin):])
        if tail is None or not self.end.startswith(tail):
            return None
        rest = self.end[len(tail):]
        return [{"type": "const_string", "value": rest}] if rest else []


def _after_json(text: str) -> str | None:
    """The text after a complete JSON value at the start of ``text``, or None when ``text``
    does not start with one (empty, or a value not finished yet)."""
    try:
        _, end = _DECODER.raw_decode(text)
    except json.JSONDecodeError:
        return None
    return text[end:]


def _structural(fmt: dict[str, Any]) -> str:
    return json.dumps({"type": "structural_tag", "format": fmt}, separators=(",", ":"))


def grammar_available() -> bool:
    """Whether the ``xgrammar`` package (the ``grammar`` extra) is installed."""
    return importlib.util.find_spec("xgrammar") is not None


def choice_grammar(choices: Sequence[str]) -> RequestGrammar:
    """A grammar under which a request writes exactly one of ``choices``, then ends.

    For the answer trigger of a multiple-choice question (``choices`` such as ``(" A", " B",
    " C", " D")``, :func:`mfs_core.decoders.common.ask_for_answers`): the grammar starts where
    the prompt ends, so it is both :attr:`RequestGrammar.structural_tag` and ``remote`` and
    every backend honours it (vLLM reports the renormalised log-probs, see the module
    docstring).

    Args:
        choices: the allowed continuations (non-empty strings, at least one).

    Returns:
        The :class:`~mfs_core.types.RequestGrammar`, with an empty ``prefix``.

    Raises:
        ValueError: no choices, or an empty one.
    """
    if not choices or not all(choices):
        msg = f"choices must be non-empty strings, at least one, got {list(choices)!r}"
        raise ValueError(msg)
    elements = [{"type": "const_string", "value": choice} for choice in choices]
    tag = _structural(elements[0] if len(elements) == 1 else {"type": "or", "elements": elements})
    return RequestGrammar(structural_tag=tag, remote=tag)


@dataclass(frozen=True)
class ActionGrammar:
    """Where a decode writes actions and what they may be (see the module docstring).

    Attributes:
        tags: the actions allowed (at least one). With a ``trigger``, each tag's ``begin``
            starts with it; without, the one tag is the whole completion.
        trigger: the text that opens an action in free text (``"<tool_call>"``), or ``""``:
            the whole completion is ``tags[0]`` (structured output).
        action_tokens: token budget of a request that continues an open action (the
            ``max_answer_tokens`` setting): a step cap must not cut an action's JSON.

    Raises:
        ValueError: no tags, several tags without a trigger, or a tag whose ``begin`` does
            not start with the trigger.
    """

    tags: tuple[ActionTag, ...]
    trigger: str = ""
    action_tokens: int = 512

    def __post_init__(self) -> None:
        if not self.tags:
            msg = "an ActionGrammar needs at least one tag, got none"
            raise ValueError(msg)
        if not self.trigger and len(self.tags) != 1:
            msg = f"a whole-completion ActionGrammar (trigger '') takes one tag, got {len(self.tags)}"
            raise ValueError(msg)
        for tag in self.tags:
            if self.trigger and not tag.begin.startswith(self.trigger):
                msg = f"tag begin {tag.begin!r} does not start with the trigger {self.trigger!r}"
                raise ValueError(msg)

    def _free_format(self) -> dict[str, Any]:
        return {"type": "triggered_tags", "triggers": [self.trigger], "tags": [tag.format() for tag in self.tags]}

    def request_grammar(self, completion: str) -> RequestGrammar:
        """The grammar of one request whose prompt ends with ``completion``.

        Args:
            completion: the text of the prompt after the decode's start (the forced
                opening, the steps written so far).

        Returns:
            A :class:`RequestGrammar`; its ``remote`` is None when ``completion`` ends inside
            an action's JSON value.
        """
        if not self.trigger:
            tag = self.tags[0]
            grammar = _structural(tag.content_format())
            return RequestGrammar(structural_tag=grammar, prefix=completion, remote=grammar if not completion else None,
                                  in_action=not completion, action_tokens=self.action_tokens)
        free = self._free_format()
        at = completion.rfind(self.trigger)
        if at == -1:
            return RequestGrammar(structural_tag=_structural(free), remote=_structural(free),
                                  action_tokens=self.action_tokens)
        written = completion[at:]
        open_tags = []
        for tag in self.tags:
            if tag.begin.startswith(written) or (written.startswith(tag.begin) and not _closed(tag, written)):
                open_tags.append(tag)
        if not open_tags:  # the last action is closed (or was written outside the grammar): free text
            return RequestGrammar(structural_tag=_structural(free), remote=_structural(free),
                                  action_tokens=self.action_tokens)
        remote = None
        rests = [tag.rest_elements(written) for tag in open_tags]
        if all(rest is not None for rest in rests):
            choices = [{"type": "sequence", "elements": [*rest, free]} if rest else free for rest in rests]
            remote = _structural(choices[0] if len(choices) == 1 else {"type": "or", "elements": choices})
        return RequestGrammar(structural_tag=_structural(free), prefix=written, remote=remote, in_action=True,
                              action_tokens=self.action_tokens)


def _closed(tag: ActionTag, written: str) -> bool:
    """True when ``written`` (starting with ``tag.begin``) holds the whole tag, end included."""
    tail = _after_json(written[len(tag.begin):])
    return tail is not None and tail.startswith(tag.end)
