"""``ChatMFS``: Martingale Foresight Sampling as a LangChain chat model."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, ChatMessage
from langchain_core.messages.ai import UsageMetadata
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import RunnableConfig
from pydantic import ConfigDict

from langchain_mfs._base import MFSParams, astream_with_run, stream_with_run
from mfs_core.adapters import apply_stop, chat_message, result_metadata, stream_chunks, token_usage
from mfs_core.engine import MFSEngine
from mfs_core.events import StopEvent
from mfs_core.settings import MFSSettings
from mfs_core.streaming import ReasoningText
from mfs_core.types import DecodeResult

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

    Rendering: text content (a string, or ``text`` blocks) is used; an AI message's tool
    calls are written as ``Called tool NAME with {json args}`` lines and its reasoning blocks
    are dropped; a ``ToolMessage`` becomes a user turn ``Tool result (NAME): ...`` (MFS
    models' templates have no tool role); image, audio and file content raise ``ValueError``.

    **Streaming:** ``stream``/``astream`` show the search while it runs: after each step a
    chunk with a ``reasoning`` content block (``additional_kwargs["reasoning_content"]``:
    a summary line of the step and the reasoning every live beam now shares), and the
    custom callback events ``mfs_step`` / ``mfs_stop`` (see ``astream_events``). The answer
    itself is chosen by the vote at the end, so its text follows the search in chunks, the
    last marked ``chunk_position="last"`` and carrying the usage and metadata.

    Not supported: tool calling (``bind_tools``), structured output, multimodal input.
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
        """Tokens of the prompt ``messages`` render to (chat template + assistant prefix).

        Raises:
            NotImplementedError: ``tools`` given (ChatMFS has no tool calling).
            ValueError: a message holds content the template cannot render.
        """
        if tools:
            msg = "ChatMFS does not support tool calling, so tools cannot be counted"
            raise NotImplementedError(msg)
        prompt = self.engine.render_messages(to_chat_dicts(messages), self.settings)
        if self.custom_get_token_ids is not None:
            return len(self.custom_get_token_ids(prompt))
        return self.engine.backend.count_tokens(prompt)

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
            **kwargs: per-call settings (``step_beam_size=4``, ``model=...``, ``method``).

        Returns:
            One ``AIMessage`` generation, with usage and MFS metadata.

        Raises:
            ValueError: a message holds non-text content, an unknown role, or no message
                holds text; an unknown keyword (TypeError) or a bad setting.
            TimeoutError: not done within ``timeout`` seconds.
        """
        results, model_name = self._decode(lambda engine, settings: _render(engine, settings, messages), kwargs)
        return self._chat_result(results[0], stop, model_name)

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        """Async :meth:`_generate`: awaits the engine without blocking the event loop."""
        results, model_name = await self._adecode(lambda engine, settings: _render(engine, settings, messages), kwargs)
        return self._chat_result(results[0], stop, model_name)

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
        answer text; the last chunk has ``chunk_position="last"``, the usage and metadata.
        """
        stream, model_name = self._open_stream(lambda engine, settings: _render(engine, settings, messages), kwargs)
        reasoning = ReasoningText()
        for event in self._events(stream, run_manager):
            chunk = _reasoning_chunk(reasoning.delta(event))
            if run_manager:
                run_manager.on_llm_new_token("", chunk=chunk)
            yield chunk
            if isinstance(event, StopEvent):
                for chunk in self._chunks(event.result, stop, model_name):
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
        stream, model_name = await self._aopen_stream(
            lambda engine, settings: _render(engine, settings, messages), kwargs
        )
        reasoning = ReasoningText()
        async for event in self._aevents(stream, run_manager):
            chunk = _reasoning_chunk(reasoning.delta(event))
            if run_manager:
                await run_manager.on_llm_new_token("", chunk=chunk)
            yield chunk
            if isinstance(event, StopEvent):
                for chunk in self._chunks(event.result, stop, model_name):
                    if run_manager:
                        await run_manager.on_llm_new_token(chunk.text, chunk=chunk)
                    yield chunk

    # --- results -----------------------------------------------------------------------
    def _chat_result(self, result: DecodeResult, stop: list[str] | None, model_name: str) -> ChatResult:
        message = AIMessage(
            content=apply_stop(result.text, self._stops(stop)),
            usage_metadata=_usage_metadata(result),
            response_metadata={"model_name": model_name},
        )
        generation = ChatGeneration(message=message, generation_info=result_metadata(result))
        return ChatResult(
            generations=[generation], llm_output={"token_usage": token_usage(result), "model_name": model_name}
        )

    def _chunks(self, result: DecodeResult, stop: list[str] | None, model_name: str) -> Iterator[ChatGenerationChunk]:
        pieces = list(stream_chunks(apply_stop(result.text, self._stops(stop)))) or [""]
        for piece in pieces[:-1]:
            yield ChatGenerationChunk(message=AIMessageChunk(content=piece))
        last = AIMessageChunk(
            content=pieces[-1],
            usage_metadata=_usage_metadata(result),
            response_metadata={"model_name": model_name},
            chunk_position="last",
        )
        yield ChatGenerationChunk(message=last, generation_info=result_metadata(result))


def _reasoning_chunk(text: str) -> ChatGenerationChunk:
    """A chunk that carries only reasoning text (``reasoning_content``, as Ollama and DeepSeek do)."""
    return ChatGenerationChunk(message=AIMessageChunk(content="", additional_kwargs={"reasoning_content": text}))


def _usage_metadata(result: DecodeResult) -> UsageMetadata:
    usage = token_usage(result)
    return UsageMetadata(
        input_tokens=usage["prompt_tokens"], output_tokens=usage["completion_tokens"], total_tokens=usage["total_tokens"]
    )


def _render(engine: MFSEngine, settings: MFSSettings, messages: Sequence[BaseMessage]) -> list[str]:
    return [engine.render_messages(to_chat_dicts(messages), settings)]


def to_chat_dicts(messages: Sequence[BaseMessage]) -> list[dict[str, str]]:
    """LangChain messages as the ``{"role", "content"}`` dicts of the model's chat template.

    Roles by message type (human, ai, system, tool, function; a ``ChatMessage``'s own role)
    through :func:`mfs_core.adapters.chat_message`.

    Raises:
        ValueError: message i holds a content block that is not text (the message names i
            and the block type), or has an unknown role.
    """
    dicts = []
    for i, message in enumerate(messages):
        role = message.role if isinstance(message, ChatMessage) else message.type
        text = _text(message, i)
        if isinstance(message, AIMessage):
            calls = [f"Called tool {call['name']} with {json.dumps(call['args'], sort_keys=True)}" for call in message.tool_calls]
            text = "\n".join(part for part in [text, *calls] if part)
        dicts.append(chat_message(role, text, name=message.name))
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
