"""``MFSLLM``: Martingale Foresight Sampling as a LlamaIndex ``CustomLLM``.

The class translates LlamaIndex calls into :class:`mfs_core.MFSEngine` requests and the
:class:`mfs_core.DecodeResult` back; it holds no decoding logic. Every entry point is
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

MFS chooses the whole answer before anything is returned, so streaming splits the finished
text into chunks (:func:`mfs_core.adapters.stream_chunks`): each ``CompletionResponse`` has
the cumulative ``text`` and its ``delta``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from typing import Any, Literal, Optional

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
    TextBlock,
)
from llama_index.core.bridge.pydantic import Field, PrivateAttr, SecretStr
from llama_index.core.llms.callbacks import llm_chat_callback, llm_completion_callback
from llama_index.core.llms.custom import CustomLLM

from mfs_core.adapters import (
    apply_stop,
    chat_message,
    engine_for,
    rename_max_tokens,
    result_metadata,
    settings_from_fields,
    stream_chunks,
    timeout_message,
    token_usage,
)
from mfs_core.decoders import get_decoder
from mfs_core.errors import unknown_name_message
from mfs_core.engine import MFSEngine
from mfs_core.settings import MFSSettings
from mfs_core.types import DecodeResult

__all__ = ["MFSLLM"]

logger = logging.getLogger(__name__)

_Render = Callable[[MFSEngine, MFSSettings], str]
"""Turns the call's engine and settings into the rendered model prompt."""

_SETTING_NAMES = tuple(MFSSettings.model_fields)
_PER_CALL_KEYS = (frozenset(_SETTING_NAMES) - {"api_key"}) | {"stop", "max_tokens"}
"""Keywords a call may set: every setting but the secret ``api_key``, ``max_tokens`` and ``stop``."""


def _setting(name: str) -> Any:
    """A ``Field`` mirroring ``MFSSettings.<name>``: None means "not set here"."""
    field = MFSSettings.model_fields[name]
    return Field(
        default=None,
        description=(
            f"{field.description} None: the injected engine's value, else MFS_{name.upper()} "
            f"or the MFSSettings default ({field.default!r})."
        ),
    )


