"""One chat call with tools or structured output, as both adapters make it.

:func:`prepare_call` is the one way in for a chat call, used by LangChain, LlamaIndex and
``mfs serve``: :func:`plan_call` checks the call's tools, tool choice and response format against the
model once (reading the call's settings); the :class:`CallPlan` then renders the prompt (tools through the template, a
JSON instruction for structured output), gives the decode its vote key
(:class:`~mfs_core.tools.actions.ActionVote`) and parses the chosen completion.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from mfs_core.errors import ContextWindowError
from mfs_core.tools.actions import ActionVote, ToolRequest, normalise_tool_choice
from mfs_core.grammar import ActionGrammar, ActionTag
from mfs_core.tools.parsers import ParsedOutput
from mfs_core.tools.rendering import ToolsNotSupportedError, check_tools, renders_tools, resolve_parser
from mfs_core.tools.structured import add_system_instruction, json_instruction

__all__ = [
    "CallPlan", "PreparedCall", "ResponseFormat", "ToolKwargs", "apply_stop", "plan_call", "prepare_call", "prepare_prompts",
    "stream_calls", "submit_calls",
]


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
    def coerce(cls, value: Any) -> ResponseFormat | None:
        """``value`` as a :class:`ResponseFormat`: None, a ResponseFormat, or the adapters' dict
        ``{"type": "json_schema" | "json_mode", "schema": ...}`` (what ``with_structured_output`` and
        ``structured_predict`` bind).

        Raises:
            ValueError: any other value (the message shows it, cut to 120 characters).
        """
        if value is None or isinstance(value, ResponseFormat):
            return value
        kind = value.get("type") if isinstance(value, dict) else None
        if kind not in ("json_schema", "json_mode"):
            msg = f"response_format must be {{'type': 'json_schema' | 'json_mode', 'schema': ...}}, got {value!r:.120}"
            raise ValueError(msg)
        return cls(kind, value.get("schema"))


@dataclass(frozen=True)
class ToolKwargs:
    """The tool and structured-output keywords of one call, as the adapters receive them.

    Attributes:
        tools: OpenAI-format function tools, or None.
        tool_choice: as given to ``bind_tools`` / ``chat_with_tools`` (see
            :func:`~mfs_core.tools.actions.normalise_tool_choice`).
        response_format: structured output through the prompt, or None.
    """

    tools: list[dict[str, Any]] | None = None
    tool_choice: Any = None
    response_format: ResponseFormat | None = None


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
        return (self.request is not None and self.request.prompt_tools() is not None) or self.response_format is not None

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

    def render(self, engine: Any, settings: Any, messages: Sequence[dict[str, Any]]) -> str:
        """The model prompt: :meth:`messages` and :meth:`prompt_tools` through ``engine``'s
        template, then the opening of a forced call (:meth:`ToolRequest.forced_opening`).

        Raises:
            ContextWindowError: the prompt has as many tokens as the model's context window
                or more; the message gives the tokens, the window and the first message of
                the history that does not fit (raised here, once, before any decode).
        """
        prompt = engine.render_messages(self.messages(messages), settings, tools=self.prompt_tools()) + self.vote.opening
        try:
            window = engine.backend.context_window
            tokens = engine.backend.count_tokens(prompt)
        except Exception:  # a backend that cannot tell (the HTTP one without a tokenizer): the server will
            return prompt
        if isinstance(window, int) and 0 < window <= tokens:
            raise ContextWindowError(self._overflow_message(engine, settings, messages, tokens, window))
        return prompt

    def _overflow_message(self, engine: Any, settings: Any, messages: Sequence[dict[str, Any]], tokens: int,
                          window: int) -> str:
        """One line: the history's size, the window, and the first message past it."""
        first = None
        for count in range(1, len(messages)):
            try:
                part = engine.render_messages(self.messages(messages[:count]), settings, tools=self.prompt_tools())
            except Exception:  # a template that refuses a cut history (e.g. a tool result without its call)
                continue
            if engine.backend.count_tokens(part) >= window:
                first = count
                break
        where = f"message {first} ({messages[first - 1].get('role')}) is the first that does not fit" if first else (
            f"the last message ({messages[-1].get('role') if messages else 'none'}) does not fit")
        return (f"the chat history of {len(messages)} messages renders to {tokens} tokens, which does not fit the "
                f"context window of {window} tokens of model {engine.backend.model_name!r}; {where}; shorten or "
                f"summarise the history")

    def parse(self, text: str) -> ParsedOutput:
        """The tool calls of the chosen completion (see :meth:`ActionVote.parse`)."""
        return self.vote.parse(text)

    def reply(self, text: str, stop: Sequence[str] | None = None) -> tuple[str, ParsedOutput]:
        """The message text of the chosen completion ``text`` and its parse, as every adapter answers.

        The text is the completion with its calls removed when tools were rendered (else the
        completion as is), cut before the first of the ``stop`` sequences
        (:func:`apply_stop`); the parse holds the calls.
        """
        parsed = self.parse(text)
        content = parsed.content if self.prompt_tools() is not None else text
        return apply_stop(content, stop), parsed


