"""``MFSLLM``: Martingale Foresight Sampling as a LlamaIndex ``FunctionCallingLLM``.

The class translates LlamaIndex calls into :class:`mfs_core.MFSEngine` requests and the
:class:`mfs_core.DecodeResult` back; it holds no decoding logic. Its fields are declared in
:mod:`llamaindex_mfs._fields`, the responses built by :mod:`llamaindex_mfs._responses`, tool
specs and calls converted by :mod:`llamaindex_mfs._tools`; this module maps the LlamaIndex entry
points onto the call layer (:mod:`mfs_core.call`: settings, engine, prepare, submit, wait or stream,
finish) and back. Every entry point is
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
(:meth:`mfs_core.call.Reply.chunks`): each response has the cumulative text and its
``delta``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
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

from llamaindex_mfs._fields import ADAPTER_FIELDS, MFSFields
from llamaindex_mfs._responses import chat_chunks, chat_response, completion, completion_chunks, thinking_chunk
from llamaindex_mfs._tools import ToolResponses, message_dict, to_tool_specs
from llamaindex_mfs.events import to_instrumentation_event
from mfs_core.call import (
    Caller, CallKeywords, CallStream, ChatInput, EngineSource, TextInput, check_adapter_arguments, check_model_kwargs,
    memo_settings, rename_max_tokens, settings_from_fields, uses_chat_template,
)
from mfs_core.call.engines import ClosesOnExit
from mfs_core.call.settings import SettingsMemo
from mfs_core.decoders import get_decoder
from mfs_core.errors import one_line
from mfs_core.events import DecodeEvent, StopEvent
from mfs_core.settings import MFSSettings
from mfs_core.streaming import ReasoningText
from mfs_core.tools import ToolsNotSupportedError, renders_tools

__all__ = ["MFSLLM"]

logger = logging.getLogger(__name__)
dispatcher = get_dispatcher(__name__)


class MFSLLM(ToolResponses, MFSFields, ClosesOnExit):
    """A LlamaIndex LLM that answers with Martingale Foresight Sampling.

    The settings users turn often (:data:`mfs_core.call.ADAPTER_FIELDS`: model, backend,
    sampling, the search's width and depth) are optional fields, every other
    :class:`~mfs_core.MFSSettings` setting a key of ``model_kwargs``; a setting left unset
    takes its value from the injected ``engine``'s settings, else from the ``MFS_*``
    environment variable or the settings default. LLMs (and LangChain models of
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
    :func:`mfs_core.call.check_engine`); its settings fill the fields left None.

    ``system_prompt`` is LlamaIndex's field and ``MFSSettings.system_prompt`` at once:
    :meth:`complete` renders it as the system message of the chat template, ``predict``
    and the query engines add it to the messages they pass to :meth:`chat`.

    Per call, the keywords of every front end (:class:`mfs_core.call.CallKeywords`, as in
    ``langchain_mfs`` and ``mfs serve``): a setting's name (``seed=3``, ``step_beam_size=2``)
    overrides it for that call only, ``method`` picks the decoder, ``stop=[...]`` cuts the
    returned text before the first stop sequence, ``response_format`` asks for JSON, and chat
    calls take ``tools`` / ``tool_choice`` (as ``chat_with_tools`` passes them); any other
    keyword raises ``TypeError``.

    Function calling (``FunctionCallingLLM``): where the model's chat template renders tools,
    ``metadata.is_function_calling_model`` is True, the tools go to the template, the final
    vote runs over actions (tool + canonical JSON arguments, or the answer) and the chosen
    path's calls come back as ``ToolCallBlock`` s / ``ToolSelection`` s, so ``FunctionAgent``,
    ``predict_and_call`` and ``structured_predict`` work; elsewhere tools raise
    :class:`~mfs_core.tools.ToolsNotSupportedError`.

    Construction refuses an unknown argument (``step_beam=4``) with a one-line ``TypeError``
    naming the closest valid one, and a setting that is not a flat field with one saying to
    pass it in ``model_kwargs``, as ``langchain_mfs`` does; ``max_tokens`` sets
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
    _engines: EngineSource = PrivateAttr(default_factory=EngineSource)
    _settings_memo: SettingsMemo | None = PrivateAttr(default=None)

    def __init__(self, **data: Any) -> None:
        """Build from keyword fields (see the class attributes).

        ``max_tokens``, the frameworks' standard name, sets ``max_answer_tokens`` (as in
        ``langchain_mfs``).

        Raises:
            TypeError: an unknown argument (one line naming it and the closest valid name); a
                setting that is not a flat field (:func:`mfs_core.call.check_adapter_arguments`);
                a bad ``model_kwargs`` key (:func:`mfs_core.call.check_model_kwargs`).
            ValueError: ``max_tokens`` and ``max_answer_tokens`` both given and different.
            pydantic.ValidationError: a value out of range; one line naming the field, the
                value and the allowed range (:class:`~mfs_core.errors.OneLineValidationError`).
        """
        data = rename_max_tokens(data)
        fields = type(self).model_fields
        check_adapter_arguments(type(self).__name__, data, set(fields) | {f.alias for f in fields.values() if f.alias})
        data["model_kwargs"] = check_model_kwargs(type(self).__name__, data.get("model_kwargs"))
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise one_line(exc, MFSSettings) from None

    def model_post_init(self, context: Any, /) -> None:
        """Resolve the settings and pick the engine; loads the model unless already loaded.

        Raises:
            ValueError: an unknown ``method``; an injected engine whose backend settings differ.
        """
        super().model_post_init(context)
        get_decoder(self.method)
        self._engines = EngineSource(self.engine, owner="MFSLLM")
        self._engines.bind(self)  # a dropped LLM closes the engines it made (not an injected one)
        try:
            self._base = settings_from_fields(self.model_kwargs, base=self.engine.settings if self.engine is not None else None)
        except ValidationError as exc:
            raise one_line(exc, MFSSettings) from None
        self.engine = self._engines.get(self.settings)

    @classmethod
    def class_name(cls) -> str:
        """Name under which LlamaIndex serialises this component."""
        return "MFSLLM"

    # --- settings ------------------------------------------------------------------------
    def _setting_values(self) -> dict[str, Any]:
        """Setting name -> this LLM's value (None: unset): ``model_kwargs``, then the flat fields."""
        return {**self.model_kwargs, **{name: getattr(self, name) for name in ADAPTER_FIELDS}}

    def _resolved(self, name: str) -> Any:
        """One setting's value without building settings (no environment read)."""
        value = self._setting_values().get(name)
        return value if value is not None else getattr(self._base, name)

    def close(self) -> None:
        """Close the engines this LLM made (an injected engine stays open: its owner closes it).

        Each counts one engine out of the shared backend, which closes (the model unloads; vLLM:
        its processes stop) with the last engine that shares it; a later call makes a new one.
        Also done when the LLM is garbage-collected or the interpreter exits, and by ``with
        MFSLLM(...) as llm:``.
        """
        self._engines.close()

    @property
    def settings(self) -> MFSSettings:
        """The settings a call without overrides decodes with (rebuilt when a field changes)."""
        self._settings_memo = memo_settings(self._settings_memo, self._setting_values(), self._base, none_unset=True)
        return self._settings_memo[1]

    # --- the call layer ------------------------------------------------------------------
    def _caller(self) -> Caller:
        """The call layer's view of this LLM: its engines, settings, decoder and timeout."""
        return Caller(self._engines, self.settings, self.method, timeout=self.timeout)

    @staticmethod
    def _keywords(kwargs: dict[str, Any]) -> CallKeywords:
        """The call's keywords, checked (:meth:`mfs_core.call.CallKeywords.parse`).

        Raises:
            TypeError: a keyword that is not a call keyword (listing them); ``stop`` not a list of strings.
            ValueError: an unknown ``method``, a bad ``response_format``.
        """
        return CallKeywords.parse(kwargs, owner="MFSLLM")

    def _completion_input(self, prompt: str, formatted: bool) -> TextInput:
        """``prompt`` (after ``completion_to_prompt`` unless ``formatted``), rendered by the prompt format."""
        return TextInput([prompt if formatted else self.completion_to_prompt(prompt)])

    def _chat_input(self, messages: Sequence[ChatMessage]) -> ChatInput:
        """``messages`` for the chat template, or joined by ``messages_to_prompt`` where the call's prompt
        format does not use it (no tools there)."""
        return ChatInput([message_dict(i, message) for i, message in enumerate(messages)],
                         as_text=lambda: self.messages_to_prompt(messages))

    @staticmethod
    def _dispatched(event: DecodeEvent) -> DecodeEvent:
        """Send ``event`` through the instrumentation dispatcher (:mod:`llamaindex_mfs.events`)."""
        dispatcher.event(to_instrumentation_event(event))
        return event

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
        chat = uses_chat_template(backend, self._resolved("prompt_format"))
        return LLMMetadata(
            context_window=backend.context_window,
            num_output=self._resolved("max_answer_tokens"),
            is_chat_model=chat,
            is_function_calling_model=chat and renders_tools(backend),
            model_name=backend.model_name,
        )

    # --- responses (built by llamaindex_mfs._responses) ---------------------------------
    def _chat_stream(self, call: CallStream) -> ChatResponseGen:
        """Thinking chunks while the search runs, then the answer chunks (sync)."""
        reasoning = ReasoningText()
        for event in call.events():
            yield thinking_chunk(reasoning, self._dispatched(event))
            if isinstance(event, StopEvent):
                yield from chat_chunks(call.finish(event), thinking=reasoning.text)

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
        if not renders_tools(self.engine.backend):
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
        if not renders_tools(self.engine.backend):
            raise ToolsNotSupportedError(self.engine.backend.model_name)
        return super().predict_and_call(tools, *args, **kwargs)

    async def apredict_and_call(self, tools: Sequence[Any], *args: Any, **kwargs: Any) -> Any:
        """Async :meth:`predict_and_call`; the same error where the template does not render tools."""
        if not renders_tools(self.engine.backend):
            raise ToolsNotSupportedError(self.engine.backend.model_name)
        return await super().apredict_and_call(tools, *args, **kwargs)

    # --- completion ----------------------------------------------------------------------
    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        """Answer ``prompt`` with MFS.

        Args:
            prompt: the question (or a prompt already built by a LlamaIndex template).
            formatted: True if ``completion_to_prompt`` was already applied.
            **kwargs: the call keywords (:class:`mfs_core.call.CallKeywords`): setting overrides,
                ``method``, ``stop`` (list of strings), ``response_format``.

        Returns:
            The chosen reasoning path as ``text``; ``raw["usage"]`` holds ``prompt_tokens``
            and ``completion_tokens`` over every request of the search (tokens) and
            ``raw["result"]`` the whole :class:`~mfs_core.DecodeResult`;
            ``additional_kwargs`` hold ``answer``, ``vote_share``, ``trace`` (per-step
            summary) and the rest of :func:`mfs_core.call.result_metadata`.

        Raises:
            TypeError: an unknown keyword, ``tools`` (a completion renders none); a prompt that is not a string.
            ValueError: an empty prompt; a prompt over the context window; an unknown ``method``.
        """
        [reply] = self._caller().run(self._completion_input(prompt, formatted), self._keywords(kwargs))
        return completion(reply)

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        """:meth:`complete`, streamed: chunks with cumulative ``text`` and their ``delta``.

        The decode starts at the call; the generator waits for it, then yields the chunks.
        Every chunk carries the same ``raw`` and ``additional_kwargs``.
        """
        call = self._caller().stream(self._completion_input(prompt, formatted), self._keywords(kwargs))

        def gen() -> CompletionResponseGen:
            for event in call.events():
                if isinstance(self._dispatched(event), StopEvent):
                    yield from completion_chunks(call.finish(event))

        return gen()

    @llm_completion_callback()
    async def acomplete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        """Async :meth:`complete`: settings, rendering and decoding never block the event loop."""
        [reply] = await self._caller().arun(self._completion_input(prompt, formatted), self._keywords(kwargs))
        return completion(reply)

    @llm_completion_callback()
    async def astream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseAsyncGen:
        """Async :meth:`stream_complete`."""
        call = await self._caller().astream(self._completion_input(prompt, formatted), self._keywords(kwargs))

        async def gen() -> CompletionResponseAsyncGen:
            async for event in call.aevents():
                if isinstance(self._dispatched(event), StopEvent):
                    for chunk in completion_chunks(call.finish(event)):
                        yield chunk

        return gen()

    # --- chat ----------------------------------------------------------------------------
    @llm_chat_callback()
    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        """Answer the conversation ``messages`` through the model's chat template.

        The messages are rendered as given (as LlamaIndex LLMs do; ``predict`` and the
        query engines add ``system_prompt`` as a system message themselves), their roles
        mapped to ``system`` / ``user`` / ``assistant`` / ``tool`` by
        :func:`mfs_core.call.chat_message`; assistant ``ToolCallBlock`` s and tool
        results go to a template that renders tools in its own format, else as text turns
        (``Tool result (NAME): ...``). With the ``raw`` format the messages are joined by
        ``messages_to_prompt`` instead.

        Args:
            messages: the conversation.
            **kwargs: the call keywords (:class:`mfs_core.call.CallKeywords`): settings, ``method``,
                ``stop``, ``response_format``, and ``tools`` (OpenAI-format function tools) with
                ``tool_choice``, as :meth:`_prepare_chat_with_tools` passes them.

        Returns:
            An assistant message with the chosen reasoning path (with tools: the text
            outside the calls, then one ``ToolCallBlock`` per call of the voted action;
            ``additional_kwargs["tool_calls"]`` in OpenAI format and any
            ``invalid_tool_calls``); ``raw`` and ``additional_kwargs`` as in :meth:`complete`.

        Raises:
            ValueError: a non-text content block, an unknown role, or no text at all.
            ToolsNotSupportedError: tools on a model whose template does not render them.
        """
        [reply] = self._caller().run(self._chat_input(messages), self._keywords(kwargs))
        return chat_response(reply)

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
        return self._chat_stream(self._caller().stream(self._chat_input(messages), self._keywords(kwargs)))

    @llm_chat_callback()
    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        """Async :meth:`chat`: settings, rendering and decoding never block the event loop."""
        [reply] = await self._caller().arun(self._chat_input(messages), self._keywords(kwargs))
        return chat_response(reply)

    @llm_chat_callback()
    async def astream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponseAsyncGen:
        """Async :meth:`stream_chat`: the same responses and events, never blocking the loop."""
        call = await self._caller().astream(self._chat_input(messages), self._keywords(kwargs))

        async def gen() -> ChatResponseAsyncGen:
            reasoning = ReasoningText()
            async for event in call.aevents():
                yield thinking_chunk(reasoning, self._dispatched(event))
                if isinstance(event, StopEvent):
                    for chunk in chat_chunks(call.finish(event), thinking=reasoning.text):
                        yield chunk

        return gen()

