"""``ChatMFS``: Martingale Foresight Sampling as a LangChain chat model."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from operator import itemgetter
from typing import Any, Literal

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, ChatMessage, FunctionMessage, ToolMessage
from langchain_core.messages.ai import UsageMetadata
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda, RunnableMap, RunnablePassthrough
from pydantic import ConfigDict

from langchain_mfs._base import MFSParams, astream_with_run, stream_with_run
from langchain_mfs._structured import (
    call_tool_kwargs,
    json_schema_of,
    message_tool_fields,
    parse_json_output,
    parse_tool_output,
    tool_call_chunks,
    tools_to_openai,
)
from mfs_core.call import ChatInput, Reply, chat_message, prepare_call
from mfs_core.events import StopEvent
from mfs_core.streaming import ReasoningText
from mfs_core.tools.plan import plan_call

__all__ = ["ChatMFS", "to_chat_dicts"]

# Content blocks that describe the assistant's own actions rather than text to read: an AI
# message's tool calls are rendered from ``message.tool_calls``, its reasoning is skipped.
_ACTION_BLOCKS = frozenset(
    {"reasoning", "thinking", "tool_call", "tool_call_chunk", "invalid_tool_call", "tool_use",
     "server_tool_call", "server_tool_call_chunk", "server_tool_result"}
)


class ChatMFS(MFSParams, BaseChatModel):
    """Martingale Foresight Sampling (EACL 2026) as a LangChain chat model.

    The messages are rendered with the model's chat template (roles ``system``, ``user``,
    ``assistant``), followed by ``assistant_prefix``; MFS then searches for the answer
    (see :class:`~langchain_mfs.MFSLLM`) and returns it as an ``AIMessage`` with
    ``usage_metadata`` (input, output, total tokens over every generation request of the
    search) and ``response_metadata`` holding ``model_name`` and the MFS result: ``answer``,
    ``vote_share``, ``stop_reason``, ``num_steps``, ``flops``, ``trace``.

    Rendering: text content (a string, or ``text`` blocks) is used, an AI message's reasoning
    blocks are dropped; image, audio and file content raise ``ValueError``. With a chat
    template that renders tools, an AI message's tool calls and a ``ToolMessage`` go to the
    template in the Hugging Face tool format; with one that does not (the first demo
    model's), the calls are written as ``Called tool NAME with {json args}`` lines and a tool
    result becomes a user turn ``Tool result (NAME): ...``.

    **Tools and structured output:** :meth:`bind_tools` (or ``invoke(..., tools=[...])``)
    renders the tools through the chat template and makes the final vote run over actions
    (tool name + canonical JSON arguments, or the final answer), so the message's
    ``tool_calls`` are the action most foresight paths agree on; the vote is in
    ``generation_info["votes"]``. :meth:`with_structured_output` supports
    ``function_calling``, ``json_schema`` and ``json_mode``. A model whose template does not
    render tools raises ``ToolsNotSupportedError`` in :meth:`bind_tools` (use
    ``MFSReasoningTool`` with such a model).

    **Streaming:** ``stream``/``astream`` show the search while it runs: after each step a
    chunk with a ``reasoning`` content block (``additional_kwargs["reasoning_content"]``:
    a summary line of the step and the reasoning every live beam now shares), and the
    custom callback events ``mfs_step`` / ``mfs_stop`` (see ``astream_events``). The answer
    itself is chosen by the vote at the end, so its text follows the search in chunks, the
    last marked ``chunk_position="last"`` and carrying the usage and metadata.

    Tool calls (Hermes format) and JSON structured output are sampled under a grammar built
    from their JSON schema (``constrain_actions``, default on; :mod:`mfs_core.grammar`),
    so they parse and validate by construction. Not supported: multimodal input.
    Concurrent calls (``batch``, ``abatch``, many ``ainvoke``) are decoded together by the
    engine, and async calls never block the event loop.

    Example:
        .. code-block:: python

            from langchain_mfs import ChatMFS

            chat = ChatMFS(step_beam_size=4, num_rollouts=4)
            message = chat.invoke([("human", "Tom has 3 apples. He buys 4 more. How many now?")])
            message.response_metadata["answer"], message.usage_metadata["total_tokens"]
    """

    model_config = ConfigDict(extra="forbid", protected_namespaces=(), arbitrary_types_allowed=True)

    streaming: bool = False
    """If True, ``invoke`` goes through the streaming path (``on_llm_new_token`` fires per chunk)."""

    @property
    def _llm_type(self) -> str:
        return "mfs-chat"

    def get_num_tokens_from_messages(self, messages: list[BaseMessage], tools: Sequence[Any] | None = None) -> int:
        """Tokens of the prompt ``messages`` (and ``tools``) render to (chat template + assistant prefix).

        Raises:
            ToolsNotSupportedError: ``tools`` given but the model's template does not render tools.
            ValueError: a message holds content the template cannot render.
        """
        engine, settings = self.engine, self.settings
        prompt = prepare_call(engine, settings, to_chat_dicts(messages), tools=tools_to_openai(tools) if tools else None).prompt
        if self.custom_get_token_ids is not None:
            return len(self.custom_get_token_ids(prompt))
        return engine.backend.count_tokens(prompt)

    # --- tools and structured output ---------------------------------------------------
    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | Any],
        *,
        tool_choice: str | bool | dict[str, Any] | None = None,
        strict: bool | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Bind tools: they are rendered by the model's chat template and the vote runs over actions.

        Each tool (a function, a pydantic model, a TypedDict, a ``BaseTool`` or an OpenAI
        tool dict) is converted by ``convert_to_openai_tool`` and given to the template as
        ``apply_chat_template(..., tools=...)``. MFS searches the reasoning steps as for any
        question; the final vote groups the completed paths by their *action* (tool name +
        canonical JSON arguments, or the final answer; :class:`mfs_core.tools.ActionVote`),
        so the message carries the action most foresight paths agree on. The calls of the
        chosen path are parsed by ``tool_call_parser`` into ``AIMessage.tool_calls``; a
        malformed call becomes an ``invalid_tool_calls`` entry.

        ``tool_choice`` (what is enforced):

        * None / ``"auto"``: the model decides between calling a tool and answering.
        * ``"none"`` / False: the tools are not rendered and nothing is parsed.
        * ``"any"`` / ``"required"`` / True: only paths that call a tool vote; with the
          Hermes call format (the demo model, Qwen) the prompt ends with the opening of a
          call, ``<tool_call>\n{"name": "``, so every sampled path calls one
          (:meth:`mfs_core.tools.ToolRequest.forced_opening`), and the call is written
          under its tools' grammar (``constrain_actions``); with other formats sampling
          is not constrained and a message may come back without a call.
        * a tool name, ``{"type": "function", "function": {"name": ...}}``: only that tool is
          rendered and only paths calling it vote; with the Hermes format the prompt opens
          the call to it up to its arguments; a call to another tool in the chosen
          completion becomes an invalid call.

        ``strict`` goes to ``convert_to_openai_tool``; ``parallel_tool_calls`` is accepted
        and not enforced (a completion may write several calls).

        Raises:
            ToolsNotSupportedError (a ``NotImplementedError``): the model's chat template does
                not render tools; raised here, so ``create_agent`` fails when the agent is
                built. The message says to use ``MFSReasoningTool`` instead.
            ValueError: a tool that cannot be converted, repeated names, a bad ``tool_choice``.
        """
        formatted = tools_to_openai(tools, strict=strict)
        plan_call(self.engine.backend, self.settings, tools=formatted, tool_choice=tool_choice)  # fails here, not at the call
        return super().bind(tools=formatted, tool_choice=tool_choice, **kwargs)

    def with_structured_output(
        self,
        schema: dict[str, Any] | type | None = None,
        *,
        method: Literal["function_calling", "json_schema", "json_mode"] = "function_calling",
        include_raw: bool = False,
        strict: bool | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, dict[str, Any] | Any]:
        """A runnable whose output is validated against ``schema`` (pydantic, TypedDict or JSON schema).

        Methods:

        * ``"function_calling"`` (default): ``schema`` is bound as the only tool with
          ``tool_choice`` forcing it (:meth:`bind_tools`; needs a template that renders
          tools); the call's arguments are the output.
        * ``"json_schema"``: a system instruction asks for one JSON object matching the
          schema; MFS votes over the canonical JSON of each path's last object; the chosen
          completion's object is the output. Works on any chat template; with
          ``constrain_actions`` (default) the whole completion is sampled as one object
          under the schema's grammar on every backend.
        * ``"json_mode"``: as ``"json_schema"`` with a plain "answer with a JSON object"
          instruction; validated against ``schema`` when one is given.

        The output is a pydantic instance for a pydantic ``schema``, else a dict, validated
        (pydantic, or ``jsonschema`` for TypedDict and JSON schemas). With ``include_raw``
        the output is ``{"raw": AIMessage, "parsed": ... or None, "parsing_error": ... or None}``
        and a parsing error is returned rather than raised.

        Raises:
            ValueError: an unknown ``method``, no ``schema`` for a method that needs one,
                or unsupported keyword arguments.
            ToolsNotSupportedError: ``"function_calling"`` on a model whose template does
                not render tools (use ``method="json_schema"``).
            OutputParserException: at invoke, when the output is not valid (without
                ``include_raw``).
        """
        if kwargs:
            msg = f"with_structured_output got unsupported arguments {sorted(kwargs)}"
            raise ValueError(msg)
        if schema is None and method != "json_mode":
            msg = f"method={method!r} needs a schema; only 'json_mode' works without one"
            raise ValueError(msg)
        ls_format = {"kwargs": {"method": method, "strict": strict}, "schema": schema}
        if method == "function_calling":
            tool = tools_to_openai([schema], strict=strict)[0]
            name = tool["function"]["name"]
            llm = self.bind_tools([tool], tool_choice=name, ls_structured_output_format=ls_format)
            parse: Callable[[BaseMessage], Any] = lambda message: parse_tool_output(message, schema, name)  # noqa: E731
        elif method in ("json_schema", "json_mode"):
            json_schema = json_schema_of(schema) if schema is not None else None
            llm = self.bind(response_format={"type": method, "schema": json_schema}, ls_structured_output_format=ls_format)
            parse = lambda message: parse_json_output(message, schema)  # noqa: E731
        else:
            msg = f"method must be 'function_calling', 'json_schema' or 'json_mode', got {method!r}"
            raise ValueError(msg)
        parser = RunnableLambda(parse, name="mfs_structured_output")
        if not include_raw:
            return llm | parser
        parsed = RunnablePassthrough.assign(parsed=itemgetter("raw") | parser, parsing_error=lambda _: None)
        fallback = RunnablePassthrough.assign(parsed=lambda _: None)
        return RunnableMap(raw=llm) | parsed.with_fallbacks([fallback], exception_key="parsing_error")

    def _call_kwargs(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """The call keywords of LangChain's ``kwargs``, tools converted (:func:`~langchain_mfs._structured.call_tool_kwargs`)."""
        return call_tool_kwargs(super()._call_kwargs(kwargs))

    # --- streaming entry points ---------------------------------------------------------
    def stream(
        self, input: LanguageModelInput, config: RunnableConfig | None = None, *, stop: list[str] | None = None, **kwargs: Any
    ) -> Iterator[AIMessageChunk]:
        """LangChain's ``stream``; the run id is fixed first so the custom events ``mfs_step``
        and ``mfs_stop`` attach to this run (``BaseChatModel`` gives ``_stream`` no run manager)."""
        return stream_with_run(lambda run: super(ChatMFS, self).stream(input, run, stop=stop, **kwargs), config)

    def astream(
        self, input: LanguageModelInput, config: RunnableConfig | None = None, *, stop: list[str] | None = None, **kwargs: Any
    ) -> AsyncIterator[AIMessageChunk]:
        """Async :meth:`stream` (``astream_events`` yields the custom events as ``on_custom_event``)."""
        return astream_with_run(lambda run: super(ChatMFS, self).astream(input, run, stop=stop, **kwargs), config)

    # --- LangChain hooks ---------------------------------------------------------------
    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        """Answer the conversation with MFS.

        Args:
            messages: the conversation; at least one message must hold text.
            stop: stop sequences of this call, applied with the instance's ``stop``.
            run_manager: LangChain's callback manager (unused: nothing streams here).
            **kwargs: per-call settings (``step_beam_size=4``, ``model=...``, ``method``),
                ``tools`` / ``tool_choice`` (as :meth:`bind_tools` binds them) and
                ``response_format`` (as :meth:`with_structured_output` binds it).

        Returns:
            One ``AIMessage`` generation, with usage, MFS metadata and any tool calls.

        Raises:
            ValueError: a message holds non-text content, an unknown role, or no message
                holds text; an unknown keyword (TypeError) or a bad setting.
            ToolsNotSupportedError: ``tools`` on a model whose template does not render them.
            TimeoutError: not done within ``timeout`` seconds.
        """
        [reply] = self._caller().run(ChatInput(to_chat_dicts(messages)), self._keywords(kwargs, stop))
        return _chat_result(reply)

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        """Async :meth:`_generate`: awaits the engine without blocking the event loop."""
        [reply] = await self._caller().arun(ChatInput(to_chat_dicts(messages)), self._keywords(kwargs, stop))
        return _chat_result(reply)

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        """Yield the search as reasoning while it runs, then the chosen text in chunks.

        Per finished step (and at the stop) a chunk with empty ``content`` and the new
        reasoning text in ``additional_kwargs["reasoning_content"]``, which LangChain reads
        as a ``reasoning`` content block (``chunk.content_blocks``; in ``content`` itself
        with ``output_version="v1"``), and the custom callback event ``mfs_step`` /
        ``mfs_stop`` (``astream_events`` yields them as ``on_custom_event``). Then the
        answer text; the last chunk has ``chunk_position="last"``, the usage, metadata and the
        tool calls as ``tool_call_chunks``.
        """
        call = self._caller().stream(ChatInput(to_chat_dicts(messages)), self._keywords(kwargs, stop))
        reasoning = ReasoningText()
        for event in self._events(call, run_manager):
            chunk = _reasoning_chunk(reasoning.delta(event))
            if run_manager:
                run_manager.on_llm_new_token("", chunk=chunk)
            yield chunk
            if isinstance(event, StopEvent):
                for chunk in _answer_chunks(call.finish(event)):
                    if run_manager:
                        run_manager.on_llm_new_token(chunk.text, chunk=chunk)
                    yield chunk

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        """Async :meth:`_stream`: never blocks the event loop; the same chunks and events."""
        call = await self._caller().astream(ChatInput(to_chat_dicts(messages)), self._keywords(kwargs, stop))
        reasoning = ReasoningText()
        async for event in self._aevents(call, run_manager):
            chunk = _reasoning_chunk(reasoning.delta(event))
            if run_manager:
                await run_manager.on_llm_new_token("", chunk=chunk)
            yield chunk
            if isinstance(event, StopEvent):
                for chunk in _answer_chunks(call.finish(event)):
                    if run_manager:
                        await run_manager.on_llm_new_token(chunk.text, chunk=chunk)
                    yield chunk



def _response_metadata(reply: Reply) -> dict[str, Any]:
    return {"model_name": reply.model_name, "finish_reason": reply.finish_reason}


def _chat_result(reply: Reply) -> ChatResult:
    """The ``ChatResult`` of a finished call: one ``AIMessage`` with usage, metadata and tool calls."""
    message = AIMessage(
        content=reply.text,
        usage_metadata=_usage_metadata(reply),
        response_metadata=_response_metadata(reply),
        **message_tool_fields(reply.parsed),
    )
    generation = ChatGeneration(message=message, generation_info=reply.metadata)
    return ChatResult(generations=[generation], llm_output={"token_usage": reply.usage, "model_name": reply.model_name})


def _answer_chunks(reply: Reply) -> Iterator[ChatGenerationChunk]:
    """The answer streamed: its text in chunks, the last one with usage, metadata and the tool calls."""
    pieces = reply.chunks()
    for piece in pieces[:-1]:
        yield ChatGenerationChunk(message=AIMessageChunk(content=piece))
    last = AIMessageChunk(
        content=pieces[-1],
        usage_metadata=_usage_metadata(reply),
        response_metadata=_response_metadata(reply),
        tool_call_chunks=tool_call_chunks(reply.parsed),
        chunk_position="last",
    )
    yield ChatGenerationChunk(message=last, generation_info=reply.metadata)


def _reasoning_chunk(text: str) -> ChatGenerationChunk:
    """A chunk that carries only reasoning text (``reasoning_content``, as Ollama and DeepSeek do)."""
    return ChatGenerationChunk(message=AIMessageChunk(content="", additional_kwargs={"reasoning_content": text}))


def _usage_metadata(reply: Reply) -> UsageMetadata:
    usage = reply.usage
    return UsageMetadata(
        input_tokens=usage["prompt_tokens"], output_tokens=usage["completion_tokens"], total_tokens=usage["total_tokens"]
    )


def to_chat_dicts(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    """LangChain messages as the neutral chat dicts of :func:`mfs_core.prompts.render_messages`.

    Roles by message type (human, ai, system, tool, function; a ``ChatMessage``'s own role)
    through :func:`mfs_core.call.chat_message`; an ``AIMessage``'s ``tool_calls`` travel
    as ``tool_calls`` (``name``, ``arguments``, ``id``), a ``ToolMessage``'s ``tool_call_id``
    and ``name`` with it. Whether they reach the template natively or as text turns is
    decided when rendering (:func:`mfs_core.tools.rendering.template_messages`).

    Raises:
        ValueError: message i holds a content block that is not text (the message names i
            and the block type), or has an unknown role.
    """
    dicts = []
    for i, message in enumerate(messages):
        role = message.role if isinstance(message, ChatMessage) else message.type
        text = _text(message, i)
        if isinstance(message, AIMessage):
            calls = [{"name": c["name"], "arguments": c["args"], "id": c.get("id")} for c in message.tool_calls]
            dicts.append(chat_message(role, text, tool_calls=calls))
        elif isinstance(message, ToolMessage):
            dicts.append(chat_message(role, text, name=message.name, tool_call_id=message.tool_call_id))
        elif isinstance(message, FunctionMessage):
            dicts.append(chat_message(role, text, name=message.name))
        else:
            dicts.append(chat_message(role, text))
    return dicts


def _text(message: BaseMessage, index: int) -> str:
    """The text of ``message``'s content: the string, or its text blocks joined."""
    content = message.content
    if isinstance(content, str):
        return content
    parts = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
            continue
        kind = block.get("type") if isinstance(block, dict) else type(block).__name__
        if kind == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif kind in _ACTION_BLOCKS and isinstance(message, AIMessage):
            continue
        else:
            msg = (
                f"ChatMFS renders text only: message {index} ({message.type}) holds a {kind!r} content block; "
                "give the model text (images, audio and files are not supported)"
            )
            raise ValueError(msg)
    return "".join(parts)