def plan_call(
    backend: Any,
    settings: Any,
    *,
    tools: Sequence[dict[str, Any]] | None = None,
    tool_choice: Any = None,
    response_format: ResponseFormat | None = None,
) -> CallPlan:
    """Check a call's tools, choice and format against the model; the :class:`CallPlan`.

    Args:
        backend: the model (its chat template decides whether tools can be rendered and,
            for ``tool_call_parser="auto"``, the parser).
        settings: the call's :class:`~mfs_core.settings.MFSSettings`; read here:
            ``tool_call_parser``; ``constrain_tool_names`` (keep the names of the calls the model
            writes to the tools shown, :meth:`~mfs_core.tools.actions.ToolRequest.name_choice`);
            ``constrain_actions`` (sample calls, Hermes format, and structured output under a
            grammar from their JSON schema, :mod:`mfs_core.grammar`; it supersedes the name
            constraint); ``max_answer_tokens`` (the token budget of one action).
        tools: OpenAI-format function tools (:func:`~mfs_core.tools.rendering.check_tools`).
        tool_choice: see :func:`~mfs_core.tools.actions.normalise_tool_choice`.
        response_format: structured output through the prompt.

    Raises:
        ToolsNotSupportedError: tools to render but the template does not render tools.
        ValueError / TypeError: a malformed tool, a repeated name, a bad ``tool_choice``.
    """
    tool_call_parser, constrain_actions = settings.tool_call_parser, settings.constrain_actions
    constrain_tool_names, action_tokens = settings.constrain_tool_names, settings.max_answer_tokens
    request = None
    if tools:
        checked = check_tools(tools)
        request = ToolRequest(checked, normalise_tool_choice(tool_choice, [t["function"]["name"] for t in checked]))
        if request.prompt_tools() is not None and not renders_tools(backend):
            raise ToolsNotSupportedError(backend.model_name)
    elif tool_choice not in (None, "auto", "none", False):
        msg = f"tool_choice {tool_choice!r} needs tools; bind tools first"
        raise ValueError(msg)
    parser = resolve_parser(tool_call_parser, backend) if request is not None else tool_call_parser
    grammar = None
    if constrain_actions and request is not None:
        grammar = request.action_grammar(parser, action_tokens)
    elif constrain_actions and response_format is not None:
        schema = response_format.schema if response_format.schema is not None else {"type": "object"}
        grammar = ActionGrammar((ActionTag("", schema, ""),), "", action_tokens)
    opening = request.forced_opening(parser, constrained=grammar is not None) if request is not None else ""
    name_choice = None
    if request is not None and constrain_tool_names and grammar is None:
        name_choice = request.name_choice(parser)
    vote = ActionVote(parser, request, json_answers=response_format is not None, opening=opening,
                      triggered_choice=name_choice, action_grammar=grammar)
    return CallPlan(request=request, vote=vote, response_format=response_format)


@dataclass(frozen=True)
class PreparedCall:
    """A chat call ready to decode: its plan, its rendered prompt and the decode's vote key.

    Attributes:
        plan: the :class:`CallPlan` (it parses and finishes the chosen completion: :meth:`CallPlan.reply`).
        prompt: the rendered model prompt (template, tools, JSON instruction, forced opening).
        answer_key: what the decode votes by: the plan's :class:`~mfs_core.tools.actions.ActionVote`
            when the call has tools or structured output, else None (the extracted answer).
    """

    plan: CallPlan
    prompt: str
    answer_key: ActionVote | None

    def finish(self, text: str, stop: Sequence[str] | None = None) -> tuple[str, ParsedOutput]:
        """The reply to the call from its decode's chosen completion ``text``: the message text
        (calls removed when tools were rendered, cut before the first ``stop`` sequence) and its
        parsed calls (:meth:`CallPlan.reply`). Every entry point finishes its calls here.

        Raises:
            TypeError: ``stop`` is a bare string or holds a non-string.
        """
        return self.plan.reply(text, stop)


