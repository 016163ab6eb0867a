"""What :class:`~langchain_mfs.MFSLLM` and :class:`~langchain_mfs.ChatMFS` share.

Every :class:`~mfs_core.settings.MFSSettings` field as a LangChain field, resolved once at
construction (keyword arguments, then ``MFS_*`` environment variables, then the defaults,
or the injected engine's settings), the engine that decodes them, per-call overrides and the
wait for the engine's futures. No decoding logic: that is :class:`~mfs_core.MFSEngine`'s.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextvars import ContextVar
from typing import Any, Literal, TypeVar

from langchain_core.callbacks import (
    AsyncCallbackManager,
    AsyncCallbackManagerForLLMRun,
    CallbackManager,
    CallbackManagerForLLMRun,
    adispatch_custom_event,
    dispatch_custom_event,
)
from langchain_core.language_models import LangSmithParams
from langchain_core.prompt_values import PromptValue
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import (
    ensure_config,
    get_async_callback_manager_for_config,
    get_callback_manager_for_config,
)
from pydantic import BaseModel, ConfigDict, PrivateAttr, SecretStr, ValidationError, model_validator

from mfs_core.adapters import (
    astream_events, await_results, engine_for, rename_max_tokens, settings_from_fields, stream_events, wait_results,
)
from mfs_core.answers import AnswerExtractor
from mfs_core.errors import one_line, unknown_name_message
from mfs_core.decoders import get_decoder
from mfs_core.engine import MFSEngine
from mfs_core.events import DecodeEvent, StepEvent
from mfs_core.settings import MFSSettings
from mfs_core.streaming import DecodeStream
from mfs_core.types import DecodeResult

__all__ = ["SETTINGS_FIELDS", "STEP_EVENT", "STOP_EVENT", "MFSParams"]

STEP_EVENT = "mfs_step"
"""Name of the custom callback event fired after each finished MFS step (data: ``StepEvent.to_dict()``)."""

STOP_EVENT = "mfs_stop"
"""Name of the custom callback event fired when the search stops (data: ``StopEvent.to_dict()``)."""

SETTINGS_FIELDS: tuple[str, ...] = tuple(MFSSettings.model_fields)
"""Names of the :class:`MFSSettings` fields, each also a field of the LangChain classes."""

_BACKEND_FIELDS = ("backend", "model", "device", "dtype", "batch_size")
_DEFAULTS = {name: field.default for name, field in MFSSettings.model_fields.items()}
_CALL_KEYS = (frozenset(SETTINGS_FIELDS) - {"api_key"}) | {"max_tokens", "method"}
"""Keywords a call may set: every setting but the secret ``api_key`` (call keywords reach
the ``invocation_params`` that tracing records), ``max_tokens`` and ``method``."""
_FRAMEWORK_KEYS = frozenset({"stream"})  # LangChain's own call flag, not a model setting

BuildPrompts = Callable[[MFSEngine, MFSSettings], list[str]]
"""Turns the call's input into rendered model prompts with the engine's chat template."""

VoteKey = Callable[[], "AnswerExtractor | None"]
"""Called after the prompts are built: the key the call's decodes vote by (None: the answer)."""


