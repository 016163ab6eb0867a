"""``MFSLLM``: Martingale Foresight Sampling as a LlamaIndex ``FunctionCallingLLM``.

The class translates LlamaIndex calls into :class:`mfs_core.MFSEngine` requests and the
:class:`mfs_core.DecodeResult` back; it holds no decoding logic. Its fields are declared in
:mod:`llamaindex_mfs._fields`, the responses built by :mod:`llamaindex_mfs._responses`, tool
specs and calls converted by :mod:`llamaindex_mfs._tools`; this module is the call path
(settings, rendering, the decode and its wait) and the LlamaIndex entry points. Every entry point is
wrapped by ``@llm_completion_callback()`` / ``@llm_chat_callback()``, so LlamaIndex's
callback handlers (``TokenCountingHandler``, ``LlamaDebugHandler``) and instrumentation
events (``LLMCompletionStartEvent`` ... ``LLMChatEndEvent``) fire as for any LLM.

Prompt format (``MFSSettings.prompt_format``):

* ``chat`` (or ``auto`` with a model whose tokenizer has a chat template, as the demo
  model's): :meth:`MFSLLM.complete` sends the prompt as the single user message of the chat
  template plus the assistant prefix (``MFSEngine.render``), :meth:`MFSLLM.chat` renders the
  messages with the same template, and ``metadata.is_chat_model`` is True, so query engines
  call :meth:`MFSLLM.chat`.
* ``raw``: the completion prompt is sent verbatim; chat messages are joined by
  ``messages_to_prompt`` (LlamaIndex's ``"role: content"`` lines by default).

Streaming shows the search while it runs: ``stream_chat`` / ``astream_chat`` yield a
``ThinkingBlock`` (and ``additional_kwargs["thinking_delta"]``) after each step, and every
streaming call sends :class:`~llamaindex_mfs.events.MFSStepEvent` /
:class:`~llamaindex_mfs.events.MFSStopEvent` through the instrumentation dispatcher. The
answer is chosen by the vote at the end, so its text follows in chunks
(:func:`mfs_core.adapters.stream_chunks`): each response has the cumulative text and its
``delta``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    ChatResponseAsyncGen,
    ChatResponseGen,
    CompletionResponse,
    CompletionResponseAsyncGen,
    CompletionResponseGen,
    LLMMetadata,
    MessageRole,
)
from llama_index.core.bridge.pydantic import PrivateAttr, ValidationError
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.llms.callbacks import llm_chat_callback, llm_completion_callback
from llama_index.core.types import PydanticProgramMode
from pydantic import BaseModel

from llamaindex_mfs._fields import SETTING_NAMES, MFSFields
from llamaindex_mfs._responses import chat_chunks, chat_response, completion, completion_chunks, thinking_chunk
from llamaindex_mfs._tools import ToolResponses, message_dict, to_tool_specs
from llamaindex_mfs.events import to_instrumentation_event
from mfs_core.adapters import (
    OwnedEngines,
    apply_stop,
    astream_events,
    await_results,
    engine_for,
    rename_max_tokens,
    settings_from_fields,
    stream_events,
    wait_results,
)
from mfs_core.decoders import get_decoder
from mfs_core.errors import one_line, unknown_name_message
from mfs_core.engine import MFSEngine
from mfs_core.events import DecodeEvent, EventCallback, StopEvent
from mfs_core.settings import MFSSettings
from mfs_core.streaming import DecodeStream, ReasoningText
from mfs_core.tools import ToolsNotSupportedError, renders_tools
from mfs_core.tools.call import (
    PreparedCall, ResponseFormat, ToolKwargs, plan_call, prepare_call, prepare_prompts, submit_calls,
)
from mfs_core.types import DecodeResult

__all__ = ["MFSLLM"]

logger = logging.getLogger(__name__)
dispatcher = get_dispatcher(__name__)

_Prepare = Callable[[MFSEngine, MFSSettings, ToolKwargs], PreparedCall]
"""Prepares the call on its engine and settings, with its tools and response format
(:func:`~mfs_core.tools.call.prepare_call` for chat, :func:`~mfs_core.tools.call.prepare_prompts` for text)."""

_PER_CALL_KEYS = (frozenset(SETTING_NAMES) - {"api_key"}) | {"stop", "max_tokens"}
"""Keywords a call may set: every setting but the secret ``api_key``, ``max_tokens`` and ``stop``."""
_TOOL_KEYS = frozenset({"tools", "tool_choice", "response_format"})



class MFSLLM(ToolResponses, MFSFields):
    """A LlamaIndex LLM that answers with Martingale Foresight Sampling.

    Every :class:`~mfs_core.MFSSettings` field is mirrored as an optional field; a field
    left None takes its value from the injected ``engine``'s settings, else from the
    ``MFS_*`` environment variable or the settings default. LLMs (and LangChain models of
    ``langchain_mfs``) whose backend settings (:data:`~mfs_core.settings.BACKEND_FIELDS`)
    agree share one loaded model and one batching engine.

    Example:
        >>> from llama_index.core import Settings  # doctest: +SKIP
        >>> Settings.llm = MFSLLM(step_beam_size=4, num_rollouts=4)  # doctest: +SKIP
        >>> Settings.llm.complete("Tom has 3 apples. He buys 4 more apples. "
        ...                       "How many apples does Tom have now?").additional_kwargs["answer"]  # doctest: +SKIP
        '7'

    The model is loaded (or the shared one found) when the LLM is built, so ``metadata``
    only reads the loaded model's config. An injected ``engine`` decodes every call whose
    backend settings equal its own, and a construction or call whose backend settings differ
    is refused with a one-line ``ValueError`` naming the fields (never a second model load,
    :func:`mfs_core.adapters.check_engine`); its settings fill the fields left None.

    ``system_prompt`` is LlamaIndex's field and ``MFSSettings.system_prompt`` at once:
    :meth:`complete` renders it as the system message of the chat template, ``predict``
    and the query engines add it to the messages they pass to :meth:`chat`.

    Per call, keyword arguments named like a setting (``seed=3``, ``step_beam_size=2``)
    override it for that call only, and ``stop=[...]`` cuts the returned text before the
    first stop sequence; chat calls also take ``tools`` / ``tool_choice`` (as
    ``chat_with_tools`` passes them); any other keyword raises ``TypeError``.

    Function calling (``FunctionCallingLLM``): where the model's chat template renders tools,
    ``metadata.is_function_calling_model`` is True, the tools go to the template, the final
    vote runs over actions (tool + canonical JSON arguments, or the answer) and the chosen
    path's calls come back as ``ToolCallBlock`` s / ``ToolSelection`` s, so ``FunctionAgent``,
    ``predict_and_call`` and ``structured_predict`` work; elsewhere tools raise
    :class:`~mfs_core.tools.ToolsNotSupportedError`.

    Construction refuses an unknown argument (``step_beam=4``) with a one-line ``TypeError``
    naming the closest valid one, as ``langchain_mfs`` does; ``max_tokens`` sets
    ``max_answer_tokens`` and ``timeout`` (seconds) bounds how long a call waits, also as
    there. ``api_key`` is a ``SecretStr`` and is left out of ``to_dict``/``to_json`` (so out
    of what callbacks and instrumentation events receive); it is not a per-call keyword.

    Raises:
        TypeError: an unknown argument (the message names the closest valid one).
        pydantic.ValidationError: a setting out of range (the message names it).
        ValueError: an unknown ``method``; ``max_tokens`` and ``max_answer_tokens`` that differ.
        FileNotFoundError / ImportError: the model or the backend's dependencies are missing.
    """


    _base: MFSSettings = PrivateAttr()
    _injected: MFSEngine | None = PrivateAttr(default=None)
    _owned: OwnedEngines = PrivateAttr(default_factory=OwnedEngines)
    _has_chat_template: bool = PrivateAttr(default=False)
    _renders_tools: bool = PrivateAttr(default=False)

    def __init__(self, **data: Any) -> None:
        """Build from keyword fields (see the class attributes).

        ``max_tokens``, the frameworks' standard name, sets ``max_answer_tokens`` (as in
        ``langchain_mfs``).

        Raises:
            TypeError: an unknown argument (one line naming it and the closest valid name).
            ValueError: ``max_tokens`` and ``max_answer_tokens`` both given and different.
            pydantic.ValidationError: a value out of range; one line naming the field, the
                value and the allowed range (:class:`~mfs_core.errors.OneLineValidationError`).
        """
        fields = type(self).model_fields
        valid = set(fields) | {"max_tokens"} | {field.alias for field in fields.values() if field.alias}
        unknown = [name for name in data if name not in valid]
        if unknown:
            raise TypeError(unknown_name_message(type(self).__name__, unknown, valid))
        try:
            super().__init__(**rename_max_tokens(data))
        except ValidationError as exc:
            raise one_line(exc, MFSSettings) from None

    def model_post_init(self, context: Any, /) -> None:
        """Resolve the settings and pick the engine; loads the model unless already loaded."""
        super().model_post_init(context)
        get_decoder(self.method)
        self._injected = self.engine
        self._owned = OwnedEngines()
        self._owned.bind(self)  # a dropped LLM closes the engines it made (not an injected one)
        base = self.engine.settings if self.engine is not None else MFSSettings()
        settings = settings_from_fields(self._field_values(), base=base)
        self.engine = engine_for(settings, self._injected, owner="MFSLLM") if self._injected else self._owned.get(settings)
        self._base = base
        probe = [{"role": "user", "content": "?"}]
        self._has_chat_template = self.engine.backend.apply_chat_template(probe) is not None
        self._renders_tools = renders_tools(self.engine.backend)

    @classmethod
    def class_name(cls) -> str:
        """Name under which LlamaIndex serialises this component."""
        return "MFSLLM"

    # --- settings ------------------------------------------------------------------------
    def _field_values(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in SETTING_NAMES}

    def _resolved(self, name: str) -> Any:
        """One setting's value without building settings (no environment read)."""
        value = getattr(self, name)
        return value if value is not None else getattr(self._base, name)

    def _engine_for(self, settings: MFSSettings) -> MFSEngine:
        """The engine of a call: the injected one (refused when the call's backend settings differ,
        :func:`mfs_core.adapters.check_engine`), else the LLM's own when they are equal, else one it owns
        for those backend settings (:class:`mfs_core.adapters.OwnedEngines`)."""
        if self._injected is not None:
            return engine_for(settings, self._injected, owner="MFSLLM")
        own = self.engine
        if not own.closed and own.settings.backend_settings == settings.backend_settings:
            return own
        return self._owned.get(settings)  # made once per backend settings, closed with the LLM

    def close(self) -> None:
        """Close the engines this LLM made (an injected engine stays open: its owner closes it).

        Each counts one engine out of the shared backend, which closes (the model unloads; vLLM:
        its processes stop) with the last engine that shares it; a later call makes a new one.
        Also done when the LLM is garbage-collected or the interpreter exits, and by ``with
        MFSLLM(...) as llm:``.
        """
        self._owned.close()

    def __enter__(self) -> MFSLLM:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def settings(self) -> MFSSettings:
        """The settings a call without overrides decodes with."""
        return settings_from_fields(self._field_values(), base=self._base)

    def _submit(
        self,
        prepare: _Prepare,
        kwargs: dict[str, Any],
        on_event: EventCallback | None = None,
        *,
        tools_allowed: bool = False,
    ) -> tuple[Future, list[str] | None, PreparedCall]:
        """Start the decode of one call; its future, stop sequences and prepared call (which
        finishes the result: :meth:`~mfs_core.tools.call.PreparedCall.finish`).

        Settings are the fields plus the per-call overrides in ``kwargs``; ``prepare`` turns
        them (the engine and the call's tool keywords) into the prepared call. Chat calls
        (``tools_allowed``) may pass ``tools`` (OpenAI-format function tools) and ``tool_choice``:
        the decode then votes over actions (:func:`mfs_core.tools.call.plan_call`).

        Raises:
            TypeError: a keyword that is neither a setting nor ``stop`` (nor ``tools`` /
                ``tool_choice`` for chat); ``stop`` not a list of strings; a prompt that
                is not a string.
            ValueError: an empty prompt, a non-text message or an unknown role, a bad ``response_format``.
            ToolsNotSupportedError: tools on a model whose template does not render them.
            pydantic.ValidationError: an override out of range.
        """
        allowed = _PER_CALL_KEYS | _TOOL_KEYS if tools_allowed else _PER_CALL_KEYS
        unknown = sorted(set(kwargs) - allowed)
        if unknown:
            msg = f"MFSLLM got unexpected keyword arguments {unknown}; pass settings (e.g. seed=1) or stop=[...]"
            raise TypeError(msg)
        stop = kwargs.get("stop")
        apply_stop("", stop)  # a bad stop (a bare string, a non-string) fails before the decode
        overrides = rename_max_tokens({name: value for name, value in kwargs.items() if name not in _TOOL_KEYS and name != "stop"})
        settings = settings_from_fields({**self._field_values(), **overrides}, base=self._base)
        engine = self._engine_for(settings)
        tool_kwargs = ToolKwargs(kwargs.get("tools"), kwargs.get("tool_choice"),
                                 ResponseFormat.coerce(kwargs.get("response_format")))
        call = prepare(engine, settings, tool_kwargs)
        logger.debug("decoding with %s: M=%d N=%d seed=%d", self.method, settings.step_beam_size,
                     settings.num_rollouts, settings.seed)
        future = submit_calls(engine, [call], settings, method=self.method, on_event=on_event)[0]
        return future, stop, call

    def _wait(self, future: Future) -> DecodeResult:
        """The decode's result, waiting at most ``timeout`` seconds.

        Raises:
            TimeoutError: not done within ``timeout`` seconds; the decode is abandoned (the
                engine drops it at its next round boundary).
        """
        return wait_results([future], self.timeout)[0]

    async def _await(self, future: Future) -> DecodeResult:
        """Async :meth:`_wait`: never blocks the event loop; a timeout or a cancelled task abandons the decode."""
        return (await await_results([future], self.timeout))[0]

    async def _asubmit(
        self, prepare: _Prepare, kwargs: dict[str, Any], *, tools_allowed: bool = False
    ) -> tuple[Future, list[str] | None, PreparedCall]:
        """:meth:`_submit` in a worker thread: settings, rendering (and a model load) off the loop."""
        return await asyncio.to_thread(self._submit, prepare, kwargs, tools_allowed=tools_allowed)

    def _submit_stream(
        self, prepare: _Prepare, kwargs: dict[str, Any], *, tools_allowed: bool = False
    ) -> tuple[DecodeStream, list[str] | None, PreparedCall]:
        """:meth:`_submit`, with the decode's events delivered to the caller (see :meth:`_events`)."""
        stream = DecodeStream()
        future, stop, call = self._submit(prepare, kwargs, on_event=stream.put, tools_allowed=tools_allowed)
        stream.attach([future])
        return stream, stop, call

    async def _asubmit_stream(
        self, prepare: _Prepare, kwargs: dict[str, Any], *, tools_allowed: bool = False
    ) -> tuple[DecodeStream, list[str] | None, PreparedCall]:
        """:meth:`_submit_stream` in a worker thread."""
        return await asyncio.to_thread(self._submit_stream, prepare, kwargs, tools_allowed=tools_allowed)

    @staticmethod
    def _dispatched(event: DecodeEvent) -> DecodeEvent:
        """Send ``event`` through the instrumentation dispatcher (:mod:`llamaindex_mfs.events`)."""
        dispatcher.event(to_instrumentation_event(event))
        return event

    def _uses_chat_template(self, prompt_format: str) -> bool:
        return prompt_format == "chat" or (prompt_format == "auto" and self._has_chat_template)

    @property
    def metadata(self) -> LLMMetadata:
        """Context window and name of the loaded model, ``num_output = max_answer_tokens``.

        ``is_chat_model`` is True when the prompt format resolves to the chat template;
        ``is_function_calling_model`` when, in addition, the template renders tools
        (:func:`mfs_core.tools.renders_tools`), so agents and ``structured_predict`` use
        function calling.
        Reads only the already-loaded model's config (no I/O).
        """
        backend = self.engine.backend
        return LLMMetadata(
            context_window=backend.context_window,
            num_output=self._resolved("max_answer_tokens"),
            is_chat_model=self._uses_chat_template(self._resolved("prompt_format")),
            is_function_calling_model=self._renders_tools and self._uses_chat_template(self._resolved("prompt_format")),
            model_name=backend.model_name,
        )

    # --- prompts -------------------------------------------------------------------------
    def _completion_prompt(self, prompt: str, formatted: bool) -> _Prepare:
        """Prepares ``prompt`` (after ``completion_to_prompt`` unless ``formatted``) by the prompt format."""
        text = prompt if formatted else self.completion_to_prompt(prompt)
        return lambda engine, settings, call: prepare_prompts(
            engine, settings, [text], response_format=call.response_format)[0]

    def _chat_prompt(self, messages: Sequence[ChatMessage]) -> _Prepare:
        """Prepares ``messages`` with the chat template (:func:`~mfs_core.tools.call.prepare_call`), or
        joined by ``messages_to_prompt`` in raw format (no tools there)."""

        def prepare(engine: MFSEngine, settings: MFSSettings, call: ToolKwargs) -> PreparedCall:
            if not self._uses_chat_template(settings.prompt_format):
                plan = plan_call(engine.backend, settings, tools=call.tools, tool_choice=call.tool_choice)
                if plan.prompt_tools() is not None:
                    msg = f"tools need the chat template, but prompt_format={settings.prompt_format!r}"
                    raise ValueError(msg)
                return prepare_prompts(engine, settings, [self.messages_to_prompt(messages)],
                                       response_format=call.response_format)[0]
            return prepare_call(engine, settings, [message_dict(i, message) for i, message in enumerate(messages)],
                                tools=call.tools, tool_choice=call.tool_choice, response_format=call.response_format)

        return prepare

    # --- responses (built by llamaindex_mfs._responses) ---------------------------------
    def _chat_stream(self, stream: DecodeStream, stop: list[str] | None, call: PreparedCall) -> ChatResponseGen:
        """Thinking chunks while the search runs, then the answer chunks (sync)."""
        reasoning = ReasoningText()
        for event in stream_events(stream, self.timeout):
            yield thinking_chunk(reasoning, self._dispatched(event))
            if isinstance(event, StopEvent):
                yield from chat_chunks(event.result, stop, call, thinking=reasoning.text)

    # --- structured output ---------------------------------------------------------------
    def _json_kwargs(self, output_cls: type[BaseModel], llm_kwargs: dict[str, Any] | None) -> dict[str, Any] | None:
        """``llm_kwargs`` plus a JSON response format where the program is LlamaIndex's text one."""
        if self.metadata.is_function_calling_model or self.pydantic_program_mode != PydanticProgramMode.DEFAULT:
            return llm_kwargs
        schema = output_cls.model_json_schema()
        return {**(llm_kwargs or {}), "response_format": {"type": "json_schema", "schema": schema}}

    def structured_predict(
        self, output_cls: type[BaseModel], prompt: Any, llm_kwargs: dict[str, Any] | None = None, **prompt_args: Any
    ) -> Any:
        """LlamaIndex's ``structured_predict``: by function calling where the template renders
        tools (``FunctionCallingProgram``), else by JSON: a system instruction with
        ``output_cls``' schema, the vote over each path's canonical JSON object, and
        LlamaIndex's ``PydanticOutputParser`` on the chosen completion.

        Raises:
            ValueError / pydantic.ValidationError: the chosen completion holds no valid object
                (as LlamaIndex's programs raise).
        """
        return super().structured_predict(output_cls, prompt, self._json_kwargs(output_cls, llm_kwargs), **prompt_args)

    async def astructured_predict(
        self, output_cls: type[BaseModel], prompt: Any, llm_kwargs: dict[str, Any] | None = None, **prompt_args: Any
    ) -> Any:
        """Async :meth:`structured_predict`."""
        kwargs = self._json_kwargs(output_cls, llm_kwargs)
        return await super().astructured_predict(output_cls, prompt, kwargs, **prompt_args)

    # --- function calling ----------------------------------------------------------------
    def _prepare_chat_with_tools(
        self,
        tools: Sequence[Any],
        user_msg: str | ChatMessage | None = None,
        chat_history: list[ChatMessage] | None = None,
        verbose: bool = False,
        allow_parallel_tool_calls: bool = False,
        tool_required: bool = False,
        tool_choice: Any = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        """The :meth:`chat` arguments of ``chat_with_tools`` / ``predict_and_call`` / agents.

        The tools (``ToolMetadata.to_openai_tool``) are rendered by the chat template and
        the decode votes over actions (tool + canonical arguments, or the answer), as
        ``ChatMFS.bind_tools`` does. ``tool_required`` is ``tool_choice="required"`` (only
        paths that call a tool vote; with the Hermes call format the prompt opens a call,
        :meth:`mfs_core.tools.ToolRequest.forced_opening`); ``tool_choice`` may also be
        ``"auto"``, ``"none"`` or a tool name (its call opened up to the arguments).

        Raises:
            ToolsNotSupportedError: the model's template does not render tools (use a
                ``FunctionTool`` around this LLM in an agent driven by a tool-calling LLM).
        """
        if not self._renders_tools:
            raise ToolsNotSupportedError(self.engine.backend.model_name)
        messages = list(chat_history or [])
        if user_msg is not None:
            messages.append(ChatMessage(role=MessageRole.USER, content=user_msg) if isinstance(user_msg, str) else user_msg)
        if tool_choice is None:
            tool_choice = "required" if tool_required else "auto"
        specs = to_tool_specs(tools)
        return {"messages": messages, "tools": specs or None, "tool_choice": tool_choice if specs else None, **kwargs}

    def predict_and_call(self, tools: Sequence[Any], *args: Any, **kwargs: Any) -> Any:
        """``FunctionCallingLLM.predict_and_call``: the model picks a tool and the tool is called.

        Raises:
            ToolsNotSupportedError: the model's template does not render tools. (LlamaIndex
                would fall back to a ReAct agent, which llama-index-core 0.14 cannot build
                without a ``react_chat_formatter``: an unrelated validation error.)
        """
        if not self._renders_tools:
            raise ToolsNotSupportedError(self.engine.backend.model_name)
        return super().predict_and_call(tools, *args, **kwargs)

    async def apredict_and_call(self, tools: Sequence[Any], *args: Any, **kwargs: Any) -> Any:
        """Async :meth:`predict_and_call`; the same error where the template does not render tools."""
        if not self._renders_tools:
            raise ToolsNotSupportedError(self.engine.backend.model_name)
        return await super().apredict_and_call(tools, *args, **kwargs)

    # --- completion ----------------------------------------------------------------------
    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        """Answer ``prompt`` with MFS.

        Args:
            prompt: the question (or a prompt already built by a LlamaIndex template).
            formatted: True if ``completion_to_prompt`` was already applied.
            **kwargs: per-call setting overrides, and ``stop`` (list of strings).

        Returns:
            The chosen reasoning path as ``text``; ``raw["usage"]`` holds ``prompt_tokens``
            and ``completion_tokens`` over every request of the search (tokens) and
            ``raw["result"]`` the whole :class:`~mfs_core.DecodeResult`;
            ``additional_kwargs`` hold ``answer``, ``vote_share``, ``trace`` (per-step
            summary) and the rest of :func:`mfs_core.adapters.result_metadata`.

        Raises:
            TypeError: an unknown keyword; a prompt that is not a string.
            ValueError: an empty prompt; a prompt over the context window.
        """
        future, stop, _ = self._submit(self._completion_prompt(prompt, formatted), kwargs)
        return completion(self._wait(future), stop)

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        """:meth:`complete`, streamed: chunks with cumulative ``text`` and their ``delta``.

        The decode starts at the call; the generator waits for it, then yields the chunks.
        Every chunk carries the same ``raw`` and ``additional_kwargs``.
        """
        stream, stop, _ = self._submit_stream(self._completion_prompt(prompt, formatted), kwargs)

        def gen() -> CompletionResponseGen:
            for event in stream_events(stream, self.timeout):
                if isinstance(self._dispatched(event), StopEvent):
                    yield from completion_chunks(event.result, stop)

        return gen()

    @llm_completion_callback()
    async def acomplete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        """Async :meth:`complete`: settings, rendering and decoding never block the event loop."""
        future, stop, _ = await self._asubmit(self._completion_prompt(prompt, formatted), kwargs)
        return completion(await self._await(future), stop)

    @llm_completion_callback()
    async def astream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseAsyncGen:
        """Async :meth:`stream_complete`."""
        stream, stop, _ = await self._asubmit_stream(self._completion_prompt(prompt, formatted), kwargs)

        async def gen() -> CompletionResponseAsyncGen:
            async for event in astream_events(stream, self.timeout):
                if isinstance(self._dispatched(event), StopEvent):
                    for chunk in completion_chunks(event.result, stop):
                        yield chunk

        return gen()

    # --- chat ----------------------------------------------------------------------------
    @llm_chat_callback()
    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        """Answer the conversation ``messages`` through the model's chat template.

        The messages are rendered as given (as LlamaIndex LLMs do; ``predict`` and the
        query engines add ``system_prompt`` as a system message themselves), their roles
        mapped to ``system`` / ``user`` / ``assistant`` / ``tool`` by
        :func:`mfs_core.adapters.chat_message`; assistant ``ToolCallBlock`` s and tool
        results go to a template that renders tools in its own format, else as text turns
        (``Tool result (NAME): ...``). With the ``raw`` format the messages are joined by
        ``messages_to_prompt`` instead.

        Args:
            messages: the conversation.
            **kwargs: per-call settings, ``stop``, and ``tools`` (OpenAI-format function
                tools) with ``tool_choice``, as :meth:`_prepare_chat_with_tools` passes them.

        Returns:
            An assistant message with the chosen reasoning path (with tools: the text
            outside the calls, then one ``ToolCallBlock`` per call of the voted action;
            ``additional_kwargs["tool_calls"]`` in OpenAI format and any
            ``invalid_tool_calls``); ``raw`` and ``additional_kwargs`` as in :meth:`complete`.

        Raises:
            ValueError: a non-text content block, an unknown role, or no text at all.
            ToolsNotSupportedError: tools on a model whose template does not render them.
        """
        future, stop, call = self._submit(self._chat_prompt(messages), kwargs, tools_allowed=True)
        return chat_response(self._wait(future), stop, call)

    @llm_chat_callback()
    def stream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponseGen:
        """:meth:`chat`, streamed: the search as it runs, then the answer.

        While the search runs, one response per finished step and one at the stop: the
        message holds a ``ThinkingBlock`` with the search so far (per step a summary line
        and the reasoning every live beam shares) and an empty ``TextBlock``;
        ``additional_kwargs["thinking_delta"]`` is the new part and ``delta`` is "". Each
        step also goes through the instrumentation dispatcher as
        :class:`~llamaindex_mfs.events.MFSStepEvent` (then :class:`~llamaindex_mfs.events.MFSStopEvent`).
        Then the answer: messages with the whole thinking, the cumulative text and its ``delta``.
        """
        stream, stop, call = self._submit_stream(self._chat_prompt(messages), kwargs, tools_allowed=True)
        return self._chat_stream(stream, stop, call)

    @llm_chat_callback()
    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        """Async :meth:`chat`: settings, rendering and decoding never block the event loop."""
        future, stop, call = await self._asubmit(self._chat_prompt(messages), kwargs, tools_allowed=True)
        return chat_response(await self._await(future), stop, call)

    @llm_chat_callback()
    async def astream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponseAsyncGen:
        """Async :meth:`stream_chat`: the same responses and events, never blocking the loop."""
        stream, stop, call = await self._asubmit_stream(self._chat_prompt(messages), kwargs, tools_allowed=True)

        async def gen() -> ChatResponseAsyncGen:
            reasoning = ReasoningText()
            async for event in astream_events(stream, self.timeout):
                yield thinking_chunk(reasoning, self._dispatched(event))
                if isinstance(event, StopEvent):
                    for chunk in chat_chunks(event.result, stop, call, thinking=reasoning.text):
                        yield chunk

        return gen()

