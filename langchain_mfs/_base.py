"""What :class:`~langchain_mfs.MFSLLM` and :class:`~langchain_mfs.ChatMFS` share.

Every :class:`~mfs_core.settings.MFSSettings` field as a LangChain field, resolved once at
construction (keyword arguments, then ``MFS_*`` environment variables, then the defaults,
or the injected engine's settings), the engine that decodes them, per-call overrides and the
wait for the engine's futures. No decoding logic: that is :class:`~mfs_core.MFSEngine`'s.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from collections.abc import Callable, Sequence
from typing import Any, Literal

from langchain_core.language_models import LangSmithParams
from pydantic import BaseModel, ConfigDict, PrivateAttr, SecretStr, model_validator

from mfs_core.adapters import engine_for, rename_max_tokens, settings_from_fields, timeout_message
from mfs_core.errors import unknown_name_message
from mfs_core.decoders import get_decoder
from mfs_core.engine import MFSEngine
from mfs_core.settings import MFSSettings
from mfs_core.types import DecodeResult

__all__ = ["SETTINGS_FIELDS", "MFSParams"]

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
    tokenizer: str | None = _DEFAULTS["tokenizer"]
    """Local tokenizer path or cached name (default None: the model's own)."""
    num_parameters: int | None = _DEFAULTS["num_parameters"]
    """Parameter count for the FLOPs estimate 6·n·P (default None: read from the model config)."""
    tensor_parallel_size: int = _DEFAULTS["tensor_parallel_size"]
    """``backend="vllm"``: GPUs the model is split across (default 1)."""
    gpu_memory_utilization: float = _DEFAULTS["gpu_memory_utilization"]
    """``backend="vllm"``: fraction of GPU memory vLLM may use (default 0.9)."""
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
    prune_lambda: float = _DEFAULTS["prune_lambda"]
    """λ1 of the width-pruning threshold μ + λ1·σ in standard deviations (default 0.8; eq. 10-11)."""
    temperature: float = _DEFAULTS["temperature"]
    """Sampling temperature of steps and rollouts, > 0 (default 0.7). MFS samples; for
    reproducible output fix ``seed`` instead of lowering this."""
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

    # --- the adapter -------------------------------------------------------------------
    method: str = "mfs"
    """Registered decoder (default ``"mfs"``; baselines where installed)."""
    stop: list[str] | None = None
    """Stop sequences applied to every call, together with the call's own ``stop``: the
    returned text is cut before the first occurrence of any of them (default None)."""
    timeout: float | None = None
    """Most seconds a call waits for its decodes (default None: no limit). On timeout the
    call raises ``TimeoutError``; the engine still finishes the decode."""

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
            pydantic.ValidationError: a bad value (named).
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
        super().__init__(**data)
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

    def _decode(self, build: BuildPrompts, kwargs: dict[str, Any]) -> tuple[list[DecodeResult], str]:
        """Render the call's prompts, decode them together, wait; results and the model name.

        Raises:
            TimeoutError: the decodes did not finish within ``timeout`` seconds.
            The first exception among the decodes (the others still complete).
        """
        settings, method = self._call_settings(kwargs)
        engine = engine_for(settings, self._engine)
        futures = engine.submit_prompts(build(engine, settings), settings=settings, method=method)
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        results = []
        for future in futures:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                results.append(future.result(timeout=remaining))
            except concurrent.futures.TimeoutError as exc:
                raise TimeoutError(self._timeout_message(len(futures))) from exc
        return results, engine.backend.model_name

    async def _adecode(self, build: BuildPrompts, kwargs: dict[str, Any]) -> tuple[list[DecodeResult], str]:
        """Async :meth:`_decode`: loading, rendering and decoding never block the event loop."""
        settings, method = self._call_settings(kwargs)

        def prepare() -> tuple[MFSEngine, list[str]]:
            engine = engine_for(settings, self._engine)  # may load the model
            return engine, build(engine, settings)

        engine, prompts = await asyncio.to_thread(prepare)
        futures = engine.submit_prompts(prompts, settings=settings, method=method)
        # Shielded: a timeout or a cancelled caller stops waiting but never cancels the
        # engine's futures, which its worker thread still has to complete.
        waiting = asyncio.gather(*(asyncio.shield(asyncio.wrap_future(future)) for future in futures))
        try:
            results = await asyncio.wait_for(waiting, self.timeout)
        except asyncio.TimeoutError as exc:
            raise TimeoutError(self._timeout_message(len(futures))) from exc
        return list(results), engine.backend.model_name

    def _timeout_message(self, count: int) -> str:
        return timeout_message(count, self.timeout)