class MFSParams(BaseModel):
    """The MFS settings, engine and call plumbing shared by the LangChain classes.

    A mixin placed before the LangChain base class (``class MFSLLM(MFSParams, BaseLLM)``);
    it relies on the base's ``custom_get_token_ids`` and ``_get_ls_params``.

    Every field not given takes its value from the ``MFS_*`` environment variable of the
    same name (``MFS_STEP_BEAM_SIZE=4``), else the :class:`MFSSettings` default; with an
    injected ``engine`` it takes the engine's settings instead. Fields are validated by
    :class:`MFSSettings`: a bad value raises ``pydantic.ValidationError`` naming it.
    ``max_tokens`` is accepted as LangChain's standard name for ``max_answer_tokens``. An
    unknown argument raises a one-line ``TypeError`` naming the closest valid one.
    ``api_key`` is a ``SecretStr`` (``lc_secrets``: ``MFS_API_KEY``) and never enters the
    repr, ``_identifying_params`` (the cache key, ``invocation_params``, ``save()``) or a
    call's keywords.
    """

    model_config = ConfigDict(extra="forbid", protected_namespaces=(), arbitrary_types_allowed=True)

    # --- model and backend -------------------------------------------------------------
    model: str = _DEFAULTS["model"]
    """Hugging Face model name or local path; ``"mfs-demo"`` (default) is the bundled demo model."""
    backend: Literal["transformers", "vllm", "openai"] = _DEFAULTS["backend"]
    """Backend that samples from the model (default ``"transformers"``)."""
    device: str = _DEFAULTS["device"]
    """Torch device of the transformers backend: ``"auto"`` (default; CUDA if present), ``"cpu"``, ``"cuda:1"``."""
    dtype: Literal["auto", "float32", "float16", "bfloat16"] = _DEFAULTS["dtype"]
    """Weight dtype (default ``"auto"``: float32 on CPU, the checkpoint's on GPU)."""
    seed: int = _DEFAULTS["seed"]
    """Seed of every random choice of a decode (default 0): the same prompt and seed give the same answer."""
    batch_size: int = _DEFAULTS["batch_size"]
    """Most sequences in one forward pass of the transformers backend (default 256)."""

    # --- vLLM and OpenAI-compatible backends (see MFSSettings for ranges) ----------------
    base_urls: list[str] = _DEFAULTS["base_urls"]
    """``backend="openai"``: base URLs of the OpenAI-compatible servers (default []); a round's requests are spread across them."""
    api_key: SecretStr | None = _DEFAULTS["api_key"]
    """``backend="openai"``: bearer token sent to the servers (default None: none, or
    ``MFS_API_KEY``). A ``SecretStr``: kept out of repr, callbacks, the cache key and
    ``save()`` (``lc_secrets`` maps it to ``MFS_API_KEY``)."""
    request_timeout: float = _DEFAULTS["request_timeout"]
    """``backend="openai"``: seconds one HTTP attempt may wait (default 600)."""
    max_retries: int = _DEFAULTS["max_retries"]
    """``backend="openai"``: retries after a 429, 5xx, timeout or connection error (default 3)."""
    server_n: Literal["auto", "yes", "no"] = _DEFAULTS["server_n"]
    """``backend="openai"``: whether the servers return n samples per request (default "auto": detected
    once; "no" for llama.cpp's server and Ollama sends one request per sample)."""
    tokenizer: str | None = _DEFAULTS["tokenizer"]
    """Local tokenizer path or cached name (default None: the model's own)."""
    num_parameters: int | None = _DEFAULTS["num_parameters"]
    """Parameter count for the FLOPs estimate 6·n·P (default None: read from the model config)."""
    tensor_parallel_size: int = _DEFAULTS["tensor_parallel_size"]
    """``backend="vllm"``: GPUs the model is split across (default 1)."""
    gpu_memory_utilization: float = _DEFAULTS["gpu_memory_utilization"]
    """``backend="vllm"``: fraction of GPU memory vLLM may use (default 0.9)."""
    kv_cache_gib: float | None = _DEFAULTS["kv_cache_gib"]
    """``backend="vllm"``: KV cache in GiB (default None: 4 GiB on vLLM's CPU build, vLLM's sizing on a GPU)."""
    max_model_len: int | None = _DEFAULTS["max_model_len"]
    """Context window in tokens for vLLM, or overriding the server's (default None)."""
    enable_prefix_caching: bool = _DEFAULTS["enable_prefix_caching"]
    """``backend="vllm"``: reuse the KV cache of shared prompt prefixes (default True)."""
    vllm_kwargs: dict[str, Any] = _DEFAULTS["vllm_kwargs"]
    """``backend="vllm"``: further ``vllm.LLM`` keyword arguments (default {})."""

    # --- prompt format -----------------------------------------------------------------
    prompt_format: Literal["auto", "chat", "raw"] = _DEFAULTS["prompt_format"]
    """How an LLM prompt becomes the model prompt: ``"chat"`` wraps it as the user message of
    the chat template plus ``assistant_prefix``; ``"raw"`` uses it verbatim; ``"auto"``
    (default) is ``"chat"`` when the tokenizer has a template. Chat models always use the template."""
    assistant_prefix: str = _DEFAULTS["assistant_prefix"]
    """Text that opens the assistant's answer (default ``"The reasoning steps are:\\n\\n"``)."""
    system_prompt: str | None = _DEFAULTS["system_prompt"]
    """System message of ``"chat"``-format LLM prompts (default None: none)."""
    step_delimiter: str = _DEFAULTS["step_delimiter"]
    """Text that ends one reasoning step (default ``"\\n"``)."""
    end_marker: str = _DEFAULTS["end_marker"]
    """Text that closes an answer (default ``"<end_of_reasoning>"``; the model's EOS also does)."""
    tool_call_parser: Literal["auto", "hermes", "llama3_json", "mistral"] = _DEFAULTS["tool_call_parser"]
    """How tool calls are read from the chosen completion (default ``"auto"``: by the chat template)."""
    constrain_tool_names: bool = _DEFAULTS["constrain_tool_names"]
    """Keep the names of the calls the model writes to the bound tools (default True; the
    transformers backend honours it)."""
    answer_trigger: str | None = _DEFAULTS["answer_trigger"]
    """Appended to a completed path that states no answer, to read one (default None: off;
    e.g. ``"\\nThe answer is:"`` for a pretrained model that loops to the token cap)."""
    answer_trigger_tokens: int = _DEFAULTS["answer_trigger_tokens"]
    """Most tokens read after ``answer_trigger`` (default 32)."""
    max_step_tokens: int = _DEFAULTS["max_step_tokens"]
    """Most tokens of one reasoning step (default 64)."""
    max_answer_tokens: int = _DEFAULTS["max_answer_tokens"]
    """Most tokens of one foresight rollout or completion (default 256); ``max_tokens`` sets it.
    The returned path can be longer: up to ``max_steps`` steps plus one completion."""

    # --- MFS -----------------------------------------------------------------------------
    step_beam_size: int = _DEFAULTS["step_beam_size"]
    """M, beams kept between steps (default 8, the paper's)."""
    num_rollouts: int = _DEFAULTS["num_rollouts"]
    """N, candidate steps sampled per beam (default 8, the paper's)."""
    foresight_rollouts: int = _DEFAULTS["foresight_rollouts"]
    """Foresight rollouts per candidate that survives width pruning (default 1)."""
    share_foresight: bool = _DEFAULTS["share_foresight"]
    """Survivors with the same path text share one foresight estimate (default True; False:
    the paper's rollout per survivor)."""
    reuse_rollouts: bool = _DEFAULTS["reuse_rollouts"]
    """A candidate equal to the first step of its beam's rollout reuses the rest of it as a
    foresight rollout, at no new tokens (default False)."""
    prune_lambda: float = _DEFAULTS["prune_lambda"]
    """λ1 of the width-pruning threshold μ + λ1·σ in standard deviations (default 0.8; eq. 10-11)."""
    temperature: float = _DEFAULTS["temperature"]
    """Sampling temperature of steps and rollouts, > 0 (default 0.7). MFS samples; for
    reproducible output fix ``seed`` instead of lowering this."""
    rollout_temperature: float | None = _DEFAULTS["rollout_temperature"]
    """Sampling temperature of foresight rollouts and completions (default None: ``temperature``)."""
    top_p: float = _DEFAULTS["top_p"]
    """Nucleus sampling mass in (0, 1] (default 1.0)."""
    stop_epsilon: float = _DEFAULTS["stop_epsilon"]
    """ε_stop of the martingale convergence test max V <= ε_stop, nats (default 1e-6; eq. 12)."""
    max_steps: int = _DEFAULTS["max_steps"]
    """Most deliberation (foresight) steps (default 8)."""
    min_steps: int = _DEFAULTS["min_steps"]
    """Steps done before the convergence test may stop (default 1)."""
    selection_temperature: float = _DEFAULTS["selection_temperature"]
    """T of softmax(V / T) when beams are drawn (default 0.1)."""
    selection: Literal["sample", "top_k"] = _DEFAULTS["selection"]
    """``"sample"`` (default): draw M beams by softmax(V/T); ``"top_k"``: keep the best M."""
    baseline: Literal["parent_foresight", "parent_step"] = _DEFAULTS["baseline"]
    """Step-value baseline: the parent's foresight quality (default; eq. 8) or its step log-prob."""
    aggregation: Literal["majority", "best_quality"] = _DEFAULTS["aggregation"]
    """``"majority"`` (default): vote over extracted answers; ``"best_quality"``: the best path."""
    max_finished_fraction: float = _DEFAULTS["max_finished_fraction"]
    """Most finished candidates kept per step, as a fraction of M (default 0.6)."""
    width_pruning: bool = _DEFAULTS["width_pruning"]
    """Apply width pruning (default True)."""
    early_stopping: bool = _DEFAULTS["early_stopping"]
    """Apply the martingale convergence stop (default True)."""
    convergence_finish: Literal["parent_beams", "converged_rollouts"] = _DEFAULTS["convergence_finish"]
    """On convergence, finish from the parent beams (default) or from the converged step's beams."""
    generate_timeout: float | None = _DEFAULTS["generate_timeout"]
    """Most seconds one backend call of a decode may take (default None: no limit)."""

    # --- the adapter -------------------------------------------------------------------
    method: str = "mfs"
    """Registered decoder (default ``"mfs"``; baselines where installed)."""
    stop: list[str] | None = None
    """Stop sequences applied to every call, together with the call's own ``stop``: the
    returned text is cut before the first occurrence of any of them (default None)."""
    timeout: float | None = None
    """Most seconds a call waits for its decodes (default None: no limit). On timeout the
    call raises ``TimeoutError`` and abandons its decodes, as a cancelled async call or a
    stream closed early does: the engine drops them at its next round boundary (after the
    model call in flight), so ``with_retry`` / ``with_fallbacks`` never pile work onto it."""

    _engine: MFSEngine | None = PrivateAttr(default=None)
    _settings_cache: tuple[tuple[Any, ...], MFSSettings] | None = PrivateAttr(default=None)

    def __init__(self, *, engine: MFSEngine | None = None, **data: Any) -> None:
        """Build from keyword fields; ``engine`` injects an engine to decode with.

        Args:
            engine: an :class:`MFSEngine` (for instance around your own backend). Fields
                not given take its settings; None (default) builds, on first use, the
                engine shared by every instance with the same backend fields.
            **data: fields (see the class attributes).

        Raises:
            TypeError: ``engine`` is not an :class:`MFSEngine`.
            ValueError: a backend field given differs from the injected engine's.
            TypeError: an unknown argument (one line naming it and the closest valid name).
            pydantic.ValidationError: a bad value; one line naming the field, the value and
                the allowed range (:class:`~mfs_core.errors.OneLineValidationError`).
        """
        valid = set(type(self).model_fields) | {"max_tokens"}
        valid |= {f.alias for f in type(self).model_fields.values() if f.alias}
        unknown = [name for name in data if name not in valid]
        if unknown:
            raise TypeError(unknown_name_message(type(self).__name__, unknown, valid))
        data = rename_max_tokens(data)
        if engine is not None:
            if not isinstance(engine, MFSEngine):
                msg = f"engine must be an MFSEngine, got {type(engine).__name__}"
                raise TypeError(msg)
            for name in _BACKEND_FIELDS:
                given = data.get(name)
                if given is not None and given != getattr(engine.settings, name):
                    msg = (
                        f"{name}={given!r} differs from the injected engine's {name}="
                        f"{getattr(engine.settings, name)!r}; leave it out or build the engine with it"
                    )
                    raise ValueError(msg)
            data = {**engine.settings.model_dump(), **data}
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise one_line(exc, MFSSettings) from None
        self._engine = engine

    @model_validator(mode="before")
    @classmethod
    def _resolve_settings(cls, data: Any) -> Any:
        """Fill every settings field: given values, then ``MFS_*`` variables, then defaults."""
        if not isinstance(data, dict):
            return data
        data = rename_max_tokens(data)
        settings = settings_from_fields({name: data[name] for name in SETTINGS_FIELDS if name in data})
        return {**data, **settings.model_dump()}

    @model_validator(mode="after")
    def _check_method(self) -> MFSParams:
        get_decoder(self.method)  # ValueError listing the registered decoders
        return self

    # --- what the instance decodes with ------------------------------------------------
    @property
    def settings(self) -> MFSSettings:
        """The :class:`MFSSettings` the fields describe (rebuilt when a field changes)."""
        values = tuple(getattr(self, name) for name in SETTINGS_FIELDS)
        cached = self._settings_cache
        if cached is None or cached[0] != values:
            cached = (values, MFSSettings(**dict(zip(SETTINGS_FIELDS, values))))
            self._settings_cache = cached
        return cached[1]

    @property
    def engine(self) -> MFSEngine:
        """The engine that decodes: the injected one, else the one shared by every instance
        with the same backend fields (the model loads on first access)."""
        return engine_for(self.settings, self._engine)

    @property
    def lc_secrets(self) -> dict[str, str]:
        """LangChain's map of secret fields to the environment variables that hold them."""
        return {"api_key": "MFS_API_KEY"}

    @property
    def _identifying_params(self) -> dict[str, Any]:
        """Every setting but ``api_key``, the decoder and the instance's stop sequences.

        LangChain's cache key, the ``invocation_params`` of ``on_llm_start`` (what tracing
        services record) and what ``save()`` writes. ``api_key`` never enters them. The
        instance's ``stop`` is keyed ``instance_stop``: LangChain writes the call's own
        ``stop`` under ``stop`` in the same dict, and both cut the text.
        """
        return {**self.settings.model_dump(exclude={"api_key"}), "method": self.method, "instance_stop": self.stop}

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> LangSmithParams:
        """LangSmith's standard parameters; ``ls_max_tokens`` is ``max_answer_tokens``."""
        params = super()._get_ls_params(stop=stop, **kwargs)  # type: ignore[misc]
        params["ls_provider"] = "mfs"
        kwargs = rename_max_tokens(kwargs)
        params["ls_max_tokens"] = kwargs.get("max_answer_tokens") or self.max_answer_tokens
        stops = self._stops(stop)
        if stops:
            params["ls_stop"] = stops
        return params

    def get_token_ids(self, text: str) -> list[int]:
        """Token ids of ``text`` by ``custom_get_token_ids``.

        Raises:
            NotImplementedError: no ``custom_get_token_ids`` was given. MFS backends count
                tokens (:meth:`get_num_tokens`) but do not expose ids; LangChain's default
                would download GPT-2's tokenizer.
        """
        if self.custom_get_token_ids is not None:  # type: ignore[attr-defined]
            return self.custom_get_token_ids(text)  # type: ignore[attr-defined]
        msg = "MFS models count tokens but do not expose token ids; use get_num_tokens() or pass custom_get_token_ids"
        raise NotImplementedError(msg)

    def get_num_tokens(self, text: str) -> int:
        """Tokens of ``text`` under the model's own tokenizer (no special tokens added).

        Loads the model on first use. ``custom_get_token_ids``, if given, counts instead.
        """
        if self.custom_get_token_ids is not None:  # type: ignore[attr-defined]
            return len(self.custom_get_token_ids(text))  # type: ignore[attr-defined]
        return self.engine.backend.count_tokens(text)

    # --- calls -------------------------------------------------------------------------
    def _stops(self, stop: Sequence[str] | None) -> list[str]:
        """The instance's stop sequences followed by the call's, without repeats."""
        if isinstance(stop, str):
            msg = f"stop must be a list of strings, got the string {stop!r}"
            raise TypeError(msg)
        return list(dict.fromkeys([*(self.stop or []), *(stop or [])]))

    def _convert_input(self, model_input: Any) -> Any:
        """LangChain's input coercion, with a one-line ``TypeError`` for what it cannot take.

        LangChain reads ``bytes`` as a sequence of ints ("Unsupported message type: <class
        'int'>" with a URL) and other objects as "Invalid input type"; this names the type
        and the value instead.

        Raises:
            TypeError: ``model_input`` is not a string, a ``PromptValue`` or a list of messages.
        """
        if isinstance(model_input, (bytes, bytearray)) or not isinstance(model_input, (str, PromptValue, Sequence)):
            msg = (
                f"{type(self).__name__} input must be a string, a PromptValue or a list of messages, "
                f"got {type(model_input).__name__}: {model_input!r:.80}"
            )
            raise TypeError(msg)
        return super()._convert_input(model_input)  # type: ignore[misc]

    def _call_settings(self, kwargs: dict[str, Any]) -> tuple[MFSSettings, str]:
        """Settings and decoder of one call: the instance's, changed by the call's keywords.

        Raises:
            TypeError: a keyword that is neither a setting nor ``method`` (listing them).
            ValueError / pydantic.ValidationError: a bad value or an unknown decoder.
        """
        kwargs = {key: value for key, value in kwargs.items() if key not in _FRAMEWORK_KEYS}
        unknown = sorted(set(kwargs) - _CALL_KEYS)
        if unknown:
            msg = f"unknown keyword arguments {unknown}; a call takes MFS settings ({', '.join(SETTINGS_FIELDS)}), max_tokens and method"
            raise TypeError(msg)
        method = kwargs.pop("method", self.method)
        get_decoder(method)
        return settings_from_fields(rename_max_tokens(kwargs), base=self.settings), method

    def _with_call_settings(self, kwargs: dict[str, Any]) -> tuple[MFSParams, dict[str, Any]]:
        """This instance with the call's setting keywords applied, and the other keywords.

        Used before LangChain builds its cache key, so that a cached answer is only reused
        for a call with the same settings. ``self`` when the call sets none.

        Raises:
            ValueError / pydantic.ValidationError: a bad value or an unknown decoder.
        """
        setting_keys = [key for key in kwargs if key in _CALL_KEYS]
        if not setting_keys:
            return self, kwargs
        settings, method = self._call_settings({key: kwargs[key] for key in setting_keys})
        update = {name: getattr(settings, name) for name in SETTINGS_FIELDS}
        rest = {key: value for key, value in kwargs.items() if key not in setting_keys}
        return self.model_copy(update={**update, "method": method}), rest

    def _decode(
        self, build: BuildPrompts, kwargs: dict[str, Any], vote: VoteKey | None = None
    ) -> tuple[list[DecodeResult], str]:
        """Render the call's prompts, decode them together, wait; results and the model name.

        ``vote``, called after ``build``, gives the key the decodes vote by (None: the
        extracted answer); ``ChatMFS`` votes over actions when tools are bound.

        Raises:
            TimeoutError: the decodes did not finish within ``timeout`` seconds.
            The first exception among the decodes (the others still complete).
        """
        settings, method = self._call_settings(kwargs)
        engine = engine_for(settings, self._engine)
        prompts = build(engine, settings)
        answer_key = vote() if vote is not None else None
        futures = engine.submit_prompts(prompts, settings=settings, method=method, answer_key=answer_key)
        return wait_results(futures, self.timeout), engine.backend.model_name

    async def _adecode(
        self, build: BuildPrompts, kwargs: dict[str, Any], vote: VoteKey | None = None
    ) -> tuple[list[DecodeResult], str]:
        """Async :meth:`_decode`: loading, rendering and decoding never block the event loop."""
        settings, method = self._call_settings(kwargs)

        def prepare() -> tuple[MFSEngine, list[str]]:
            engine = engine_for(settings, self._engine)  # may load the model
            return engine, build(engine, settings)

        engine, prompts = await asyncio.to_thread(prepare)
        answer_key = vote() if vote is not None else None
        futures = engine.submit_prompts(prompts, settings=settings, method=method, answer_key=answer_key)
        # A timeout or a cancelled task abandons the decodes: the engine drops them at its next round.
        return await await_results(futures, self.timeout), engine.backend.model_name

    def _open_stream(
        self, build: BuildPrompts, kwargs: dict[str, Any], vote: VoteKey | None = None
    ) -> tuple[DecodeStream, str]:
        """Render the call's prompt and start its decode; its event stream and the model name.

        ``vote`` as in :meth:`_decode`.

        Raises:
            As :meth:`_decode`, before the decode starts.
        """
        settings, method = self._call_settings(kwargs)
        engine = engine_for(settings, self._engine)
        prompts = build(engine, settings)
        answer_key = vote() if vote is not None else None
        stream = engine.stream_prompts(prompts, settings=settings, method=method, answer_key=answer_key)
        return stream, engine.backend.model_name

    async def _aopen_stream(
        self, build: BuildPrompts, kwargs: dict[str, Any], vote: VoteKey | None = None
    ) -> tuple[DecodeStream, str]:
        """Async :meth:`_open_stream`: loading and rendering run off the event loop."""
        return await asyncio.to_thread(self._open_stream, build, kwargs, vote)

    def _events(self, stream: DecodeStream, run_manager: CallbackManagerForLLMRun | None) -> Iterator[DecodeEvent]:
        """The stream's events, each first fired as a custom callback event (:class:`_EventSink`).

        Call it at the start of ``_stream`` (before its first yield): the sink is chosen then.

        Raises:
            TimeoutError: the decode did not finish within ``timeout`` seconds.
            The decode's exception, after its last event.
        """
        sink = _EventSink(run_manager, is_async=False)
        return self._fired(stream, sink)

    def _fired(self, stream: DecodeStream, sink: _EventSink) -> Iterator[DecodeEvent]:
        for event in stream_events(stream, self.timeout):  # a timeout or an early close abandons the decode
            sink.fire(event)
            yield event

    def _aevents(
        self, stream: DecodeStream, run_manager: AsyncCallbackManagerForLLMRun | None
    ) -> AsyncIterator[DecodeEvent]:
        """Async :meth:`_events`: awaits the engine without blocking the event loop."""
        sink = _EventSink(run_manager, is_async=True)
        return self._afired(stream, sink)

    async def _afired(self, stream: DecodeStream, sink: _EventSink) -> AsyncIterator[DecodeEvent]:
        events = astream_events(stream, self.timeout)  # a timeout or a cancelled task abandons the decode
        try:
            async for event in events:
                await sink.afire(event)
                yield event
        finally:
            await events.aclose()


