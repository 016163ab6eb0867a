"""What :class:`~langchain_mfs.MFSLLM` and :class:`~langchain_mfs.ChatMFS` share: the call path.

The fields (:mod:`langchain_mfs._fields`) resolved once at construction (keyword arguments,
then ``MFS_*`` environment variables, then the defaults, or the injected engine's settings),
the engine that decodes them, per-call overrides, the decode's start and the wait for the
engine's futures, and its events as LangChain callbacks (:mod:`langchain_mfs._events`). No
decoding logic: that is :class:`~mfs_core.MFSEngine`'s.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import LangSmithParams
from langchain_core.prompt_values import PromptValue
from pydantic import PrivateAttr, ValidationError, model_validator

from langchain_mfs._events import STEP_EVENT, STOP_EVENT, _EventSink, astream_with_run, stream_with_run
from langchain_mfs._fields import SETTINGS_FIELDS, MFSFields
from mfs_core.adapters import (
    OwnedEngines, astream_events, await_results, check_engine, engine_for, rename_max_tokens, settings_from_fields,
    stream_events, wait_results,
)
from mfs_core.errors import one_line, unknown_name_message
from mfs_core.decoders import get_decoder
from mfs_core.engine import MFSEngine
from mfs_core.events import DecodeEvent
from mfs_core.settings import MFSSettings
from mfs_core.streaming import DecodeStream
from mfs_core.tools.call import PreparedCall, stream_calls, submit_calls
from mfs_core.types import DecodeResult

# STEP_EVENT, STOP_EVENT, SETTINGS_FIELDS and the stream helpers stay importable from here
__all__ = ["SETTINGS_FIELDS", "STEP_EVENT", "STOP_EVENT", "MFSParams", "astream_with_run", "stream_with_run"]

_CALL_KEYS = (frozenset(SETTINGS_FIELDS) - {"api_key"}) | {"max_tokens", "method"}
"""Keywords a call may set: every setting but the secret ``api_key`` (call keywords reach
the ``invocation_params`` that tracing records), ``max_tokens`` and ``method``."""
_FRAMEWORK_KEYS = frozenset({"stream"})  # LangChain's own call flag, not a model setting

PrepareCalls = Callable[[MFSEngine, MFSSettings], list[PreparedCall]]
"""Turns the call's input into prepared calls on the call's engine and settings
(:func:`~mfs_core.tools.call.prepare_call` for chat, :func:`~mfs_core.tools.call.prepare_prompts` for text)."""


class MFSParams(MFSFields):
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

    _engine: MFSEngine | None = PrivateAttr(default=None)
    _owned: OwnedEngines = PrivateAttr(default_factory=OwnedEngines)
    _settings_cache: tuple[tuple[Any, ...], MFSSettings] | None = PrivateAttr(default=None)

    def __init__(self, *, engine: MFSEngine | None = None, **data: Any) -> None:
        """Build from keyword fields; ``engine`` injects an engine to decode with.

        Args:
            engine: an :class:`MFSEngine` (for instance around your own backend). Fields
                not given take its settings; it decodes every call whose backend settings
                (:data:`~mfs_core.settings.BACKEND_FIELDS`) equal its own, and the others are
                refused. None (default) builds, on first use, the engine shared by every
                instance with the same backend settings.
            **data: fields (see the class attributes).

        Raises:
            TypeError: ``engine`` is not an :class:`MFSEngine`.
            ValueError: a backend setting given differs from the injected engine's (one line
                naming the fields, :func:`mfs_core.adapters.check_engine`).
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
            data = {**engine.settings.model_dump(), **data}
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise one_line(exc, MFSSettings) from None
        if engine is not None:
            check_engine(engine, self.settings, type(self).__name__)
        self._engine = engine
        self._owned.bind(self)  # a dropped instance closes the engines it made (not an injected one)

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
            cached = (values, MFSSettings.from_values(dict(zip(SETTINGS_FIELDS, values))))  # no I/O
            self._settings_cache = cached
        return cached[1]

    @property
    def engine(self) -> MFSEngine:
        """The engine that decodes: the injected one, else the one shared by every instance
        with the same backend settings (the model loads on first access)."""
        return self._engine_for(self.settings)

    def _engine_for(self, settings: MFSSettings) -> MFSEngine:
        """The engine that decodes ``settings``: the injected one (refused when the backend
        settings differ, :func:`mfs_core.adapters.check_engine`), else this instance's engine on
        the shared backend, one per backend settings, made on first use and closed with this
        instance (:class:`mfs_core.adapters.OwnedEngines`)."""
        if self._engine is not None:
            return engine_for(settings, self._engine, owner=type(self).__name__)
        return self._owned.get(settings)

    def close(self) -> None:
        """Close the engines this instance made (an injected engine stays open: its owner closes it).

        Each counts one engine out of the shared backend, which closes (the model unloads; vLLM:
        its processes stop) with the last engine that shares it. The next call makes a new
        engine. Also done when the instance is garbage-collected or the interpreter exits, and by
        ``with ChatMFS(...) as chat:``.
        """
        self._owned.close()

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

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
        changed = self.model_copy(update={**update, "method": method})
        changed._settings_cache = (tuple(update.values()), settings)  # resolved once per call, not again by .settings
        return changed, rest

    def _decode(self, prepare: PrepareCalls, kwargs: dict[str, Any]) -> tuple[list[DecodeResult], list[PreparedCall], str]:
        """Prepare the call's prompts (``prepare``, on the call's engine and settings), decode them
        together, wait; the results, the prepared calls (each finishes its result:
        :meth:`~mfs_core.tools.call.PreparedCall.finish`) and the model name.

        Raises:
            DecodeTimeoutError: the decodes did not finish within ``timeout`` seconds (a TimeoutError).
            The first exception among the decodes (the others are abandoned).
        """
        settings, method = self._call_settings(kwargs)
        engine = self._engine_for(settings)
        calls = prepare(engine, settings)
        futures = submit_calls(engine, calls, settings, method=method)
        return wait_results(futures, self.timeout), calls, engine.backend.model_name

    async def _adecode(
        self, prepare: PrepareCalls, kwargs: dict[str, Any]
    ) -> tuple[list[DecodeResult], list[PreparedCall], str]:
        """Async :meth:`_decode`: loading, rendering and decoding never block the event loop."""
        settings, method = self._call_settings(kwargs)

        def start() -> tuple[MFSEngine, list[PreparedCall]]:
            engine = self._engine_for(settings)  # may load the model
            return engine, prepare(engine, settings)

        engine, calls = await asyncio.to_thread(start)
        futures = submit_calls(engine, calls, settings, method=method)
        # A timeout or a cancelled task abandons the decodes: the engine drops them at its next round.
        return await await_results(futures, self.timeout), calls, engine.backend.model_name

    def _open_stream(self, prepare: PrepareCalls, kwargs: dict[str, Any]) -> tuple[DecodeStream, PreparedCall, str]:
        """Prepare the call's one prompt and start its decode; its event stream, the prepared
        call and the model name.

        Raises:
            As :meth:`_decode`, before the decode starts.
        """
        settings, method = self._call_settings(kwargs)
        engine = self._engine_for(settings)
        calls = prepare(engine, settings)
        return stream_calls(engine, calls, settings, method=method), calls[0], engine.backend.model_name

    async def _aopen_stream(
        self, prepare: PrepareCalls, kwargs: dict[str, Any]
    ) -> tuple[DecodeStream, PreparedCall, str]:
        """Async :meth:`_open_stream`: loading and rendering run off the event loop."""
        return await asyncio.to_thread(self._open_stream, prepare, kwargs)

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