def prepare_call(
    engine: Any,
    settings: Any,
    messages: Sequence[dict[str, Any]],
    *,
    tools: Sequence[dict[str, Any]] | None = None,
    tool_choice: Any = None,
    response_format: ResponseFormat | None = None,
) -> PreparedCall:
    """The one way in for a chat call, the LangChain and LlamaIndex models' and ``mfs serve``'s alike:
    :func:`plan_call` on ``engine``'s model, then the prompt (:meth:`CallPlan.render`) and the vote key.
    The call is finished by the plan (:meth:`CallPlan.reply`: the message text and its parsed calls).

    Args:
        engine: the :class:`~mfs_core.engine.MFSEngine` that decodes the call.
        settings: the call's settings (:func:`plan_call` reads them).
        messages: neutral chat messages (``{"role", "content", ...}``).
        tools, tool_choice, response_format: as :func:`plan_call`.

    Raises:
        As :func:`plan_call`, and ContextWindowError: the prompt does not fit the model's window.
    """
    plan = plan_call(engine.backend, settings, tools=tools, tool_choice=tool_choice, response_format=response_format)
    prompt = plan.render(engine, settings, messages)
    return PreparedCall(plan, prompt, plan.vote if plan.uses_actions else None)


def prepare_prompts(
    engine: Any,
    settings: Any,
    prompts: Sequence[str],
    *,
    response_format: ResponseFormat | None = None,
) -> list[PreparedCall]:
    """The way in for completion calls (LangChain's ``MFSLLM``, LlamaIndex's ``complete``, the
    server's ``/v1/completions``): each prompt rendered by ``settings.prompt_format``
    (:meth:`~mfs_core.engine.MFSEngine.render`), no tools; with ``response_format`` the decodes
    vote over JSON objects (and sample them under a grammar with ``constrain_actions``), the
    prompt itself unchanged (a completion prompt carries its own instruction).

    Returns:
        One :class:`PreparedCall` per prompt, in order.

    Raises:
        ValueError: no prompts; prompt i is empty (the message names i of P).
        TypeError: prompt i is not a string.
    """
    if not prompts:
        msg = "prompts must not be empty, got []"
        raise ValueError(msg)
    plan = plan_call(engine.backend, settings, response_format=response_format)
    key = plan.vote if plan.uses_actions else None
    calls = []
    for i, prompt in enumerate(prompts):
        try:
            calls.append(PreparedCall(plan, engine.render(prompt, settings), key))
        except (TypeError, ValueError) as exc:
            msg = f"prompt {i} of {len(prompts)}: {exc}"
            raise (TypeError if isinstance(exc, TypeError) else ValueError)(msg) from exc
    return calls


def submit_calls(engine: Any, calls: Sequence[PreparedCall], settings: Any, *, method: str,
                 on_event: Any = None) -> list[Any]:
    """Start the decodes of prepared ``calls`` together (one batch, each with its own vote key);
    one :class:`~mfs_core.engine.DecodeFuture` per call (:meth:`~mfs_core.engine.MFSEngine.submit_prompts`).

    Raises:
        ValueError / TypeError: as ``submit_prompts`` (bad settings, unknown method).
    """
    return engine.submit_prompts([call.prompt for call in calls], settings=settings, method=method,
                                 on_event=on_event, answer_key=[call.answer_key for call in calls])


def stream_calls(engine: Any, calls: Sequence[PreparedCall], settings: Any, *, method: str) -> Any:
    """:func:`submit_calls` with the decodes' events delivered as a
    :class:`~mfs_core.streaming.DecodeStream` (:meth:`~mfs_core.engine.MFSEngine.stream_prompts`)."""
    return engine.stream_prompts([call.prompt for call in calls], settings=settings, method=method,
                                 answer_key=[call.answer_key for call in calls])


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