def _custom_event(event: DecodeEvent) -> tuple[str, dict[str, Any]]:
    """Name and data of the custom callback event for a decode event."""
    return (STEP_EVENT if isinstance(event, StepEvent) else STOP_EVENT), event.to_dict()


def _callback_manager(kind: type, run_manager: Any) -> Any:
    """A callback manager with the LLM run's handlers, tags and metadata (to fire custom
    events on that run, as ``dispatch_custom_event`` does inside a runnable)."""
    return kind(
        handlers=run_manager.handlers,
        inheritable_handlers=run_manager.inheritable_handlers,
        parent_run_id=run_manager.parent_run_id,
        tags=run_manager.tags,
        inheritable_tags=run_manager.inheritable_tags,
        metadata=run_manager.metadata,
        inheritable_metadata=run_manager.inheritable_metadata,
    )


_T = TypeVar("_T")
_END = object()

_STREAM_RUN: ContextVar[tuple[RunnableConfig, uuid.UUID] | None] = ContextVar("mfs_stream_run", default=None)
"""The config and run id of a chat model ``stream`` call while its ``_stream`` starts."""


class _EventSink:
    """Where a call's custom callback events (``mfs_step``, ``mfs_stop``) go.

    In order: the LLM run's ``run_manager`` when LangChain passes one (``BaseLLM.stream``,
    the v3 event stream); else the run that :func:`stream_with_run` opened (``BaseChatModel``
    calls ``_stream`` without its run manager); else ``dispatch_custom_event`` on the
    enclosing runnable's run (a chat model invoked inside a chain); else nowhere.
    """

    def __init__(self, run_manager: Any, *, is_async: bool) -> None:
        self.manager: Any = None
        self.run_id: uuid.UUID | None = None
        self.ambient = False
        call = _STREAM_RUN.get()
        if run_manager is not None:
            self.manager = _callback_manager(AsyncCallbackManager if is_async else CallbackManager, run_manager)
            self.run_id = run_manager.run_id
        elif call is not None:
            config, self.run_id = call
            configure = get_async_callback_manager_for_config if is_async else get_callback_manager_for_config
            self.manager = configure(config)
        else:
            self.ambient = True

    def fire(self, event: DecodeEvent) -> None:
        """Fire ``event`` as a custom event (sync handlers path)."""
        name, data = _custom_event(event)
        if self.manager is not None:
            self.manager.on_custom_event(name, data, run_id=self.run_id)
        elif self.ambient:
            try:
                dispatch_custom_event(name, data)
            except RuntimeError:  # not inside a run: nobody listens
                self.ambient = False

    async def afire(self, event: DecodeEvent) -> None:
        """Async :meth:`fire`."""
        name, data = _custom_event(event)
        if self.manager is not None:
            await self.manager.on_custom_event(name, data, run_id=self.run_id)
        elif self.ambient:
            try:
                await adispatch_custom_event(name, data)
            except RuntimeError:
                self.ambient = False