class MFSLLM(CustomLLM):
    """A LlamaIndex LLM that answers with Martingale Foresight Sampling.

    Every :class:`~mfs_core.MFSSettings` field is mirrored as an optional field; a field
    left None takes its value from the injected ``engine``'s settings, else from the
    ``MFS_*`` environment variable or the settings default. LLMs (and LangChain models of
    ``langchain_mfs``) whose backend fields (``backend``, ``model``, ``device``, ``dtype``,
    ``batch_size``) agree share one loaded model and one batching engine.

    Example:
        >>> from llama_index.core import Settings  # doctest: +SKIP
        >>> Settings.llm = MFSLLM(step_beam_size=4, num_rollouts=4)  # doctest: +SKIP
        >>> Settings.llm.complete("Tom has 3 apples. He buys 4 more apples. "
        ...                       "How many apples does Tom have now?").additional_kwargs["answer"]  # doctest: +SKIP
        '7'

    The model is loaded (or the shared one found) when the LLM is built, so ``metadata``
    only reads the loaded model's config. An injected ``engine`` is used when its backend
    fields equal the LLM's (:func:`mfs_core.adapters.engine_for`); its settings then fill
    the fields left None.

    ``system_prompt`` is LlamaIndex's field and ``MFSSettings.system_prompt`` at once:
    :meth:`complete` renders it as the system message of the chat template, ``predict``
    and the query engines add it to the messages they pass to :meth:`chat`.

    Per call, keyword arguments named like a setting (``seed=3``, ``step_beam_size=2``)
    override it for that call only, and ``stop=[...]`` cuts the returned text before the
    first stop sequence; any other keyword raises ``TypeError``.

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

    engine: Optional[MFSEngine] = Field(
        default=None,
        exclude=True,
        repr=False,
        description="Engine to decode with (e.g. shared with a langchain_mfs model); None builds "
        "one with MFSEngine.from_settings, sharing the loaded model of equal backend settings.",
    )
    method: str = Field(default="mfs", description="Registered decoder that answers (mfs_core.decoders.DECODERS).")
    timeout: Optional[float] = Field(
        default=None,
        gt=0,
        description="Most seconds a call waits for its decode (None: no limit); on timeout the call raises "
        "TimeoutError and the engine still finishes the decode. As langchain_mfs's timeout.",
    )

    # --- mirrored MFSSettings fields (None: not set here) ------------------------------
    model: Optional[str] = _setting("model")
    backend: Optional[Literal["transformers", "vllm", "openai"]] = _setting("backend")
    device: Optional[str] = _setting("device")
    dtype: Optional[Literal["auto", "float32", "float16", "bfloat16"]] = _setting("dtype")
    seed: Optional[int] = _setting("seed")
    batch_size: Optional[int] = _setting("batch_size")
    base_urls: Optional[list[str]] = _setting("base_urls")
    api_key: Optional[SecretStr] = Field(
        default=None,
        exclude=True,
        description=f"{MFSSettings.model_fields['api_key'].description} None: the injected engine's value, else "
        "MFS_API_KEY. Excluded from to_dict/to_json (and so from the callbacks' and events' copies).",
    )
    request_timeout: Optional[float] = _setting("request_timeout")
    max_retries: Optional[int] = _setting("max_retries")
    tokenizer: Optional[str] = _setting("tokenizer")
    num_parameters: Optional[int] = _setting("num_parameters")
    tensor_parallel_size: Optional[int] = _setting("tensor_parallel_size")
    gpu_memory_utilization: Optional[float] = _setting("gpu_memory_utilization")
    max_model_len: Optional[int] = _setting("max_model_len")
    enable_prefix_caching: Optional[bool] = _setting("enable_prefix_caching")
    vllm_kwargs: Optional[dict[str, Any]] = _setting("vllm_kwargs")
    prompt_format: Optional[Literal["auto", "chat", "raw"]] = _setting("prompt_format")
    assistant_prefix: Optional[str] = _setting("assistant_prefix")
    system_prompt: Optional[str] = _setting("system_prompt")
    step_delimiter: Optional[str] = _setting("step_delimiter")
    end_marker: Optional[str] = _setting("end_marker")
    max_step_tokens: Optional[int] = _setting("max_step_tokens")
    max_answer_tokens: Optional[int] = _setting("max_answer_tokens")
    step_beam_size: Optional[int] = _setting("step_beam_size")
    num_rollouts: Optional[int] = _setting("num_rollouts")
    foresight_rollouts: Optional[int] = _setting("foresight_rollouts")
    prune_lambda: Optional[float] = _setting("prune_lambda")
    temperature: Optional[float] = _setting("temperature")
    top_p: Optional[float] = _setting("top_p")
    stop_epsilon: Optional[float] = _setting("stop_epsilon")
    max_steps: Optional[int] = _setting("max_steps")
    min_steps: Optional[int] = _setting("min_steps")
    selection_temperature: Optional[float] = _setting("selection_temperature")
    selection: Optional[Literal["sample", "top_k"]] = _setting("selection")
    baseline: Optional[Literal["parent_foresight", "parent_step"]] = _setting("baseline")
    aggregation: Optional[Literal["majority", "best_quality"]] = _setting("aggregation")
    max_finished_fraction: Optional[float] = _setting("max_finished_fraction")
    width_pruning: Optional[bool] = _setting("width_pruning")
    early_stopping: Optional[bool] = _setting("early_stopping")

    _base: MFSSettings = PrivateAttr()
    _has_chat_template: bool = PrivateAttr(default=False)

    def __init__(self, **data: Any) -> None:
        """Build from keyword fields (see the class attributes).

        ``max_tokens``, the frameworks' standard name, sets ``max_answer_tokens`` (as in
        ``langchain_mfs``).

        Raises:
            TypeError: an unknown argument (one line naming it and the closest valid name).
            ValueError: ``max_tokens`` and ``max_answer_tokens`` both given and different.
            pydantic.ValidationError: a value out of range.
        """
        fields = type(self).model_fields
        valid = set(fields) | {"max_tokens"} | {field.alias for field in fields.values() if field.alias}
        unknown = [name for name in data if name not in valid]
        if unknown:
            raise TypeError(unknown_name_message(type(self).__name__, unknown, valid))
        super().__init__(**rename_max_tokens(data))

    def model_post_init(self, context: Any, /) -> None:
        """Resolve the settings and pick the engine; loads the model unless already loaded."""
        super().model_post_init(context)
        get_decoder(self.method)
        base = self.engine.settings if self.engine is not None else MFSSettings()
        self.engine = engine_for(settings_from_fields(self._field_values(), base=base), self.engine)
        self._base = base
        probe = [{"role": "user", "content": "?"}]
        self._has_chat_template = self.engine.backend.apply_chat_template(probe) is not None

    @classmethod
    def class_name(cls) -> str:
        """Name under which LlamaIndex serialises this component."""
        return "MFSLLM"

    # --- settings ------------------------------------------------------------------------
    def _field_values(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in _SETTING_NAMES}

    def _resolved(self, name: str) -> Any:
        """One setting's value without building settings (no environment read)."""
        value = getattr(self, name)
        return value if value is not None else getattr(self._base, name)

    @property
    def settings(self) -> MFSSettings:
        """The settings a call without overrides decodes with."""
        return settings_from_fields(self._field_values(), base=self._base)

    def _submit(self, render: _Render, kwargs: dict[str, Any]) -> tuple[Future, list[str] | None]:
        """Start the decode of one call; its future and stop sequences.

        Settings are the fields plus the per-call overrides in ``kwargs``; ``render`` turns
        them (and the engine) into the model prompt.

        Raises:
            TypeError: a keyword that is neither a setting nor ``stop``; ``stop`` not a list
                of strings; a prompt that is not a string.
            ValueError: an empty prompt, a non-text message or an unknown role.
            pydantic.ValidationError: an override out of range.
        """
        unknown = sorted(set(kwargs) - _PER_CALL_KEYS)
        if unknown:
            msg = f"MFSLLM got unexpected keyword arguments {unknown}; pass settings (e.g. seed=1) or stop=[...]"
            raise TypeError(msg)
        stop = kwargs.get("stop")
        apply_stop("", stop)  # a bad stop (a bare string, a non-string) fails before the decode
        overrides = rename_max_tokens({name: value for name, value in kwargs.items() if name != "stop"})
        settings = settings_from_fields({**self._field_values(), **overrides}, base=self._base)
        engine = engine_for(settings, self.engine)
        rendered = render(engine, settings)
        logger.debug("decoding with %s: M=%d N=%d seed=%d", self.method, settings.step_beam_size,
                     settings.num_rollouts, settings.seed)
        return engine.submit_prompts([rendered], settings=settings, method=self.method)[0], stop

    def _wait(self, future: Future) -> DecodeResult:
        """The decode's result, waiting at most ``timeout`` seconds.

        Raises:
            TimeoutError: not done within ``timeout`` seconds (the engine still finishes it).
        """
        try:
            return future.result(timeout=self.timeout)
        except concurrent.futures.TimeoutError as exc:
            raise TimeoutError(timeout_message(1, self.timeout)) from exc

    async def _await(self, future: Future) -> DecodeResult:
        """Async :meth:`_wait`: never blocks the event loop; a timeout does not cancel the decode."""
        try:
            return await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(future)), self.timeout)
        except asyncio.TimeoutError as exc:
            raise TimeoutError(timeout_message(1, self.timeout)) from exc

    async def _asubmit(self, render: _Render, kwargs: dict[str, Any]) -> tuple[Future, list[str] | None]:
        """:meth:`_submit` in a worker thread: settings, rendering (and a model load) off the loop."""
        return await asyncio.to_thread(self._submit, render, kwargs)

    def _uses_chat_template(self, prompt_format: str) -> bool:
        return prompt_format == "chat" or (prompt_format == "auto" and self._has_chat_template)

    @property
    def metadata(self) -> LLMMetadata:
        """Context window and name of the loaded model, ``num_output = max_answer_tokens``.

        ``is_chat_model`` is True when the prompt format resolves to the chat template.
        Reads only the already-loaded model's config (no I/O).
        """
        backend = self.engine.backend
        return LLMMetadata(
            context_window=backend.context_window,
            num_output=self._resolved("max_answer_tokens"),
            is_chat_model=self._uses_chat_template(self._resolved("prompt_format")),
            is_function_calling_model=False,
            model_name=backend.model_name,
        )

    # --- prompts -------------------------------------------------------------------------
    def _completion_prompt(self, prompt: str, formatted: bool) -> _Render:
        """Renders ``prompt`` (after ``completion_to_prompt`` unless ``formatted``) by the prompt format."""
        text = prompt if formatted else self.completion_to_prompt(prompt)
        return lambda engine, settings: engine.render(text, settings)

    def _chat_prompt(self, messages: Sequence[ChatMessage]) -> _Render:
        """Renders ``messages`` with the chat template, or ``messages_to_prompt`` in raw format."""

        def render(engine: MFSEngine, settings: MFSSettings) -> str:
            if not self._uses_chat_template(settings.prompt_format):
                return engine.render(self.messages_to_prompt(messages), settings)
            dicts = [
                chat_message(message.role.value, _message_text(i, message), name=message.additional_kwargs.get("name"))
                for i, message in enumerate(messages)
            ]
            return engine.render_messages(dicts, settings)

        return render

    # --- responses -----------------------------------------------------------------------
    @staticmethod
    def _completion(result: DecodeResult, stop: list[str] | None) -> CompletionResponse:
        """The whole answer: text cut at ``stop``, usage and the decode in ``raw``, metadata."""
        raw = {"usage": token_usage(result), "result": result}
        return CompletionResponse(text=apply_stop(result.text, stop), raw=raw, additional_kwargs=result_metadata(result))

    @classmethod
    def _completion_chunks(cls, result: DecodeResult, stop: list[str] | None) -> Iterator[CompletionResponse]:
        """The answer as cumulative chunks with their ``delta`` (at least one, maybe empty)."""
        whole = cls._completion(result, stop)
        cumulative = ""
        for piece in list(stream_chunks(whole.text)) or [""]:
            cumulative += piece
            update = {"text": cumulative, "delta": piece, "additional_kwargs": dict(whole.additional_kwargs)}
            yield whole.model_copy(update=update)

    @staticmethod
    def _as_chat(response: CompletionResponse) -> ChatResponse:
        return ChatResponse(
            message=ChatMessage(role=MessageRole.ASSISTANT, content=response.text),
            delta=response.delta,
            raw=response.raw,
            additional_kwargs=response.additional_kwargs,
        )

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
        future, stop = self._submit(self._completion_prompt(prompt, formatted), kwargs)
        return self._completion(self._wait(future), stop)

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        """:meth:`complete`, streamed: chunks with cumulative ``text`` and their ``delta``.

        The decode starts at the call; the generator waits for it, then yields the chunks.
        Every chunk carries the same ``raw`` and ``additional_kwargs``.
        """
        future, stop = self._submit(self._completion_prompt(prompt, formatted), kwargs)

        def gen() -> CompletionResponseGen:
            yield from self._completion_chunks(self._wait(future), stop)

        return gen()

    @llm_completion_callback()
    async def acomplete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        """Async :meth:`complete`: settings, rendering and decoding never block the event loop."""
        future, stop = await self._asubmit(self._completion_prompt(prompt, formatted), kwargs)
        return self._completion(await self._await(future), stop)

    @llm_completion_callback()
    async def astream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseAsyncGen:
        """Async :meth:`stream_complete`."""
        future, stop = await self._asubmit(self._completion_prompt(prompt, formatted), kwargs)

        async def gen() -> CompletionResponseAsyncGen:
            result = await self._await(future)
            for chunk in self._completion_chunks(result, stop):
                yield chunk

        return gen()

    # --- chat ----------------------------------------------------------------------------
    @llm_chat_callback()
    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        """Answer the conversation ``messages`` through the model's chat template.

        The messages are rendered as given (as LlamaIndex LLMs do; ``predict`` and the
        query engines add ``system_prompt`` as a system message themselves), their roles
        mapped to ``system`` / ``user`` / ``assistant`` by
        :func:`mfs_core.adapters.chat_message` (a tool result becomes a user turn). With the
        ``raw`` format the messages are joined by ``messages_to_prompt`` instead.

        Returns:
            An assistant message with the chosen reasoning path; ``raw`` and
            ``additional_kwargs`` as in :meth:`complete`.

        Raises:
            ValueError: a non-text content block, an unknown role, or no text at all.
        """
        future, stop = self._submit(self._chat_prompt(messages), kwargs)
        return self._as_chat(self._completion(self._wait(future), stop))

    @llm_chat_callback()
    def stream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponseGen:
        """:meth:`chat`, streamed: messages with the cumulative content and their ``delta``."""
        future, stop = self._submit(self._chat_prompt(messages), kwargs)

        def gen() -> ChatResponseGen:
            for chunk in self._completion_chunks(self._wait(future), stop):
                yield self._as_chat(chunk)

        return gen()

    @llm_chat_callback()
    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        """Async :meth:`chat`: settings, rendering and decoding never block the event loop."""
        future, stop = await self._asubmit(self._chat_prompt(messages), kwargs)
        return self._as_chat(self._completion(await self._await(future), stop))

    @llm_chat_callback()
    async def astream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponseAsyncGen:
        """Async :meth:`stream_chat`."""
        future, stop = await self._asubmit(self._chat_prompt(messages), kwargs)

        async def gen() -> ChatResponseAsyncGen:
            result = await self._await(future)
            for chunk in self._completion_chunks(result, stop):
                yield self._as_chat(chunk)

        return gen()


def _message_text(index: int, message: ChatMessage) -> str:
    """The text of a chat message.

    Raises:
        ValueError: the message holds a non-text block (an image, audio, a tool call).
    """
    for block in message.blocks:
        if not isinstance(block, TextBlock):
            msg = f"MFSLLM takes text only; message {index} ({message.role.value}) holds a {block.block_type!r} block"
            raise ValueError(msg)
    return message.content or ""
