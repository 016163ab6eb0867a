"""The per-call keywords: one set, read once, for LangChain, LlamaIndex and the server.

A call may give ``method`` (a registered decoder), ``stop`` (sequences that cut the returned text),
``tools`` and ``tool_choice`` (OpenAI-format function tools, chat calls only), ``response_format``
(structured output through the prompt), ``max_tokens`` (``max_answer_tokens``) and any
:class:`MFSSettings` field but the secret ``api_key`` (``seed=3``, ``step_beam_size=2``): the same
names in every front end. :meth:`CallKeywords.parse` reads them from a framework's keyword
arguments (after the adapter took its own framework keys out and converted its tool types) and
refuses any other name with one line listing the valid ones.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mfs_core.call.settings import rename_max_tokens, settings_from_fields
from mfs_core.decoders import decoder_spec, get_decoder
from mfs_core.settings import MFSSettings
from mfs_core.tools.plan import ResponseFormat, ToolChoiceValue, apply_stop

__all__ = ["CALL_KEYWORDS", "SETTING_KEYWORDS", "CallKeywords", "join_stops"]

SETTING_KEYWORDS: frozenset[str] = (frozenset(MFSSettings.model_fields) - {"api_key"}) | {"max_tokens", "method"}
"""Keywords that change what a call decodes with: every setting but the secret ``api_key`` (call keywords
reach what tracing records), ``max_tokens`` (``max_answer_tokens``) and ``method``."""

CALL_KEYWORDS: frozenset[str] = SETTING_KEYWORDS | {"stop", "tools", "tool_choice", "response_format"}
"""Every keyword a call takes, in every front end."""


@dataclass(frozen=True)
class CallKeywords:
    """What one call asks for beyond its input.

    Attributes:
        method: the registered decoder (checked), or None: the front end's own.
        stop: sequences cutting the returned text before the first of them (they do not shorten the search).
        tools: OpenAI-format function tools, or None.
        tool_choice: see :data:`~mfs_core.tools.plan.ToolChoiceValue`.
        response_format: structured output through the prompt, or None.
        settings: setting name -> value this call changes (``max_tokens`` already ``max_answer_tokens``).
    """

    method: str | None = None
    stop: tuple[str, ...] = ()
    tools: list[dict[str, Any]] | None = None
    tool_choice: ToolChoiceValue = None
    response_format: ResponseFormat | None = None
    settings: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def parse(cls, kwargs: Mapping[str, Any], *, owner: str, stop: Sequence[str] | None = None) -> CallKeywords:
        """The keywords of one call, checked.

        Args:
            kwargs: the call's keyword arguments (the framework's own keys already taken out).
            owner: who is called, for the messages (``"ChatMFS"``).
            stop: the call's stop sequences when the framework passes them apart (LangChain's
                ``stop=``); joined after any ``kwargs["stop"]``.

        Raises:
            TypeError: a name not in :data:`CALL_KEYWORDS` (one line listing them); ``stop`` a
                bare string or holding a non-string.
            ValueError: an unknown ``method`` (listing the registered decoders); a bad
                ``response_format``; ``max_tokens`` and ``max_answer_tokens`` that differ.
        """
        unknown = sorted(set(kwargs) - CALL_KEYWORDS)
        if unknown:
            settings = ", ".join(sorted(SETTING_KEYWORDS - {"method", "max_tokens"}))
            msg = (f"{owner} got unknown keyword arguments {unknown}; a call takes method, stop, tools, tool_choice, "
                   f"response_format, max_tokens and the MFS settings ({settings})")
            raise TypeError(msg)
        method = kwargs.get("method")
        if method is not None:
            get_decoder(method)  # ValueError listing the registered decoders
        settings = rename_max_tokens({k: v for k, v in kwargs.items() if k in SETTING_KEYWORDS and k != "method"})
        tools = kwargs.get("tools")
        return cls(
            method=method,
            stop=join_stops(kwargs.get("stop"), stop),
            tools=list(tools) if tools else None,
            tool_choice=kwargs.get("tool_choice"),
            response_format=ResponseFormat.coerce(kwargs.get("response_format")),
            settings=settings,
        )

    def check_params(self, method: str) -> None:
        """Check this call's settings against its method's parameters (``self.method``, else ``method``).

        Raises:
            ParamNotAccepted: a load-time setting, or one the method does not take (:meth:`DecoderSpec.check_params`).
            pydantic.ValidationError: a value out of range (one line naming field, value and range).
        """
        decoder_spec(self.method or method).check_params(self.settings)

    def settings_on(self, base: MFSSettings) -> MFSSettings:
        """``base`` changed by this call's settings (``base`` itself when it changes none; no environment read).

        Raises:
            pydantic.ValidationError: a value out of range (one line naming field and value).
        """
        return settings_from_fields(self.settings, base=base)

    @property
    def has_tools(self) -> bool:
        """True when the call gives tools or a tool choice beyond ``"auto"`` / ``"none"``."""
        return bool(self.tools) or self.tool_choice not in (None, "auto", "none", False)


def join_stops(*stops: Sequence[str] | None) -> tuple[str, ...]:
    """The stop sequences of ``stops`` in order, each once (None and empty lists add nothing).

    Raises:
        TypeError: one of them is a bare string or holds a non-string (the message shows it).
    """
    joined: list[str] = []
    for sequences in stops:
        apply_stop("", sequences)  # the one check of a stop list's type
        joined += list(sequences or [])
    return tuple(dict.fromkeys(joined))