def stream_with_run(start: Callable[[RunnableConfig], Iterator[_T]], config: RunnableConfig | None) -> Iterator[_T]:
    """Run LangChain's ``stream`` with its run id chosen here, so ``_stream`` can fire
    custom events on that run (see :class:`_EventSink`).

    ``start(config)`` is the framework's ``stream``; the run (config, id) is visible to
    ``_stream`` only while the first chunk is produced, when ``_stream`` reads it.
    """
    config = ensure_config(config)
    run_id = config.get("run_id") or uuid.uuid4()
    inner = start({**config, "run_id": run_id})
    token = _STREAM_RUN.set((config, run_id))
    try:
        first = next(inner, _END)
    finally:
        _STREAM_RUN.reset(token)
    if first is _END:
        return
    yield first
    yield from inner


async def astream_with_run(
    start: Callable[[RunnableConfig], AsyncIterator[_T]], config: RunnableConfig | None
) -> AsyncIterator[_T]:
    """Async :func:`stream_with_run`."""
    config = ensure_config(config)
    run_id = config.get("run_id") or uuid.uuid4()
    inner = start({**config, "run_id": run_id})
    token = _STREAM_RUN.set((config, run_id))
    try:
        first = await anext(inner, _END)
    finally:
        _STREAM_RUN.reset(token)
    if first is _END:
        return
    yield first
    async for item in inner:
        yield item
