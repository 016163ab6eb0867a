"""What :class:`~langchain_mfs.MFSLLM` and :class:`~langchain_mfs.ChatMFS` share: LangChain's side of a call.

The fields (:mod:`langchain_mfs._fields`) resolved once at construction (keyword arguments,
then ``MFS_*`` environment variables, then the defaults, or the injected engine's settings),
LangChain's call keywords handed to the call layer (:mod:`mfs_core.call`: settings, engine,
prepare, submit, wait or stream, finish) and the decode's events as LangChain callbacks
(:mod:`langchain_mfs._events`). No call or decoding logic: that is :mod:`mfs_core.call`'s and
:class:`~mfs_core.MFSEngine`'s.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import LangSmithParams
from langchain_core.prompt_values import PromptValue
from pydantic import PrivateAttr, ValidationError, model_validator

from langchain_mfs._events import STEP_EVENT, STOP_EVENT, _EventSink, astream_with_run, stream_with_run
from langchain_mfs._fields import ADAPTER_FIELDS, MFSFields
from mfs_core.call import (
    SETTING_KEYWORDS, Caller, CallKeywords, CallStream, EngineSource, check_adapter_arguments, check_engine,
    check_model_kwargs, join_stops, memo_settings, rename_max_tokens, settings_from_fields,
)
from mfs_core.call.engines import ClosesOnExit
from mfs_core.call.settings import SettingsMemo
from mfs_core.decoders import get_decoder
from mfs_core.engine import MFSEngine
from mfs_core.errors import one_line
from mfs_core.events import DecodeEvent
from mfs_core.settings import MFSSettings

# STEP_EVENT, STOP_EVENT and the stream helpers stay importable from here
__all__ = ["STEP_EVENT", "STOP_EVENT", "MFSParams", "astream_with_run", "stream_with_run"]

_FRAMEWORK_KEYS = frozenset({"stream"})  # LangChain's own call flag, not a call keyword


class MFSParams(MFSFields, ClosesOnExit):
    """The MFS settings, engine and call plumbing shared by the LangChain classes.

    A mixin placed before the LangChain base class (``class MFSLLM(MFSParams, BaseLLM)``);
    it relies on the base's ``custom_get_token_ids`` and ``_get_ls_params``.

    Every setting not given (a flat field, or a key of ``model_kwargs``) takes its value
    from the ``MFS_*`` environment variable of the same name (``MFS_STEP_BEAM_SIZE=4``), else
    the :class:`MFSSettings` default; with an injected ``engine`` it takes the engine's
    settings instead. Values are validated by :class:`MFSSettings`: a bad value raises
    ``pydantic.ValidationError`` naming it. ``max_tokens`` is accepted as LangChain's
    standard name for ``max_answer_tokens``. An unknown argument raises a one-line
    ``TypeError`` naming the closest valid one; a setting that is not a flat field, one
    saying to pass it in ``model_kwargs``. ``api_key`` is a ``SecretStr`` (``lc_secrets``:
    ``MFS_API_KEY``) and never enters the repr, ``_identifying_params`` (the cache key,
    ``invocation_params``, ``save()``) or a call's keywords.
    """

    _engines: EngineSource = PrivateAttr(default_factory=EngineSource)
    _base: MFSSettings | None = PrivateAttr(default=None)
    _settings_memo: SettingsMemo | None = PrivateAttr(default=None)

    def __init__(self, *, engine: MFSEngine | None = None, **data: Any) -> None:
        """Build from keyword fields; ``engine`` injects an engine to decode with.

        Args:
            engine: an :class:`MFSEngine` (for instance around your own backend). Settings
                not given take its settings; it decodes every call whose backend settings
                (:data:`~mfs_core.settings.BACKEND_FIELDS`) equal its own, and the others are
                refused. None (default) builds, on first use, the engine shared by every
                instance with the same backend settings.
            **data: fields (see the class attributes).

        Raises:
            TypeError: ``engine`` is not an :class:`MFSEngine`.
            ValueError: a backend setting given differs from the injected engine's (one line
                naming the fields, :func:`mfs_core.call.check_engine`).
            TypeError: an unknown argument (one line naming it and the closest valid name); a
                setting that is not a flat field (:func:`mfs_core.call.check_adapter_arguments`);
                a bad ``model_kwargs`` key (:func:`mfs_core.call.check_model_kwargs`).
            pydantic.ValidationError: a bad value; one line naming the field, the value and
                the allowed range (:class:`~mfs_core.errors.OneLineValidationError`).
        """
        owner = type(self).__name__
        data = rename_max_tokens(data)  # max_tokens, the frameworks' name, is max_answer_tokens
        fields = type(self).model_fields
        check_adapter_arguments(owner, data, set(fields) | {f.alias for f in fields.values() if f.alias})
        model_kwargs = check_model_kwargs(owner, data.pop("model_kwargs", None))
        engines = EngineSource(engine, owner=owner)  # TypeError for what is no MFSEngine
        given = {name: data[name] for name in ADAPTER_FIELDS if name in data}
        try:
            base = settings_from_fields({**model_kwargs, **given}, base=engine.settings if engine else None)
            super().__init__(**{**data, **{name: getattr(base, name) for name in ADAPTER_FIELDS}}, model_kwargs=model_kwargs)
        except ValidationError as exc:
            raise one_line(exc, MFSSettings) from None
        self._base = base
        self._settings_memo = (tuple(self._setting_values().items()), base)  # the fields are base's: not built again
        if engine is not None:
            check_engine(engine, self.settings, owner)
        self._engines = engines
        engines.bind(self)  # a dropped instance closes the engines it made (not an injected one)

    @model_validator(mode="after")
    def _check_method(self) -> MFSParams:
        get_decoder(self.method)  # ValueError listing the registered decoders
        return self

    # --- what the instance decodes with ------------------------------------------------
    @property
    def settings(self) -> MFSSettings:
        """The :class:`MFSSettings` the fields and ``model_kwargs`` describe, on those resolved at
        construction (rebuilt when a value changes; no environment read).

        Raises:
            TypeError / pydantic.ValidationError: a value set after construction that is no
                setting or out of range (one line).
        """
        if self._base is None:  # built without __init__ (model_validate): resolve now
            self._base = settings_from_fields(check_model_kwargs(type(self).__name__, self.model_kwargs))
        self._settings_memo = memo_settings(self._settings_memo, self._setting_values(), self._base, none_unset=False)
        return self._settings_memo[1]

    def _setting_values(self) -> dict[str, Any]:
        """Setting name -> this instance's value: ``model_kwargs``, then the flat fields."""
        return {**self.model_kwargs, **{name: getattr(self, name) for name in ADAPTER_FIELDS}}

    @property
    def engine(self) -> MFSEngine:
        """The engine that decodes: the injected one, else the one shared by every instance
        with the same backend settings (the model loads on first access)."""
        return self._engines.get(self.settings)

    def close(self) -> None:
        """Close the engines this instance made (an injected engine stays open: its owner closes it).

        Each counts one engine out of the shared backend, which closes (the model unloads; vLLM:
        its processes stop) with the last engine that shares it. The next call makes a new
        engine. Also done when the instance is garbage-collected or the interpreter exits, and by
        ``with ChatMFS(...) as chat:``.
        """
        self._engines.close()

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
        stops = join_stops(self.stop, stop)
        if stops:
            params["ls_stop"] = list(stops)
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

    def _caller(self) -> Caller:
        """The call layer's view of this instance: its engines, settings, decoder, stop sequences, timeout."""
        return Caller(self._engines, self.settings, self.method, tuple(self.stop or ()), self.timeout)

    def _call_kwargs(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """The call keywords of LangChain's ``kwargs`` (``ChatMFS`` also converts its tools)."""
        return {key: value for key, value in kwargs.items() if key not in _FRAMEWORK_KEYS}

    def _keywords(self, kwargs: dict[str, Any], stop: Sequence[str] | None) -> CallKeywords:
        """The call's keywords, checked (:meth:`mfs_core.call.CallKeywords.parse`).

        Raises:
            TypeError: a keyword that is not a call keyword (listing them); a bad ``stop``.
            ValueError: an unknown decoder, a bad ``response_format``.
        """
        return CallKeywords.parse(self._call_kwargs(kwargs), owner=type(self).__name__, stop=stop)

    def _with_call_settings(self, kwargs: dict[str, Any]) -> tuple[MFSParams, dict[str, Any]]:
        """This instance with the call's setting keywords applied, and the other keywords.

        Used before LangChain builds its cache key, so that a cached answer is only reused
        for a call with the same settings. ``self`` when the call sets none.

        Raises:
            ValueError / pydantic.ValidationError: a bad value, an unknown decoder, a setting the call's method
                does not take or one that loads the model (:class:`~mfs_core.decoders.ParamNotAccepted`).
        """
        setting_keys = [key for key in kwargs if key in SETTING_KEYWORDS]
        if not setting_keys:
            return self, kwargs
        keywords = CallKeywords.parse({key: kwargs[key] for key in setting_keys}, owner=type(self).__name__)
        keywords.check_params(self.method)
        settings = keywords.settings_on(self.settings)
        flat = {name: getattr(settings, name) for name in ADAPTER_FIELDS}
        others = {name: getattr(settings, name) for name in keywords.settings if name not in ADAPTER_FIELDS}
        update = {**flat, "model_kwargs": {**self.model_kwargs, **others}, "method": keywords.method or self.method}
        rest = {key: value for key, value in kwargs.items() if key not in setting_keys}
        changed = self.model_copy(update=update)
        changed._settings_memo = (tuple(changed._setting_values().items()), settings)  # resolved once per call
        return changed, rest

    def _events(self, call: CallStream, run_manager: CallbackManagerForLLMRun | None) -> Iterator[DecodeEvent]:
        """The call's events, each first fired as a custom callback event (:class:`_EventSink`).

        Call it at the start of ``_stream`` (before its first yield): the sink is chosen then.

        Raises:
            TimeoutError: the decode did not finish within ``timeout`` seconds.
            The decode's exception, after its last event.
        """
        sink = _EventSink(run_manager, is_async=False)
        return self._fired(call, sink)

    @staticmethod
    def _fired(call: CallStream, sink: _EventSink) -> Iterator[DecodeEvent]:
        for event in call.events():  # a timeout or an early close abandons the decode
            sink.fire(event)
            yield event

    def _aevents(self, call: CallStream, run_manager: AsyncCallbackManagerForLLMRun | None) -> AsyncIterator[DecodeEvent]:
        """Async :meth:`_events`: awaits the engine without blocking the event loop."""
        sink = _EventSink(run_manager, is_async=True)
        return self._afired(call, sink)

    @staticmethod
    async def _afired(call: CallStream, sink: _EventSink) -> AsyncIterator[DecodeEvent]:
        events = call.aevents()  # a timeout or a cancelled task abandons the decode
        try:
            async for event in events:
                await sink.afire(event)
                yield event
        finally:
            await events.aclose()  # type: ignore[attr-defined]
